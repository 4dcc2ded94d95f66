"""Checkpoints on real files: atomic publishing, manifests, pruning within a run, safe resume."""

import errno
import json
import logging

import pytest

from rl.core.errors import CheckpointError
from rl.core.trainer.checkpoint import find_resume_checkpoint, save_checkpoint
from rl.core.trainer.manifest import verify_checkpoint

RUN, OTHER = "run-a", "run-b"


def write_state(folder):
    (folder / "trainer_state.pt").write_bytes(b"state" * 100)
    (folder / "actor").mkdir()
    (folder / "actor" / "model.safetensors").write_bytes(b"weights" * 100)


def names(root):
    return sorted(p.name for p in root.iterdir())


def test_save_publishes_atomically_with_a_manifest_and_keeps_the_last_k(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, write_state, keep=2, run_id=RUN)
    assert names(tmp_path) == ["global_step_2", "global_step_3", "latest"]
    assert (tmp_path / "latest").read_text() == "global_step_3"
    manifest = json.loads((tmp_path / "global_step_3" / "manifest.json").read_text())
    assert manifest["run_id"] == RUN and manifest["step"] == 3
    assert set(manifest["files"]) == {"trainer_state.pt", "actor/model.safetensors"}
    assert manifest["files"]["trainer_state.pt"]["size"] == 500
    point = find_resume_checkpoint(tmp_path, "auto", None)
    assert (point.path, point.run_id, point.step) == (tmp_path / "global_step_3", RUN, 3)


def test_pruning_never_touches_another_runs_checkpoints_nor_the_one_just_written(tmp_path):
    """The reported failure: an earlier run's global_step_12 sits in the folder; a later
    lineage with keep=1 used to delete each checkpoint right after writing it."""
    save_checkpoint(tmp_path, 12, write_state, keep=1, run_id=OTHER)
    for step in (2, 4):
        save_checkpoint(tmp_path, step, write_state, keep=1, run_id=RUN)
        assert (tmp_path / f"global_step_{step}").is_dir()
    assert names(tmp_path) == ["global_step_12", "global_step_4", "latest"]
    assert find_resume_checkpoint(tmp_path, "auto", None).path.name == "global_step_4"


def test_pruning_goes_by_time_written_not_by_step(tmp_path):
    for step in (4, 8):
        save_checkpoint(tmp_path, step, write_state, keep=2, run_id=RUN)
    save_checkpoint(tmp_path, 6, write_state, keep=2, run_id=RUN)  # resumed from step 4
    assert names(tmp_path) == ["global_step_6", "global_step_8", "latest"]
    assert find_resume_checkpoint(tmp_path, "auto", None).path.name == "global_step_6"


def test_a_fresh_run_in_a_folder_with_checkpoints_is_refused(tmp_path):
    save_checkpoint(tmp_path, 12, write_state, keep=None, run_id=OTHER)
    with pytest.raises(CheckpointError, match="global_step_12.*resume_mode=auto.*output_dir"):
        find_resume_checkpoint(tmp_path, "disable", None)
    assert find_resume_checkpoint(tmp_path / "elsewhere", "disable", None) is None


def test_a_crash_while_writing_leaves_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=None, run_id=RUN)

    def crash(folder):
        (folder / "half").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, crash, keep=None, run_id=RUN)
    assert names(tmp_path) == ["global_step_1", "latest"]
    assert find_resume_checkpoint(tmp_path, "auto", None).path.name == "global_step_1"


def test_disk_full_while_writing_is_a_clear_error_and_keeps_the_previous(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=1, run_id=RUN)

    def disk_full(folder):
        (folder / "trainer_state.pt").write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CheckpointError) as error:
        save_checkpoint(tmp_path, 2, disk_full, keep=1, run_id=RUN)
    message = str(error.value)
    assert "global_step_2" in message and "No space left on device" in message
    assert "global_step_1 is intact" in message and "\n" not in message
    assert names(tmp_path) == ["global_step_1", "latest"]
    verify_checkpoint(tmp_path / "global_step_1")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda f: (f / "actor" / "model.safetensors").write_bytes(b"short"), "has 5 bytes"),
        (lambda f: (f / "trainer_state.pt").write_bytes(b"STATE" * 100), "SHA-256"),
        (lambda f: (f / "trainer_state.pt").unlink(), "is missing"),
        (lambda f: (f / "manifest.json").unlink(), "manifest.json is missing"),
        (lambda f: (f / "manifest.json").write_text("{"), "unreadable"),
    ],
)
def test_auto_falls_back_from_a_damaged_newest_checkpoint(tmp_path, caplog, damage, why):
    for step in (1, 2):
        save_checkpoint(tmp_path, step, write_state, keep=None, run_id=RUN)
    damage(tmp_path / "global_step_2")
    with caplog.at_level(logging.WARNING):
        point = find_resume_checkpoint(tmp_path, "auto", None)
    assert point.path.name == "global_step_1"
    warning = caplog.text
    assert "global_step_2" in warning and why in warning
    with pytest.raises(CheckpointError, match=f"trainer.resume_from_path: .*{why}"):
        find_resume_checkpoint(tmp_path, "path", str(tmp_path / "global_step_2"))


def test_no_good_checkpoint_left_is_an_error_not_a_fresh_start(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=None, run_id=RUN)
    (tmp_path / "global_step_1" / "trainer_state.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no checkpoint .* can be resumed"):
        find_resume_checkpoint(tmp_path, "auto", None)


def test_resume_modes(tmp_path):
    assert find_resume_checkpoint(tmp_path / "none", "auto", None) is None
    save_checkpoint(tmp_path, 4, write_state, keep=None, run_id=RUN)
    point = find_resume_checkpoint(tmp_path, "path", str(tmp_path / "global_step_4"))
    assert (point.path.name, point.step, point.run_id) == ("global_step_4", 4, RUN)
    with pytest.raises(CheckpointError, match="manifest.json is missing"):
        find_resume_checkpoint(tmp_path, "path", str(tmp_path))


def test_resuming_another_runs_checkpoint_into_a_folder_of_a_third_is_refused(tmp_path):
    save_checkpoint(tmp_path / "a", 4, write_state, keep=None, run_id=RUN)
    save_checkpoint(tmp_path / "b", 2, write_state, keep=None, run_id=OTHER)
    with pytest.raises(CheckpointError, match="belongs to another run"):
        find_resume_checkpoint(tmp_path / "b", "path", str(tmp_path / "a" / "global_step_4"))


def test_latest_pointing_at_an_incomplete_folder_falls_back(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=None, run_id=RUN)
    (tmp_path / "global_step_5").mkdir()
    (tmp_path / "latest").write_text("global_step_5")
    assert find_resume_checkpoint(tmp_path, "auto", None).path.name == "global_step_1"


def test_writing_a_step_again_replaces_it_only_once_the_new_one_is_complete(tmp_path):
    save_checkpoint(tmp_path, 3, write_state, keep=None, run_id=RUN)
    save_checkpoint(tmp_path, 3, write_state, keep=None, run_id=RUN)
    assert names(tmp_path) == ["global_step_3", "latest"]
    verify_checkpoint(tmp_path / "global_step_3")
