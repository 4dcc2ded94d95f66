"""Which Ray workers a placement asks for: the hybrid engine (the rollout on the actor's
devices) or the rollout on devices of its own, in replicas of its tensor-parallel size."""

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.workers.launch import ray_layout, ray_ranks
from rl.core.workers.layout import RayLayout


def layout(*overrides):
    return ray_layout(load_config(overrides=["trainer.launcher=ray", *overrides]))


def test_the_rollout_on_the_actors_devices_is_the_hybrid_engine():
    assert layout("cluster.n_gpus_per_node=2") == RayLayout(2, 0, 1, 1.0)
    assert not layout("cluster.n_gpus_per_node=2").disaggregated


def test_a_rollout_on_devices_of_its_own_runs_in_replicas_of_its_tp_size():
    split = layout(
        "cluster.n_gpus_per_node=4",
        "cluster.placement={actor: [0], rollout: [1, 2, 3]}",
        "cluster.cpus_per_worker=0.5",
    )
    assert split == RayLayout(1, 3, 1, 0.5) and split.disaggregated and split.devices == 4
    tp2 = layout(
        "cluster.n_gpus_per_node=3",
        "cluster.placement={actor: [0], rollout: [1, 2]}",
        "rollout.tensor_parallel_size=2",
    )
    assert tp2 == RayLayout(1, 1, 2, 1.0) and tp2.devices == 3
    config = load_config(
        overrides=[
            "trainer.launcher=ray",
            "cluster.n_gpus_per_node=3",
            "cluster.placement={actor: [0, 1], rollout: [2]}",
        ]
    )
    assert ray_ranks(config) == (3, 1.0)  # every device is a worker process on the CPU


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["cluster.placement={actor: [0, 1], rollout: [1, 2]}"],
            "the rollout on devices [1, 2] shares [1] with the actor on [0, 1]",
        ),
        (
            ["cluster.placement={actor: [0], rollout: [1, 2], ref: [2]}", "actor.use_kl_loss=true"],
            "ref on devices [2], the actor on [0]",
        ),
        (
            ["cluster.placement={actor: [0], rollout: [1, 2]}", "rollout.tensor_parallel_size=3"],
            "rollout.tensor_parallel_size = 3 does not divide the rollout's 2 devices",
        ),
    ],
)
def test_a_split_the_launcher_cannot_run_is_refused_by_name(overrides, message):
    with pytest.raises(ConfigError, match=None) as error:
        layout("cluster.n_gpus_per_node=3", *overrides)
    assert message in str(error.value)
