"""Routing replay keys of verl and ROLL: the actor's mode maps to actor.router_replay.mode;
the reference's replay, route files and ROLL's R2 (which ROLL itself refuses) are refused
by name; the rollout side's switch is what rl does anyway with R3."""

from pathlib import Path

import pytest

from rl.cli.dialects import convert
from rl.core.config import ConfigError, config_from_mapping

HERE = Path(__file__).parent
MODEL = "actor_rollout_ref.model.path=builtin:tiny-qwen2"


def entries(report):
    return {entry.source: entry for entry in report.entries}


@pytest.mark.parametrize("mode", ["R2", "R3", "disabled"])
def test_verls_actor_mode_maps(mode):
    key = "actor_rollout_ref.actor.router_replay.mode"
    conversion = convert("verl", HERE / "verl" / "grpo.yaml", [MODEL, f"+{key}={mode}"])
    assert config_from_mapping(conversion.config, "converted").actor.router_replay.mode == mode
    assert entries(conversion.report)[key].status in ("mapped", "default")


def test_verls_reference_replay_and_route_files_are_refused_and_the_rollout_switch_ignored():
    overrides = [
        MODEL,
        "+actor_rollout_ref.ref.router_replay.mode=R3",
        "+actor_rollout_ref.actor.router_replay.replay_file=/tmp/routes.pt",
        "+actor_rollout_ref.rollout.enable_rollout_routing_replay=true",
    ]
    conversion = convert("verl", HERE / "verl" / "grpo.yaml", overrides)
    report = entries(conversion.report)
    ref = report["actor_rollout_ref.ref.router_replay.mode"]
    assert ref.status == "unsupported" and "route as the model does" in ref.reason
    rollout = report["actor_rollout_ref.rollout.enable_rollout_routing_replay"]
    assert rollout.status == "ignored"
    with pytest.raises(ConfigError, match="actor.router_replay.replay_file"):
        config_from_mapping(conversion.config, "converted")


@pytest.mark.parametrize(("roll", "ours"), [("R3", "R3"), ("disable", "disabled")])
def test_rolls_actor_train_mode_maps(roll, ours):
    path = HERE / "roll" / "rlvr" / "rlvr_fsdp2_gae.yaml"
    conversion = convert("roll", path, [f"+actor_train.router_replay.mode={roll}"])
    assert config_from_mapping(conversion.config, "converted").actor.router_replay.mode == ours


def test_rolls_r2_is_refused_as_roll_refuses_it():
    path = HERE / "roll" / "rlvr" / "rlvr_fsdp2_gae.yaml"
    conversion = convert("roll", path, ["+actor_train.router_replay.mode=R2"])
    entry = entries(conversion.report)["actor_train.router_replay.mode"]
    assert entry.status == "unsupported" and "ROLL refuses" in entry.reason
