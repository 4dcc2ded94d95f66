"""ChatLearn colocation and verl's hybrid engine."""

import pytest

from rl.core.placement import PlacementError, parse_chatlearn, parse_verl_hybrid


def test_chatlearn_template():
    # ChatLearn template/grpo_fsdp.yaml: runtime_args.colocation
    placement = parse_chatlearn(
        ["policy", "policy_trainer", "ref_policy"], nnodes=2, n_gpus_per_node=8
    )
    assert placement.colocation == (("actor", "ref", "rollout"),)
    assert placement.devices["rollout"] == tuple(range(16))


@pytest.mark.parametrize(
    "colocation",
    [
        # ChatLearn tests/rlhf/test_data.py: a list of groups
        [["policy", "reference", "reward", "value", "ppo_policy", "ppo_value"]],
        ["policy,reference,reward,value,ppo_policy,ppo_value"],  # legacy "a,b" strings
    ],
)
def test_chatlearn_older_shapes(colocation):
    placement = parse_chatlearn(colocation, nnodes=1, n_gpus_per_node=4)
    assert placement.colocation == (("actor", "ref", "critic", "rollout", "reward"),)


def test_chatlearn_two_groups_not_supported_yet():
    with pytest.raises(PlacementError, match="exactly one colocation group"):
        parse_chatlearn([["policy"], ["policy_trainer"]], nnodes=1, n_gpus_per_node=8)


def test_chatlearn_unknown_name():
    with pytest.raises(PlacementError, match="did you mean 'policy_trainer'"):
        parse_chatlearn(["policy", "policy_trainr"], nnodes=1, n_gpus_per_node=8)


def test_verl_hybrid_engine():
    placement = parse_verl_hybrid(True, nnodes=1, n_gpus_per_node=8, tensor_parallel_size=2)
    assert placement.roles == ("actor", "ref", "rollout")
    assert placement.colocation == (("actor", "ref", "rollout"),)


def test_verl_hybrid_engine_false_is_refused():
    with pytest.raises(PlacementError, match="hybrid_engine = False"):
        parse_verl_hybrid(False, nnodes=1, n_gpus_per_node=8)


def test_tensor_parallel_must_divide_rollout_devices():
    with pytest.raises(
        PlacementError, match="tensor_parallel_size = 3 does not divide the rollout's 8"
    ):
        parse_verl_hybrid(True, nnodes=1, n_gpus_per_node=8, tensor_parallel_size=3)
