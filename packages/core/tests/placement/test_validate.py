"""build_placement and our own form: each check and its message; CPU mode."""

import pytest

from rl.core.placement import PlacementError, build_placement, parse_cpu, parse_own
from rl.core.placement.colocation import parse_verl_hybrid


def test_own_form_mixes_values():
    placement = parse_own(
        {"actor": "0-7", "rollout": "0-7", "critic": [9, 8], "reward": 10},
        nnodes=2,
        n_gpus_per_node=8,
    )
    assert placement.devices["critic"] == (8, 9)
    assert placement.devices["actor"] == tuple(range(8))
    assert placement.node_of(9) == 1
    assert placement.n_devices == 16


def test_own_form_bad_list():
    with pytest.raises(PlacementError, match=r"placement.actor = \[0, 'x'\]"):
        parse_own({"actor": [0, "x"]}, nnodes=1, n_gpus_per_node=8)


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"actor": []}, "role 'actor' is placed on no devices"),
        ({"actr": [0]}, "unknown role 'actr'; did you mean 'actor'"),
        ({"actor": [0, 0, 1]}, r"role 'actor' lists devices \[0\] more than once"),
        ({"actor": [-1]}, "device -1 is not a device index"),
        ({"actor": [7, 8]}, r"devices \[8\], beyond the cluster's 8 .*devices 0..7"),
        ({}, "places no role"),
    ],
)
def test_errors_name_roles_and_devices(devices, message):
    with pytest.raises(PlacementError, match=message):
        build_placement(devices, nnodes=1, n_gpus_per_node=8)


@pytest.mark.parametrize(
    ("nnodes", "n_gpus", "message"),
    [
        (0, 8, "nnodes = 0"),
        (1, -1, "n_gpus_per_node = -1"),
        (1, 0, "use num_cpus"),
        (1257366017, 1, "= 1257366017 devices is not allowed: at most 1048576"),
        (131073, 8, "131073 × 8 = 1048584 devices"),
    ],
)
def test_bad_cluster_shape(nnodes, n_gpus, message):
    with pytest.raises(PlacementError, match=message):
        build_placement({"actor": [0]}, nnodes=nnodes, n_gpus_per_node=n_gpus)


def test_the_largest_cluster_allowed_validates_its_devices_once_each():
    """verl's hybrid engine on 131,072 nodes of 8: every role on all 1,048,576 devices (a
    duplicate check per device by list.count was quadratic; the fuzz's nnodes=1257366017
    ran out of memory listing them)."""
    placement = parse_verl_hybrid(True, nnodes=131072, n_gpus_per_node=8)
    assert len(placement.devices["actor"]) == 1 << 20
    with pytest.raises(PlacementError, match=r"lists devices \[0, 7\] more than once"):
        build_placement({"actor": [*range(8), 0, 7]}, nnodes=1, n_gpus_per_node=8)


def test_disjoint_roles_are_not_colocated():
    placement = build_placement({"actor": [0, 1], "rollout": [2, 3]}, nnodes=1, n_gpus_per_node=4)
    assert placement.colocation == ()


def test_cpu_mode():
    placement = parse_cpu({"actor": 1, "rollout": 0.5}, total_cpus=2)
    assert placement.num_cpus == {"actor": 1.0, "rollout": 0.5}
    assert placement.devices == {"actor": (), "rollout": ()}
    assert placement.colocation == ()


@pytest.mark.parametrize(
    ("num_cpus", "total", "message"),
    [
        ({"actor": 2, "rollout": 2}, 3, "asks for 4 CPUs .* total_cpus is 3"),
        ({"actor": 0}, None, r"num_cpus.actor = 0 is not allowed"),
        ({"critc": 1}, None, "did you mean 'critic'"),
        ({}, None, "places no role"),
    ],
)
def test_cpu_errors(num_cpus, total, message):
    with pytest.raises(PlacementError, match=message):
        parse_cpu(num_cpus, total_cpus=total)


def test_partial_sharing_joins_one_group_that_takes_turns():
    placement = build_placement(
        {"actor": [0, 1], "rollout": [1, 2], "ref": [2, 3], "reward": [6, 7], "critic": [6, 7]},
        nnodes=1,
        n_gpus_per_node=8,
    )
    assert placement.colocation == (("actor", "ref", "rollout"), ("critic", "reward"))
    assert placement.colocated_with("ref") == ("actor", "rollout")
