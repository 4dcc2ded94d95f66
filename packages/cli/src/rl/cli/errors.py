"""Turn user errors (bad config, missing files, bad rows) into one clear line and exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    FileNotFoundError,
    LookupError,
    ImportError,
    AttributeError,
)


@contextmanager
def exit_on_user_error() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as error:
        typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from error
