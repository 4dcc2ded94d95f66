"""The errors a user fixes, as opposed to bugs.

Everything the user can cause and fix (a config value, a data row, a file, a
checkpoint, their reward code, a run that cannot make progress) raises a
subclass of `UserError` whose message names what is wrong and what to do; the
CLI prints such a message as one line and exits 2. Any other exception is a
bug in rl and is shown with its traceback.

Each subclass also derives from the builtin a caller would catch (`ValueError`,
`RuntimeError`, ...), so library users keep the usual `except` clauses.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem in what the user gave us; the message says what and how to fix it."""


class ConfigError(UserError, ValueError):
    """A bad key or value; the message names the key, the value and what is allowed."""


class DataError(UserError, ValueError):
    """A bad data file or row; the message names the file and row."""


class CheckpointError(UserError, RuntimeError):
    """A checkpoint that cannot be written, found, verified or trusted."""


class RewardError(UserError, RuntimeError):
    """The reward function fails too often to go on (see `reward.max_error_rate`)."""


class TrainingError(UserError, RuntimeError):
    """Training cannot make progress (e.g. every update skipped on non-finite gradients)."""


class WorkerError(UserError, RuntimeError):
    """A worker process failed, died or did not answer in time; the message names the role,
    the rank and the last line of the worker's traceback (the whole one is in its log)."""


class RunFolderError(UserError, RuntimeError):
    """`trainer.output_dir` is in use by another run, or holds a finished one this run
    would overwrite; the message names the holder or the files and the way out."""


class ConfigChangeError(UserError, ValueError):
    """A resumed run's config differs from its checkpoint's in a setting that changes what
    is trained; the message lists each and how to allow them."""


class RunStopped(UserError, RuntimeError):
    """The run stopped on a signal (SIGTERM/SIGINT from a scheduler or the user): the step in
    progress finished and a checkpoint was written, or the step was abandoned. `exit_code`
    is 128 + the signal number, as shells report a process ended by that signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum

    def __reduce__(self) -> tuple[type[RunStopped], tuple[str, int]]:
        # pickled whole: the grace timer may fire inside code that ships exceptions
        # between ranks (torch.distributed.checkpoint's save does), which rebuilds them
        # from their arguments
        return type(self), (str(self.args[0]), self.signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
