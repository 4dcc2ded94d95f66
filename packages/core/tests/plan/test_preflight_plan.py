"""`rl train`'s preflight runs the plan's refusals before any worker starts, and logs it."""

from __future__ import annotations

import logging

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.trainer.preflight import preflight


def test_preflight_logs_the_plan_in_one_line(caplog, tmp_path):
    with caplog.at_level(logging.INFO, logger="rl.core.trainer.preflight"):
        preflight(load_config(None, [f"trainer.output_dir={tmp_path}"]))
    (line,) = [r.message for r in caplog.records if r.message.startswith("plan: ")]
    assert "actor 64 rows per rank over 1 data-parallel rank(s)" in line
    assert "rollout 1 replica(s) of 64 samples" in line


def test_preflight_refuses_a_device_the_estimate_does_not_fit(tmp_path):
    config = load_config(None, [f"trainer.output_dir={tmp_path}", "cluster.device_memory_gb=0.001"])
    with pytest.raises(ConfigError) as error:
        preflight(config)
    message = str(error.value)
    assert message.startswith("actor needs ~")
    assert "cluster.device_memory_gb" in message
    assert "actor.ppo_micro_batch_size_per_gpu" in message
