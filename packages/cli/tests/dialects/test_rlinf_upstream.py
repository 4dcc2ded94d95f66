"""RLinf's own example files (`rlinf/upstream/`, RLinf a3816b59, verbatim): each converts,
or is refused in one line naming each key with the reason. The expected outcome of every
file is the table below; the keys flipped here show that each listed RLinf setting either
changes our config as RLinf's code computes it, or is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert, refusal
from rl.core.config import ConfigError, config_from_mapping

UPSTREAM = Path(__file__).parent / "rlinf" / "upstream" / "examples"
MATH = UPSTREAM / "reasoning" / "config" / "math"
RSTAR2 = UPSTREAM / "agent" / "rstar2" / "config"

# file -> the keys refused as the file stands (empty: it converts)
REFUSED = {
    # fp16 autocast beside FSDP's fp16 mixed precision: RLinf refuses the pair itself
    "qwen2.5-1.5b-grpo-fsdp": {"actor.fsdp_config.amp_autocast.enabled"},
    # FSDP's fp16 mixed precision with the gradient scaler: both rl's
    "qwen2.5-1.5b-grpo-fsdp-pipeline": set(),
    "qwen2.5-1.5b-grpo-megatron": set(),
    "qwen2.5-1.5b-grpo-megatron-pipeline": set(),
    "qwen2.5-1.5b-grpo-megatron-dynamic": {"cluster.auto_scheduler"},
    "qwen2.5-1.5b-ppo-megatron": {
        "algorithm.adv_type",
        "algorithm.loss_agg_func",
    },
    "qwen2.5-1.5b-reinpp-megatron": set(),
    "qwen2.5-1.5b-single-gpu": set(),
    "qwen2.5-7b-grpo-megatron": set(),
    "qwen2.5-32b-grpo-megatron": set(),
    "qwen3-30b-grpo-megatron": set(),
    "moonlight-16b-grpo-megatron": {
        "algorithm.loss_agg_func",
        "actor.optim.use_precision_aware_optimizer",
        "actor.optim.bf16",  # false against precision bf16: no fp32 master weights
    },
}
# files refused as a whole, in one line, for a stated reason
WHOLE = {
    # RLinf itself fails here: main_grpo.py prints the config resolved, and the file's
    # `hf_model_path: ${rollout.path}` names a key that does not exist
    MATH / "qwen2.5-1.5b-is-megatron.yaml": "Interpolation key 'rollout.path' not found",
    RSTAR2 / "rstar2-qwen2.5-1.5b-megatron.yaml": "agentloop / tools: RLinf's agent loop",
    RSTAR2 / "rstar2-qwen2.5-7b-megatron.yaml": "agentloop / tools: RLinf's agent loop",
}


def refused(path: Path, overrides: list[str] | None = None) -> tuple[set[str], object]:
    conversion = convert("rlinf", path, overrides or [])
    return {e.source for e in conversion.report.refused()}, conversion


def test_every_upstream_file_has_an_expected_outcome():
    files = {p.stem for p in MATH.glob("*.yaml")}
    assert files == set(REFUSED) | {"qwen2.5-1.5b-is-megatron"}
    assert set(RSTAR2.glob("*.yaml")) <= set(WHOLE)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_math_file_converts_or_is_refused_by_name(name):
    keys, conversion = refused(MATH / f"{name}.yaml")
    assert keys == REFUSED[name]
    reasons = [e.reason for e in conversion.report.refused()]
    assert all(reasons), reasons
    if keys:
        with pytest.raises(ConfigError) as error:
            refusal.settle(conversion.report)
        line = str(error.value)
        assert "\n" not in line and all(key in line for key in keys)
    # what the refusal names, once allowed, leaves a config our schema accepts
    refusal.settle(conversion.report, sorted(keys))
    config_from_mapping(conversion.config, name)


@pytest.mark.parametrize("path", sorted(WHOLE), ids=lambda p: p.stem)
def test_files_refused_as_a_whole_say_why_in_one_line(path):
    with pytest.raises(ConfigError) as error:
        convert("rlinf", path)
    assert WHOLE[path] in str(error.value) and "\n" not in str(error.value)


def test_the_importance_sampling_file_converts_once_its_broken_path_is_given():
    keys, conversion = refused(
        MATH / "qwen2.5-1.5b-is-megatron.yaml",
        ["actor.megatron.ckpt_convertor.hf_model_path=/models/qwen"],
    )
    assert keys == set()
    refusal.settle(conversion.report, sorted(keys))
    config = config_from_mapping(conversion.config, "is")
    # RLinf: advantages × min(exp(recomputed - rollout log-probs), importance_sampling_clip)
    assert config.actor.tis_cap == 1.0


@pytest.mark.parametrize(
    "name", ["qwen2.5-1.5b-grpo-fsdp-pipeline", "qwen2.5-1.5b-grpo-megatron-pipeline"]
)
def test_a_disaggregated_component_placement_places_each_role_apart(name):
    """RLinf's pipeline files: rollout (and reward) on 0-15, the actor's inference pass
    (rl's ref) on 16-23, the actor on 24-63 of 8 nodes (RLinf reads the GPUs per node from
    Ray: given here)."""
    from rl.cli.convert_cmd import convert_config
    from rl.core.workers.launch import cluster_placement

    config, _ = convert_config(
        "rlinf",
        MATH / f"{name}.yaml",
        ["+cluster.num_gpus_per_node=8"],
        allow=sorted(REFUSED[name]),
    )
    placement = cluster_placement(config)
    assert placement.devices["rollout"] == tuple(range(16))
    assert placement.devices["ref"] == tuple(range(16, 24))
    assert placement.devices["actor"] == tuple(range(24, 64))
    assert placement.colocation == (("rollout", "reward"),)
    assert (placement.nnodes, placement.n_gpus_per_node) == (8, 8)
    assert config.trainer.launcher == "ray"
