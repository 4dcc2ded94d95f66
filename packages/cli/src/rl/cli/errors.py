"""How a command ends on an error: the user's mistake in one line, a bug with its traceback.

`rl.core.errors.UserError` (a bad config value, a missing file, a bad data row, a
package to install, ...) prints `error: <message>` on one line and exits 2, and so does a
write the user can fix (a full disk, a quota, permissions, a read-only file system: the
message names the file). A run stopped by a signal (`RunStopped`: SIGTERM or SIGINT, after
its checkpoint) prints its line and exits 128 + the signal's number (143, 130). Anything
else is a bug in rl: the full traceback, a line asking for a report, exit 1. A Ctrl-C
outside a run exits 130, as shells expect.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import click
import typer

from rl.core.atomic_files import USER_ERRNOS
from rl.core.errors import RunStopped, UserError

BUG_NOTE = (
    "This is a bug in rl, not in your config or data: please report it, with the command "
    "you ran and the traceback above."
)
# How typer/click end a command on purpose; never a bug.
_EXITS = (typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, click.Abort)


def one_line(message: str) -> str:
    """`message` with its lines joined by spaces."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


@contextmanager
def exit_on_error() -> Iterator[None]:
    """Run a command's body: user errors exit 2 in one line, bugs 1 with a traceback."""
    try:
        yield
    except _EXITS:
        raise
    except RunStopped as error:
        typer.secho(f"{one_line(str(error))}", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(code=error.exit_code) from None
    except UserError as error:
        typer.secho(f"error: {one_line(str(error))}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(code=130) from None
    except OSError as error:
        if error.errno not in USER_ERRNOS or not error.filename:
            _bug()
        where = f"{error.filename}" + (f" -> {error.filename2}" if error.filename2 else "")
        typer.secho(
            f"error: {where}: {error.strerror}; free space, or fix the path's permissions, "
            "and run again (a run with checkpoints resumes from its last one)",
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(code=2) from None
    except Exception:
        _bug()


def _bug() -> None:
    traceback.print_exc()
    typer.secho(BUG_NOTE, fg=typer.colors.RED, err=True)
    raise typer.Exit(code=1) from None
