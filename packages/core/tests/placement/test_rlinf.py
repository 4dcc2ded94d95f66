"""RLinf component_placement on upstream examples, and the forms refused."""

import pytest

from rl.core.placement import PlacementError, parse_rlinf


def test_all_colocated():
    # RLinf examples/reasoning/config/math/qwen2.5-1.5b-grpo-fsdp.yaml
    placement = parse_rlinf({"actor,rollout,reward": "all"}, num_nodes=1, num_gpus_per_node=8)
    assert placement.devices["actor"] == tuple(range(8))
    assert placement.colocation == (("actor", "rollout", "reward"),)


def test_pipeline_disaggregated_on_8_nodes():
    # RLinf examples/reasoning/config/math/qwen2.5-1.5b-grpo-fsdp-pipeline.yaml
    cp = {"rollout": "0-15", "inference": "16-23", "actor": "24-63", "reward": "0-15"}
    placement = parse_rlinf(cp, num_nodes=8, num_gpus_per_node=8)
    assert placement.devices["ref"] == tuple(range(16, 24))  # inference -> ref
    assert placement.devices["actor"] == tuple(range(24, 64))
    assert placement.colocation == (("rollout", "reward"),)
    assert placement.nodes_of("actor") == (3, 4, 5, 6, 7)
    assert placement.colocated_with("reward") == ("rollout",)
    assert placement.colocated_with("actor") == ()


def test_int_and_comma_list():
    # OmegaConf reads `actor: 0` as an int (RLinf examples: `actor,env,rollout: 0`)
    placement = parse_rlinf({"actor": 0, "rollout": "1-2,5"}, num_nodes=1, num_gpus_per_node=8)
    assert placement.devices == {"actor": (0,), "rollout": (1, 2, 5)}


def test_dynamic_example_shares_part_of_the_devices():
    # RLinf examples/reasoning/config/math/qwen2.5-1.5b-grpo-megatron-dynamic.yaml: reward on
    # all 8 while the others split them: every role takes turns with the reward's.
    cp = {"actor": "0-1", "rollout": "2-5", "inference": "6-7", "reward": "all"}
    placement = parse_rlinf(cp, num_nodes=1, num_gpus_per_node=8)
    assert placement.devices["reward"] == tuple(range(8))
    assert placement.colocation == (("actor", "ref", "rollout", "reward"),)


def test_node_group_form_is_not_supported_yet():
    cp = {"actor": {"node_group": "a800", "placement": "0-7"}}
    with pytest.raises(PlacementError, match=r"component_placement.actor: the node-group form"):
        parse_rlinf(cp, num_nodes=1, num_gpus_per_node=8)


def test_process_ranks_not_supported_yet():
    with pytest.raises(PlacementError, match="process ranks"):
        parse_rlinf({"actor": "0-3:0-7"}, num_nodes=1, num_gpus_per_node=8)


def test_env_is_refused():
    # RLinf embodied examples: `actor,env,rollout: all`
    with pytest.raises(PlacementError, match="RLinf role 'env' is not supported yet"):
        parse_rlinf({"actor,env,rollout": "all"}, num_nodes=1, num_gpus_per_node=8)


def test_unknown_component_names_closest():
    with pytest.raises(PlacementError, match="unknown RLinf role 'rolout'; did you mean 'rollout'"):
        parse_rlinf({"rolout": "all"}, num_nodes=1, num_gpus_per_node=8)


@pytest.mark.parametrize("value", ["3-1", "a-b", "0-1-2", "", -1, 1.5, True])
def test_bad_ranks(value):
    with pytest.raises(PlacementError, match="component_placement.actor"):
        parse_rlinf({"actor": value}, num_nodes=1, num_gpus_per_node=8)


def test_role_placed_twice_names_both_keys():
    with pytest.raises(
        PlacementError, match=r"'actor' is placed twice: by 'component_placement.actor'"
    ):
        parse_rlinf({"actor": "0-3", "actor,rollout": "all"}, num_nodes=1, num_gpus_per_node=8)


def test_beyond_cluster():
    with pytest.raises(PlacementError, match=r"'actor' is placed on devices \[8, 9\], beyond"):
        parse_rlinf({"actor": "0-9"}, num_nodes=1, num_gpus_per_node=8)
