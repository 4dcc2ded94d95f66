"""Opening the images of a data row, in the forms verl's layout stores them.

verl's preprocessing (its geo3k example) writes a row's images as a list column; read
back from parquet each is a `{"bytes": ..., "path": ...}` struct (what `datasets`' Image
feature writes), and verl also takes a path string or an `{"image": ...}` dict. A
relative path is taken from the data file's folder. Every image becomes RGB, as verl's
`process_image` makes it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rl.core.errors import DataError


def _from_path(value: str, where: str, folder: Path | None) -> Any:
    from PIL import Image

    path = Path(value.removeprefix("file://")).expanduser()
    if not path.is_absolute() and folder is not None and (folder / path).exists():
        path = folder / path
    if not path.exists():
        raise DataError(f"{where}: no image file at {value!r}; give a path that exists")
    return Image.open(path)


def open_image(cell: Any, where: str, folder: Path | None = None) -> Any:
    """A PIL RGB image from one image cell of a row (`where` names the file, row and
    image in errors)."""
    from PIL import Image

    image = cell
    if isinstance(cell, dict):
        if cell.get("bytes"):
            image = Image.open(io.BytesIO(cell["bytes"]))
        elif cell.get("path"):
            image = _from_path(str(cell["path"]), where, folder)
        elif cell.get("image") is not None:
            return open_image(cell["image"], where, folder)
        else:
            raise DataError(
                f"{where}: an image cell has neither 'bytes' nor 'path' (keys: "
                f"{sorted(cell)}); store each image as bytes or a path"
            )
    elif isinstance(cell, (bytes, bytearray)):
        image = Image.open(io.BytesIO(cell))
    elif isinstance(cell, str):
        image = _from_path(cell, where, folder)
    if not isinstance(image, Image.Image):
        raise DataError(
            f"{where}: an image cell is a {type(cell).__name__}; give bytes, a path or "
            "a {'bytes', 'path'} mapping"
        )
    try:
        return image.convert("RGB")
    except OSError as error:
        raise DataError(f"{where}: the image cannot be decoded ({error})") from error
