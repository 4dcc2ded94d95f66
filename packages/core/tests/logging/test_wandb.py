"""W&B in offline mode (WANDB_MODE=offline, as a user without network runs it): what the sink
logs is read back from the run's transaction log under the output folder."""

import json

import pytest

from rl.core.config import load_config, to_dict
from rl.core.logging import make_tracker
from rl.core.logging.sinks import WandbSink

wandb = pytest.importorskip("wandb", reason="wandb is not installed: pip install 'rl-core[wandb]'")


@pytest.fixture(autouse=True)
def fresh_wandb():
    """wandb reads WANDB_* once per process (its setup singleton): start each test afresh."""
    wandb.teardown()
    yield
    wandb.teardown()


def test_an_offline_run_holds_the_config_and_every_step(trackers, output_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    sink = WandbSink("rl-tests", "offline-demo", trackers.CONFIG, output_dir)
    for step, metrics in trackers.STEPS.items():
        sink.log(metrics, step)
    sink.close()

    run = trackers.read_wandb_run(output_dir / "wandb")
    assert (run["project"], run["name"]) == ("rl-tests", "offline-demo")
    assert run["config"] == trackers.CONFIG
    trackers.assert_same(run["history"])
    assert all(row["_step"] == step for step, row in run["history"].items())


def test_make_tracker_sends_the_run_config_to_wandb(trackers, output_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = load_config(
        overrides=[
            f"trainer.output_dir={output_dir}",
            "trainer.logger=[jsonl,wandb]",
            "trainer.project_name=rl-tests",
            "trainer.experiment_name=tracker-demo",
        ]
    )
    tracker = make_tracker(config, output_dir, total_steps=3)
    for step, metrics in trackers.STEPS.items():
        tracker.log(metrics, step)
    tracker.close()

    run = trackers.read_wandb_run(output_dir / "wandb")
    assert (run["project"], run["name"]) == ("rl-tests", "tracker-demo")
    assert run["config"] == json.loads(json.dumps(to_dict(config)))
    trackers.assert_same(run["history"])
    # metrics.jsonl keeps the names as logged
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3] and "pass@4/gsm8k" in rows[0]


def test_the_users_wandb_mode_is_kept(trackers, output_dir, monkeypatch):
    """The sink sets no mode of its own: WANDB_MODE=disabled writes nothing."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    sink = WandbSink("rl-tests", "disabled", trackers.CONFIG, output_dir)
    sink.log(trackers.STEPS[1], 1)
    sink.close()
    assert list(output_dir.iterdir()) == []


def test_the_users_wandb_dir_wins(trackers, tmp_path, output_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    sink = WandbSink("rl-tests", "elsewhere", trackers.CONFIG, output_dir)
    sink.log(trackers.STEPS[1], 1)
    sink.close()
    assert list(output_dir.iterdir()) == []
    run = trackers.read_wandb_run(tmp_path / "elsewhere" / "wandb")
    assert run["name"] == "elsewhere"
    trackers.assert_same(run["history"], {1: trackers.STEPS[1]})
