"""Experiment-tracker tests: each run is written offline under tmp_path and read back from its
files with the tracker's own formats (W&B's transaction log and protobuf records, MLflow's
client, SwanLab's record store); no network, nothing written to the home folder or the cwd."""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

# What every tracker test logs: names W&B, MLflow or SwanLab would refuse or mangle beside plain
# ones, and a NaN (a skipped update's grad norm) that must not stop a run.
STEPS = {
    1: {"actor/pg_loss": 0.5, "pass@4/gsm8k": 0.25, "test_score/lighteval/MATH-Hard": 0.1},
    2: {"actor/pg_loss": 0.25, "pass@4/gsm8k": 0.5, "test_score/lighteval/MATH-Hard": 0.2},
    3: {"actor/pg_loss": float("nan"), "pass@4/gsm8k": 0.75, "test_score/lighteval/MATH-Hard": 0.3},
}
# ... as the trackers show them (tracker_key)
KEYS = {
    "actor/pg_loss": "actor/pg_loss",
    "pass@4/gsm8k": "pass_at_4/gsm8k",
    "test_score/lighteval/MATH-Hard": "test_score/lighteval/MATH_Hard",
}
CONFIG = {"actor": {"optim": {"lr": 1e-3, "betas": [0.9, 0.999]}}, "trainer": {"seed": 7}}

# the trackers' own settings, which a developer's shell may hold
TRACKER_VARIABLES = (
    "WANDB_MODE",
    "WANDB_DIR",
    "WANDB_PROJECT",
    "WANDB_NAME",
    "WANDB_RUN_ID",
    "WANDB_RESUME",
    "MLFLOW_TRACKING_URI",
    "MLFLOW_EXPERIMENT_NAME",
    "MLFLOW_EXPERIMENT_ID",
    "MLFLOW_RUN_ID",
    "SWANLAB_MODE",
    "SWANLAB_LOG_DIR",
    "SWANLAB_PROJECT",
    "SWANLAB_PROJ_NAME",
    "SWANLAB_EXP_NAME",
    "SWANLAB_RUN_ID",
)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A fresh home and an empty cwd; after the test the cwd must still be empty."""
    for name in TRACKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # The MLflow sink sets this (the file store needs it): set-then-delete makes monkeypatch
    # remove it again afterwards.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")  # no usage reports from tests
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield
    assert sorted(p.name for p in cwd.iterdir()) == [], "a tracker wrote into the cwd"


@pytest.fixture
def output_dir(tmp_path):
    path = tmp_path / "out"
    path.mkdir()
    return path


def assert_same(logged: dict[int, dict[str, float]], expected=STEPS) -> None:
    """`logged` ({step: {key: value}}) holds `expected` under the tracker keys (NaN as NaN)."""
    assert sorted(logged) == sorted(expected)
    for step, metrics in expected.items():
        want = {KEYS[name]: value for name, value in metrics.items()}
        got = {key: logged[step][key] for key in want}
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True), step


# W&B -----------------------------------------------------------------------------------------
# A run's `run-<id>.wandb` is a LevelDB-format log (a 7-byte `:W&B` header, 32 KiB blocks of
# records: crc32, length, type) of `wandb_internal_pb2.Record` messages; wandb's own
# `sdk/internal/datastore.py` read it this way until 0.29 removed it. The framing and the
# protobuf schema are what `wandb sync` replays, unchanged across the versions we support.
WANDB_HEADER = struct.Struct("<4sHB")
RECORD_HEADER = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = WANDB_HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, hex(magic), version)
    records, pieces, pos = [], [], WANDB_HEADER.size
    while pos + RECORD_HEADER.size <= len(data):
        if BLOCK - pos % BLOCK < RECORD_HEADER.size:  # a block's zero-padded tail
            pos += BLOCK - pos % BLOCK
            continue
        checksum, length, kind = RECORD_HEADER.unpack_from(data, pos)
        if (checksum, length, kind) == (0, 0, 0):  # preallocated, never written
            break
        body = data[pos + RECORD_HEADER.size : pos + RECORD_HEADER.size + length]
        assert zlib.crc32(body, zlib.crc32(bytes([kind]))) == checksum, f"bad record at {pos}"
        pos += RECORD_HEADER.size + length
        pieces.append(body)
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(pieces))
            records.append(record)
            pieces = []
        else:
            assert kind in (FIRST, MIDDLE), kind
    return records


def _wandb_key(item: Any) -> str:
    """A history or config item's name: `key`, or (newer writers) `nested_key`, a path of one
    part for a flat name."""
    return item.key or ".".join(item.nested_key)


def read_wandb_run(wandb_dir: Path, patience_s: float = 20.0) -> dict[str, Any]:
    """The one offline run under `wandb_dir`: project, name, config and {step: metrics}.
    Read again until its run record is there: on a loaded machine W&B's service process
    was seen still writing the file after `finish()` returned."""
    deadline = time.monotonic() + patience_s
    while True:
        run = _read_wandb_file(wandb_dir)
        if "name" in run or time.monotonic() > deadline:
            return run
        time.sleep(0.5)


def _read_wandb_file(wandb_dir: Path) -> dict[str, Any]:
    (run_file,) = wandb_dir.glob("offline-run-*/run-*.wandb")
    run: dict[str, Any] = {"config": {}, "history": {}}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run["project"], run["name"] = record.run.project, record.run.display_name
            items = record.run.config.update
        elif kind == "config":
            items = record.config.update
        elif kind == "history":
            row = {_wandb_key(item): json.loads(item.value_json) for item in record.history.item}
            run["history"][record.history.step.num] = row
            continue
        else:
            continue
        run["config"].update({_wandb_key(item): json.loads(item.value_json) for item in items})
    run["config"].pop("_wandb", None)
    return run


# SwanLab -------------------------------------------------------------------------------------
def read_swanlab_run(swanlog: Path) -> dict[str, Any]:
    """The one run under `swanlog`, through SwanLab's own record reader (what `swanlab sync`
    replays): project, name, state, config (files/config.yaml) and {step: metrics}."""
    import yaml
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.proto.swanlab.run.v1.run_pb2 import RunState
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    (run_file,) = swanlog.glob("run-*/run-*.swanlab")
    reader = DataStoreReader()
    reader.open(run_file)
    run: dict[str, Any] = {"history": {}}
    try:
        while (data := reader.scan()) is not None:
            record = Record()
            record.ParseFromString(data)
            kind = record.WhichOneof("record_type")
            if kind == "start":
                run["project"], run["name"] = record.start.project, record.start.name
            elif kind == "scalar":
                value = record.scalar.value.number
                run["history"].setdefault(record.scalar.step, {})[record.scalar.key] = value
            elif kind == "finish":
                run["state"] = RunState.Name(record.finish.state)
    finally:
        reader.close()
    saved = yaml.safe_load((run_file.parent / "files" / "config.yaml").read_text())
    run["config"] = {key: entry["value"] for key, entry in saved.items()}
    return run


@pytest.fixture
def trackers():
    """This module's constants and readers, for the test modules (conftest is not importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        STEPS=STEPS,
        KEYS=KEYS,
        CONFIG=CONFIG,
        assert_same=assert_same,
        read_wandb_run=read_wandb_run,
        read_swanlab_run=read_swanlab_run,
    )
