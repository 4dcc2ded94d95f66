"""Atomic checkpoint directories, keep-last-K and resume discovery, on real files."""

import pytest

from rl.core.trainer.checkpoint import find_resume_checkpoint, save_checkpoint


def write_state(folder):
    (folder / "trainer_state.pt").write_bytes(b"state")


def test_save_publishes_atomically_and_keeps_the_last_k(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, write_state, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "global_step_2",
        "global_step_3",
        "latest",
    ]
    assert (tmp_path / "latest").read_text() == "global_step_3"
    assert find_resume_checkpoint(tmp_path, "auto", None) == tmp_path / "global_step_3"


def test_a_crash_while_writing_leaves_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=None)

    def crash(folder):
        (folder / "half").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, crash, keep=None)
    assert not (tmp_path / "global_step_2").exists()
    assert find_resume_checkpoint(tmp_path, "auto", None) == tmp_path / "global_step_1"


def test_resume_modes(tmp_path):
    assert find_resume_checkpoint(tmp_path / "none", "auto", None) is None
    save_checkpoint(tmp_path, 4, write_state, keep=None)
    assert find_resume_checkpoint(tmp_path, "disable", None) is None
    assert (
        find_resume_checkpoint(tmp_path, "path", str(tmp_path / "global_step_4")).name
        == "global_step_4"
    )
    with pytest.raises(FileNotFoundError, match="is not a checkpoint"):
        find_resume_checkpoint(tmp_path, "path", str(tmp_path))


def test_latest_pointing_at_an_incomplete_folder_falls_back(tmp_path):
    save_checkpoint(tmp_path, 1, write_state, keep=None)
    (tmp_path / "global_step_5").mkdir()
    (tmp_path / "latest").write_text("global_step_5")
    assert find_resume_checkpoint(tmp_path, "auto", None) == tmp_path / "global_step_1"
