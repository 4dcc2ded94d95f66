"""Placement preflight: a run never gets fewer devices or processes than its `cluster`
asks for, nor more than this machine has, without a one-line refusal that names the keys
and gives the overrides that shrink it — and those overrides pass preflight."""

from __future__ import annotations

import shlex

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.config.overrides import apply_overrides, render_overrides
from rl.core.errors import UserError
from rl.core.trainer import preflight_placement
from rl.core.trainer.preflight import preflight


@pytest.fixture
def machine(monkeypatch):
    """`machine(cpus, gpus=0)`: what this machine has, as preflight counts it."""

    def set_machine(cpus: int, gpus: int = 0) -> None:
        monkeypatch.setattr(preflight_placement, "usable_cpus", lambda: cpus)
        monkeypatch.setattr(preflight_placement, "visible_gpus", lambda: gpus)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)

    set_machine(2)
    return set_machine


def refused(*overrides, with_rl_roles=True):
    config = load_config(overrides=list(overrides))
    with pytest.raises(ConfigError) as error:
        preflight(config, with_rl_roles=with_rl_roles)
    message = str(error.value)
    assert isinstance(error.value, UserError) and "\n" not in message, message
    return message


def shrink_overrides(message):
    """The overrides after `pass ` (up to an `(or ...)` alternative), as typed."""
    return shlex.split(message.partition(": pass ")[2].partition(" (or ")[0])


def passes_with_the_shrink(overrides, message, with_rl_roles=True):
    shrink = shrink_overrides(message)
    assert shrink, message
    preflight(load_config(overrides=[*overrides, *shrink]), with_rl_roles=with_rl_roles)
    return shrink


def test_the_default_and_what_the_machine_has_pass(machine):
    preflight(load_config())
    preflight(load_config(overrides=["trainer.launcher=ray", "cluster.n_gpus_per_node=2"]))
    preflight(load_config(overrides=["cluster.n_gpus_per_node=2", "cluster.placement.actor=0"]))


def test_the_local_launcher_refuses_more_than_one_device_with_the_shrink(machine):
    asked = ["cluster.nnodes=8", "cluster.n_gpus_per_node=8", "rollout.tensor_parallel_size=2"]
    message = refused(*asked)
    assert message == (
        "cluster asks for 64 devices (cluster.nnodes = 8 × cluster.n_gpus_per_node = 8), but "
        "trainer.launcher=local runs every role in this one process, on one device: pass "
        "cluster.nnodes=1 cluster.n_gpus_per_node=1 rollout.tensor_parallel_size=1"
    )
    passes_with_the_shrink(asked, message)


def test_parallel_sizes_shrink_with_the_devices_and_ray_is_offered_when_it_fits(machine):
    asked = ["cluster.n_gpus_per_node=2", "actor.ulysses_sequence_parallel_size=2"]
    message = refused(*asked)
    assert message.endswith(
        "pass cluster.n_gpus_per_node=1 actor.ulysses_sequence_parallel_size=1 "
        "(or trainer.launcher=ray: one worker process per device, 2 here)"
    )
    passes_with_the_shrink(asked, message)
    preflight(load_config(overrides=[*asked, "trainer.launcher=ray"]))  # the alternative
    hsdp = ["trainer.launcher=ray", "cluster.n_gpus_per_node=8", "actor.fsdp_config.fsdp_size=4"]
    message = refused(*hsdp)
    assert message.endswith("pass cluster.n_gpus_per_node=2 actor.fsdp_config.fsdp_size=-1")
    passes_with_the_shrink(hsdp, message)
    machine(cpus=1)
    assert "(or trainer.launcher=ray" not in refused(*asked)


def test_roles_placed_apart_run_on_ray_and_are_refused_by_the_local_launcher(machine):
    asked = ["cluster.n_gpus_per_node=4", "cluster.placement={actor: 0-1, rollout: 2-3}"]
    message = refused(*asked)
    assert message.startswith("cluster asks for 4 devices (cluster.n_gpus_per_node = 4), but")
    assert message.endswith(
        "pass cluster.n_gpus_per_node=1 cluster.placement.actor=all cluster.placement.rollout=all"
    )
    passes_with_the_shrink(asked, message)
    # the Ray launcher runs them apart, where the machine has room for 4 workers
    message = refused(*asked, "trainer.launcher=ray")
    assert message.startswith("cluster asks for 4 devices (cluster.n_gpus_per_node = 4)")
    machine(cpus=4)
    preflight(load_config(overrides=[*asked, "trainer.launcher=ray"]))
    # but not sharing a device with the actor and leaving others
    message = refused(
        "cluster.n_gpus_per_node=3",
        "cluster.placement={actor: 0-1, rollout: 1-2}",
        "trainer.launcher=ray",
    )
    assert message.startswith("cluster.placement: the rollout on devices [1, 2] shares [1]")
    machine(cpus=2)
    # one device for every role: what one process runs, whatever the cluster's size
    preflight(load_config(overrides=["cluster.n_gpus_per_node=4", "cluster.placement.actor=0"]))


def test_a_placement_beyond_the_cluster_is_refused_with_the_local_launcher_too(machine):
    message = refused(
        "cluster.n_gpus_per_node=8", "cluster.component_placement={'actor,rollout': 0-63}"
    )
    assert message.startswith("cluster: role 'actor' is placed on devices [8, 9,")


def test_cpu_shares_are_the_ray_launchers_and_must_fit_the_cpus(machine):
    shares = ["cluster.n_gpus_per_node=0", "cluster.num_cpus={actor: 8, rollout: 8}"]
    message = refused(*shares)
    assert message.startswith("cluster.num_cpus = {'actor': 8, 'rollout': 8}: CPU shares per")
    assert message.endswith(
        "trainer.launcher=local runs every role in this one process, on all its threads: pass "
        "trainer.launcher=ray, or remove cluster.num_cpus"
    )
    message = refused(*shares, "trainer.launcher=ray", with_rl_roles=False)
    assert message.endswith(
        "rl sft trains in this one process, on all its threads: remove cluster.num_cpus"
    )
    message = refused(*shares, "trainer.launcher=ray")
    assert message == (
        "cluster.num_cpus = {'actor': 8, 'rollout': 8} asks for 16 CPUs in one worker process "
        "(the shares of actor, rollout); this machine has 2: pass cluster.num_cpus.actor=1 "
        "cluster.num_cpus.rollout=1"
    )
    passes_with_the_shrink([*shares, "trainer.launcher=ray"], message)
    elsewhere = [
        "cluster.num_cpus={reward: 1}",
        "cluster.cpus_per_worker=3",
        "trainer.launcher=ray",
    ]
    message = refused(*elsewhere)  # no share for a role of the run: its worker's CPUs
    assert message.endswith("this machine has 2: pass cluster.cpus_per_worker=2")
    passes_with_the_shrink(elsewhere, message)


def test_ray_on_cpu_starts_no_more_workers_than_the_cpus_hold(machine):
    asked = ["trainer.launcher=ray", "cluster.n_gpus_per_node=8"]
    message = refused(*asked)
    assert message == (
        "cluster asks for 8 devices (cluster.n_gpus_per_node = 8), each a worker process on "
        "trainer.device=cpu; this machine has 2 CPUs (cluster.cpus_per_worker = 1 each: room "
        "for 2): pass cluster.n_gpus_per_node=2"
    )
    passes_with_the_shrink(asked, message)
    preflight(
        load_config(
            overrides=[
                "trainer.launcher=ray",
                "cluster.n_gpus_per_node=4",
                "cluster.cpus_per_worker=0.5",
            ]
        )
    )
    message = refused("trainer.launcher=ray", "cluster.cpus_per_worker=4")
    assert message.endswith("room for 0): pass cluster.cpus_per_worker=2")
    # on a Ray cluster, Ray counts the devices
    preflight(load_config(overrides=[*asked, "trainer.ray_address=auto"]))


def test_the_shrink_keeps_the_batch_split_and_the_placement_within_the_devices(machine):
    machine(cpus=3)
    asked = ["trainer.launcher=ray", "cluster.n_gpus_per_node=64"]
    message = refused(*asked)  # 3 ranks cannot split 16 × 4 rows: 2 can
    assert message.endswith("room for 3): pass cluster.n_gpus_per_node=2")
    passes_with_the_shrink(asked, message)
    asked = [
        "trainer.launcher=ray",
        "cluster.nnodes=8",
        "cluster.n_gpus_per_node=8",
        "cluster.component_placement={'actor,rollout': 0-3, reward: 4}",
    ]
    message = refused(*asked)
    assert message.startswith(
        "cluster asks for 4 devices (cluster.component_placement places the roles on devices "
        "0-3 of cluster.nnodes = 8 × cluster.n_gpus_per_node = 8)"
    )
    assert message.endswith(
        "pass cluster.nnodes=1 cluster.n_gpus_per_node=2 cluster.component_placement.reward=all "
        "'cluster.component_placement={\"actor,rollout\": all}' (or trainer.ray_address=auto "
        "to run on a Ray cluster of 8 nodes)"
    )
    passes_with_the_shrink(asked, message)


def test_cuda_counts_the_visible_gpus(machine):
    machine(cpus=16, gpus=1)
    asked = [
        "trainer.device=cuda",
        "trainer.launcher=ray",
        "cluster.nnodes=8",
        "cluster.n_gpus_per_node=8",
        "rollout.tensor_parallel_size=4",
    ]
    message = refused(*asked)
    assert message == (
        "cluster asks for 64 devices (cluster.nnodes = 8 × cluster.n_gpus_per_node = 8); this "
        "machine has 1 GPU (torch.cuda.device_count()): pass cluster.nnodes=1 "
        "cluster.n_gpus_per_node=1 rollout.tensor_parallel_size=1 (or trainer.ray_address=auto "
        "to run on a Ray cluster of 8 nodes)"
    )
    passes_with_the_shrink(asked, message)
    machine(cpus=2, gpus=4)  # Ray's bundles need their CPUs too
    message = refused("trainer.device=cuda", "trainer.launcher=ray", "cluster.n_gpus_per_node=4")
    assert "this machine has 4 GPUs (torch.cuda.device_count()) and 2 CPUs" in message
    assert message.endswith("pass cluster.n_gpus_per_node=2")


def test_rl_sft_runs_in_this_process(machine):
    message = refused("cluster.n_gpus_per_node=4", "trainer.launcher=ray", with_rl_roles=False)
    assert message == (
        "cluster asks for 4 devices (cluster.n_gpus_per_node = 4), but rl sft trains in this "
        "one process, on one device: pass cluster.n_gpus_per_node=1"
    )
    passes_with_the_shrink(["cluster.n_gpus_per_node=4"], message, with_rl_roles=False)


def test_ranks_per_model_copy_that_do_not_divide_the_world_name_the_fix(machine):
    message = refused(
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=2",
        "actor.ulysses_sequence_parallel_size=4",
    )
    assert message.endswith(
        "do not divide the 2 ranks: pass actor.ulysses_sequence_parallel_size=2"
    )


def test_overrides_apply_to_a_loaded_config_and_render_as_typed():
    config = load_config(
        overrides=["cluster.component_placement={'actor,rollout': 0-3, reward: 4}"]
    )
    overrides = {
        "cluster.n_gpus_per_node": 4,
        "cluster.component_placement": {"actor,rollout": "all"},
        "cluster.cpus_per_worker": 0.5,
        "cluster.total_cpus": None,
    }
    changed = apply_overrides(config, overrides)
    assert changed.cluster.component_placement == {"actor,rollout": "all", "reward": 4}
    assert changed.cluster.cpus_per_worker == 0.5 and changed.cluster.n_gpus_per_node == 4
    text = render_overrides(overrides)
    assert text == (
        "cluster.n_gpus_per_node=4 'cluster.component_placement={\"actor,rollout\": all}' "
        "cluster.cpus_per_worker=0.5 cluster.total_cpus=null"
    )
    typed = load_config(
        overrides=[
            "cluster.component_placement={'actor,rollout': 0-3, reward: 4}",
            *shlex.split(text),
        ]
    )
    assert typed == changed
    with pytest.raises(ConfigError, match="cluster.nnodes = 0 is not allowed"):
        apply_overrides(config, {"cluster.nnodes": 0})


@pytest.mark.parametrize(
    ("overrides", "where"),
    [
        ([], "in this one process (trainer.launcher=local)"),
        (["trainer.launcher=ray", "cluster.n_gpus_per_node=2"], "on the actor's devices"),
    ],
)
def test_rollout_restarts_need_replicas_on_devices_of_their_own(machine, overrides, where):
    with pytest.raises(ConfigError) as refused:
        preflight(load_config(overrides=[*overrides, "trainer.rollout_restarts=2"]))
    message = str(refused.value)
    assert message.startswith("trainer.rollout_restarts = 2 replaces lost rollout replicas")
    assert where in message and "set trainer.rollout_restarts=0" in message
    split = ["cluster.n_gpus_per_node=2", "cluster.placement={actor: [0], rollout: [1]}"]
    preflight(load_config(overrides=["trainer.launcher=ray", *split, "trainer.rollout_restarts=2"]))
