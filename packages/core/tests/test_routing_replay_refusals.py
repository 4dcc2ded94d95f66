"""Routing replay refused by name where it cannot run: an engine without the ability
(megatron's actor, vLLM's and SGLang's rollout), R2 with bypass mode, route files, an
unknown mode. Checked before any model loads."""

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.models.routing_replay import RoutingReplayError
from rl.core.workers import build


def config(*overrides):
    return load_config(overrides=list(overrides))


def test_the_default_is_disabled_and_verls_modes_are_the_values():
    assert config().actor.router_replay.mode == "disabled"
    assert config("actor.router_replay.mode=R2").actor.router_replay.mode == "R2"
    with pytest.raises(ConfigError, match="actor.router_replay.mode"):
        config("actor.router_replay.mode=R4")
    with pytest.raises(ConfigError, match="actor.router_replay.record_file"):
        config("actor.router_replay.record_file=/tmp/routes.pt")


@pytest.mark.parametrize("strategy", ["megatron"])
def test_a_train_engine_that_cannot_replay_is_refused(strategy):
    pytest.importorskip("rl.megatron", reason="rl-megatron is not installed")
    cfg = config("actor.router_replay.mode=R3", f"actor.strategy={strategy}")
    with pytest.raises(RoutingReplayError, match="actor.strategy=megatron does not replay"):
        build._check_router_replay(cfg, build.train_engine_class(cfg, "actor"))


def test_r2_with_bypass_mode_is_refused():
    cfg = config("actor.router_replay.mode=R2", "algorithm.rollout_correction.bypass_mode=true")
    with pytest.raises(RoutingReplayError, match="bypass_mode=true skips"):
        build._check_router_replay(cfg, build.train_engine_class(cfg, "actor"))


@pytest.mark.parametrize("name", ["vllm"])
def test_r3_with_a_rollout_engine_that_records_no_routes_is_refused(name):
    cfg = config("actor.router_replay.mode=R3", f"rollout.name={name}")
    with pytest.raises(RoutingReplayError, match=f"rollout.name={name} does not record"):
        build.build_rollout_engine(cfg, tokenizer=None)


@pytest.mark.parametrize("key", ["rollout.multi_turn.enable", "trainer.partial_rollout"])
def test_r3_with_rollouts_put_together_from_several_calls_is_refused(key):
    cfg = config("actor.router_replay.mode=R3", f"{key}=true")
    with pytest.raises(RoutingReplayError, match=f"{key}=true"):
        build._check_router_replay(cfg, build.train_engine_class(cfg, "actor"))
