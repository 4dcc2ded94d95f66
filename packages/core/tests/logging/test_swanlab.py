"""SwanLab in offline mode (SWANLAB_MODE=offline, as a user without network runs it): what the
sink logs is read back from the run's record file under the output folder."""

import json

import pytest

from rl.core.config import load_config, to_dict
from rl.core.logging import make_tracker
from rl.core.logging.sinks import SwanLabSink

pytest.importorskip("swanlab", reason="swanlab is not installed: pip install 'rl-core[swanlab]'")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("SWANLAB_MODE", "offline")


def test_an_offline_run_holds_the_config_and_every_step(trackers, output_dir):
    # a project name SwanLab refuses (it takes letters, digits and `_-+.`) is made acceptable
    sink = SwanLabSink("rl tests/α", "offline-demo", trackers.CONFIG, output_dir)
    for step, metrics in trackers.STEPS.items():
        sink.log(metrics, step)
    sink.close()

    run = trackers.read_swanlab_run(output_dir / "swanlog")
    assert (run["project"], run["name"]) == ("rl_tests__", "offline-demo")
    assert run["config"] == trackers.CONFIG
    trackers.assert_same(run["history"])
    assert run["state"] == "RUN_STATE_FINISHED"


def test_make_tracker_sends_the_run_config_to_swanlab(trackers, output_dir):
    config = load_config(
        overrides=[
            f"trainer.output_dir={output_dir}",
            "trainer.logger=[jsonl,swanlab]",
            "trainer.project_name=rl-tests",
            "trainer.experiment_name=tracker-demo",
        ]
    )
    tracker = make_tracker(config, output_dir, total_steps=3)
    for step, metrics in trackers.STEPS.items():
        tracker.log(metrics, step)
    tracker.close()

    run = trackers.read_swanlab_run(output_dir / "swanlog")
    assert (run["project"], run["name"]) == ("rl-tests", "tracker-demo")
    assert run["config"] == json.loads(json.dumps(to_dict(config)))
    trackers.assert_same(run["history"])


def test_the_users_swanlab_settings_win(trackers, tmp_path, output_dir, monkeypatch):
    monkeypatch.setenv("SWANLAB_LOG_DIR", str(tmp_path / "elsewhere"))
    sink = SwanLabSink("rl-tests", "elsewhere", trackers.CONFIG, output_dir)
    sink.log(trackers.STEPS[1], 1)
    sink.close()
    assert list(output_dir.iterdir()) == []
    run = trackers.read_swanlab_run(tmp_path / "elsewhere")
    trackers.assert_same(run["history"], {1: trackers.STEPS[1]})

    monkeypatch.delenv("SWANLAB_LOG_DIR")
    monkeypatch.setenv("SWANLAB_MODE", "disabled")
    sink = SwanLabSink("rl-tests", "disabled", trackers.CONFIG, output_dir)
    sink.log(trackers.STEPS[1], 1)
    sink.close()
    assert list(output_dir.iterdir()) == []
