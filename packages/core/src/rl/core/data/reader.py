"""Read dataset rows from parquet, jsonl, json or csv files (one or many)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.core.errors import DataError

SUPPORTED = (".parquet", ".jsonl", ".json", ".csv")


@dataclass(frozen=True)
class SourcedRow:
    """A row and where it came from, so errors can name the file and the row."""

    source: str
    index: int
    data: dict[str, Any]


def read_rows(files: str | Sequence[str]) -> list[SourcedRow]:
    """All rows of `files`, in order; each keeps its file name and row number."""
    paths = [files] if isinstance(files, str) else list(files)
    rows: list[SourcedRow] = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise DataError(
                f"data file {name} does not exist; check data.train_files / data.val_files"
            )
        try:
            records = _read(path)
        except UnicodeDecodeError as error:
            raise DataError(f"{path}: not UTF-8 text ({error})") from None
        if not records:
            raise DataError(f"{path}: no rows; check data.train_files / data.val_files")
        rows += [SourcedRow(str(path), i, record) for i, record in enumerate(records)]
    return rows


def _read(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return list(pq.read_table(path).to_pylist())
        except pa.ArrowException as error:
            raise DataError(f"{path}: not a readable parquet file ({error})") from None
    if suffix == ".jsonl":
        return [
            _json_line(path, i, line)
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())
            if line.strip()
        ]
    if suffix == ".json":
        text = path.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:  # JSON Lines saved as .json
            return [
                _json_line(path, i, line)
                for i, line in enumerate(text.splitlines())
                if line.strip()
            ]
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of objects, got {type(data).__name__}")
        for index, record in enumerate(data):
            if not isinstance(record, dict):
                raise DataError(
                    f"{path}, item {index}: expected a JSON object, got {type(record).__name__}"
                )
        return data
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    raise DataError(
        f"{path}: unsupported data format {suffix!r}; use one of {', '.join(SUPPORTED)}"
    )


def _json_line(path: Path, index: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataError(f"{path}, line {index + 1}: not valid JSON ({error})") from None
    if not isinstance(record, dict):
        raise DataError(f"{path}, line {index + 1}: expected a JSON object")
    return record
