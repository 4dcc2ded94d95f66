"""The `cluster` section and placement_from_cluster's choice of dialect."""

import pytest

from rl.core.config.cluster import ClusterConfig, placement_from_cluster
from rl.core.config.errors import FieldError
from rl.core.placement import PlacementError


@pytest.mark.parametrize(
    ("section", "roles"),
    [
        (
            ClusterConfig(n_gpus_per_node=8, placement={"actor": "0-3", "rollout": "4-7"}),
            ("actor", "rollout"),
        ),
        (
            ClusterConfig(component_placement={"actor,rollout,reward": "all"}),
            ("actor", "rollout", "reward"),
        ),
        (ClusterConfig(colocation=("policy", "policy_trainer")), ("actor", "rollout")),
        (ClusterConfig(hybrid_engine=True), ("actor", "ref", "rollout")),
        (ClusterConfig(n_gpus_per_node=0, num_cpus={"actor": 1}), ("actor",)),
    ],
)
def test_each_dialect(section, roles):
    assert placement_from_cluster(section).roles == roles


def test_two_dialects_are_refused():
    section = ClusterConfig(hybrid_engine=True, placement={"actor": "all"})
    with pytest.raises(PlacementError, match="placement, hybrid_engine are all set"):
        placement_from_cluster(section)


def test_no_dialect_is_refused():
    with pytest.raises(PlacementError, match="none is set"):
        placement_from_cluster(ClusterConfig())


def test_tensor_parallel_reaches_the_check():
    with pytest.raises(PlacementError, match="tensor_parallel_size = 3"):
        placement_from_cluster(ClusterConfig(hybrid_engine=True), tensor_parallel_size=3)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"nnodes": 0}, "nnodes"),
        ({"n_gpus_per_node": -1}, "n_gpus_per_node"),
        ({"total_cpus": 0}, "total_cpus"),
        ({"hybrid_engine": "yes"}, "hybrid_engine"),
        ({"placement": ["actor"]}, "placement"),
    ],
)
def test_bad_values(kwargs, key):
    with pytest.raises(FieldError, match=f"^{key} = "):
        ClusterConfig(**kwargs)
