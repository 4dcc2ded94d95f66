"""One run per folder: the lock, the refusal of a fresh run over a trained one, the overwrite."""

import json
import os
import subprocess
import sys

import pytest

from rl.core.errors import RunFolderError
from rl.core.trainer.run_folder import LOCK_FILE, clear, hold, refuse_overwrite, trained_run


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    refused = rf"in use by another run \(pid {os.getpid()} on "
    with hold(tmp_path), pytest.raises(RunFolderError, match=refused), hold(tmp_path):
        pass
    with hold(tmp_path):  # released when the first ended
        pass


def test_the_os_releases_the_lock_of_a_killed_holder(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib; from rl.core.trainer.run_folder import hold\n"
            "with hold(pathlib.Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderError, match=f"pid {holder.pid}"), hold(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait()
    with hold(tmp_path):
        info = json.loads((tmp_path / LOCK_FILE).read_text())
        assert info["pid"] == os.getpid()


def _metrics(folder, *steps):
    rows = [json.dumps({"step": s, "val/score": 0.5}) for s in steps]
    (folder / "metrics.jsonl").write_text("\n".join(rows) + "\n")


def test_a_run_that_trained_is_never_overwritten_by_a_fresh_one(tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    _metrics(tmp_path, 0)  # validation before training only: nothing trained
    assert trained_run(tmp_path) == []
    refuse_overwrite(tmp_path, overwrite=False)
    _metrics(tmp_path, 0, 1, 2)
    assert trained_run(tmp_path) == ["metrics.jsonl (2 trained steps)"]
    with pytest.raises(RunFolderError, match="no checkpoint to resume.*overwrite_output_dir=true"):
        refuse_overwrite(tmp_path, overwrite=False)
    (tmp_path / "checkpoints" / "global_step_2").mkdir(parents=True)
    (tmp_path / "hf").mkdir()
    with pytest.raises(RunFolderError, match=r"\(hf/, checkpoints/, metrics.*resume_mode=auto"):
        refuse_overwrite(tmp_path, overwrite=False)
    refuse_overwrite(tmp_path, overwrite=True)  # allowed: nothing is removed yet


def test_clear_removes_the_run_files_only(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "checkpoints" / "global_step_1").mkdir(parents=True)
    _metrics(tmp_path, 1)
    (tmp_path / "notes.txt").write_text("mine")
    clear(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
