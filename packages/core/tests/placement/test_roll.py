"""ROLL device_mapping: the safe grammar and upstream examples."""

import pytest

from rl.core.placement import PlacementError, parse_device_mapping, parse_roll


@pytest.mark.parametrize(
    ("text", "devices"),
    [
        ("list(range(0,8))", tuple(range(8))),  # ROLL examples/docs_examples/example_ppo.yaml
        ("list(range(12, 16))", (12, 13, 14, 15)),
        ("list(range(4))", (0, 1, 2, 3)),
        ("list(range(0, 8, 2))", (0, 2, 4, 6)),
        ("list([0,1,2,3,8,9,10,11])", (0, 1, 2, 3, 8, 9, 10, 11)),  # rlvr_qwen2.5_7B_seperate.yaml
        ("[6, 7]", (6, 7)),
        ("[1]", (1,)),
        ([0, 1], (0, 1)),
    ],
)
def test_accepted_forms(text, devices):
    assert parse_device_mapping(text, "actor_train") == devices


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "list(range(0, 8)) + [9]",
        "range(0, 8)",
        "list(range(0, 8, 0))",
        "[1,,2]",
        "[1.5]",
        "0-7",
        3,
        [0, "1"],
        [True],
    ],
)
def test_refused_forms_name_the_key_and_forms(text):
    with pytest.raises(PlacementError, match=r"actor_infer.device_mapping = .*"):
        parse_device_mapping(text, "actor_infer")


def test_error_shows_accepted_forms():
    with pytest.raises(PlacementError, match=r"list\(range\(a, b, s\)\)"):
        parse_device_mapping("eval('1')", "reference")


def test_all_colocated_example():
    # ROLL examples/qwen2.5-vl-7B-rlvr/rlvr_megatron.yaml: three roles on list(range(0,32))
    mappings = {
        "actor_train": "list(range(0,32))",
        "actor_infer": "list(range(0,32))",
        "reference": "list(range(0,32))",
    }
    placement = parse_roll(mappings, nnodes=4, num_gpus_per_node=8, tensor_parallel_size=2)
    assert placement.colocation == (("actor", "ref", "rollout"),)
    assert placement.nodes_of("rollout") == (0, 1, 2, 3)


def test_reward_domain_and_critic():
    mappings = {
        "actor_train": "list(range(0,8))",
        "actor_infer": "list(range(0,8))",
        "critic": "list(range(8,12))",
        "rewards.llm_judge": "list(range(12,16))",
    }
    placement = parse_roll(mappings, nnodes=2, num_gpus_per_node=8)
    assert placement.devices["reward"] == (12, 13, 14, 15)
    assert placement.devices["critic"] == (8, 9, 10, 11)


def test_partial_colocation_example_takes_turns():
    # ROLL examples/docs_examples/example_ppo.yaml (num_gpus_per_node: 8): the trainer on
    # 0-7, generation and reference on all 16, the critic on 8-15 — one group taking turns
    mappings = {
        "actor_train": "list(range(0,8))",
        "actor_infer": "list(range(0,16))",
        "reference": "list(range(0,16))",
        "critic": "list(range(8,16))",
    }
    placement = parse_roll(mappings, nnodes=2, num_gpus_per_node=8)
    assert placement.devices["actor"] == tuple(range(8))
    assert placement.colocation == (("actor", "ref", "critic", "rollout"),)


def test_two_reward_domains_on_devices_are_refused():
    mappings = {"rewards.a": "[0]", "rewards.b": "[1]"}
    with pytest.raises(PlacementError, match="'reward' is placed twice: by 'rewards.a'"):
        parse_roll(mappings, nnodes=1, num_gpus_per_node=8)


def test_unknown_and_unsupported_roles():
    with pytest.raises(PlacementError, match="did you mean 'actor_train'"):
        parse_roll({"actor_trian": "[0]"}, nnodes=1, num_gpus_per_node=8)
    with pytest.raises(PlacementError, match="ROLL role 'teacher' is not supported yet"):
        parse_roll({"teacher": "[0]"}, nnodes=1, num_gpus_per_node=8)
