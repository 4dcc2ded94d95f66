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
