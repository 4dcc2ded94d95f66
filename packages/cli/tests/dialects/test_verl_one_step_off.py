"""verl's roles on their own devices: its one-step-off launch script
(`verl/upstream/.../grpo_0.6b_gsm8k_fsdp2_2_6.sh`, verbatim) converts to our placement —
the trainer's pool (actor, ref) on devices 0..T-1 of each node, the rollout's on the R
after them — with trainer.mode one_step_off, the rollout's TP and engine; shrunk by the
script's own NGPUS_PER_NODE to 1 training + 2 rollout devices. What verl itself refuses
about the two pools is refused by name. Convert only (no model loads): seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config
from rl.core.config import ConfigError
from rl.core.workers.launch import cluster_placement

SCRIPT = (
    Path(__file__).parent
    / "verl"
    / "upstream"
    / "verl"
    / "experimental"
    / "one_step_off_policy"
    / "shell"
    / "grpo_0.6b_gsm8k_fsdp2_2_6.sh"
)
ONE_STEP_OFF_CONFIG = "verl/experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml"
# the script's one-step-off settings that rl's bypass mode covers once it lands
BYPASS = ("algorithm.rollout_correction.bypass_mode", "algorithm.rollout_correction.loss_type")
# this machine: the trainer's and the rollout's "devices" are worker processes (verl's keys,
# and rl's own cluster.cpus_per_worker so that three workers fit two cores)
SHRINK = [
    "trainer.device=cpu",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.n=2",
    "trainer.total_training_steps=2",
    "cluster.cpus_per_worker=0.5",
]


@pytest.fixture
def verl_root(verl_release, monkeypatch, tmp_path):
    """verl 0.9.1's package folder as the current directory: verl's scripts run from its
    checkout's root (the one-step-off config's searchpath is file://verl/trainer/config)."""
    root = verl_release("0.9.1")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("NNODES", "NGPUS_PER_NODE", "MODEL_PATH", "TRAIN_FILE", "TEST_FILE"):
        monkeypatch.delenv(name, raising=False)
    return root


def _convert(overrides=(), allow=BYPASS):
    config, report = convert_config("verl", SCRIPT, list(overrides), allow=allow)
    return config, report


def test_the_script_as_upstream_runs_it_places_the_two_pools(verl_root):
    config, report = _convert()
    assert "verl.experimental.one_step_off_policy.main_ppo" in report.render()
    assert config.cluster.placement == {
        "actor": [0, 1, 2, 3, 4, 5],
        "ref": [0, 1, 2, 3, 4, 5],
        "rollout": [6, 7],
    }
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (1, 8)
    assert not config.cluster.hybrid_engine
    assert config.trainer.mode == "one_step_off" and config.trainer.launcher == "ray"
    assert config.rollout.tensor_parallel_size == 2 and config.rollout.name == "vllm"
    placement = cluster_placement(config)
    assert placement.colocation == (("actor", "ref"),)  # the rollout shares no device
    assert not set(placement.devices["rollout"]) & set(placement.devices["actor"])


def test_two_nodes_split_each_node(verl_root, monkeypatch):
    monkeypatch.setenv("NNODES", "2")
    config, _ = _convert()
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (2, 8)
    assert config.cluster.placement["actor"] == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]
    assert config.cluster.placement["rollout"] == [6, 7, 14, 15]


def test_pools_on_nodes_of_their_own(verl_root):
    config, _ = _convert(
        ["trainer.nnodes=2", "trainer.n_gpus_per_node=8", "rollout.n_gpus_per_node=8"]
    )
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (3, 8)
    assert config.cluster.placement["actor"] == list(range(16))
    assert config.cluster.placement["rollout"] == list(range(16, 24))
    with pytest.raises(ConfigError, match="rollout.nnodes = 1 × rollout.n_gpus_per_node = 2"):
        _convert(["trainer.nnodes=2"])


def test_shrunk_to_one_training_and_two_rollout_devices(verl_root, monkeypatch):
    """The script's own NGPUS_PER_NODE=3 leaves 1 device to the trainer (its
    n_gpus_training = NGPUS_PER_NODE - 2), the rollout keeps its 2 and TP 2."""
    monkeypatch.setenv("NGPUS_PER_NODE", "3")
    config, report = _convert(SHRINK)
    assert config.cluster.placement == {"actor": [0], "ref": [0], "rollout": [1, 2]}
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (1, 3)
    assert config.cluster.cpus_per_worker == 0.5
    assert config.trainer.device == "cpu" and config.trainer.launcher == "ray"
    assert config.trainer.mode == "one_step_off"
    assert config.rollout.tensor_parallel_size == 2 and config.rollout.name == "vllm"
    assert config.rollout.n == 2 and config.trainer.total_training_steps == 2
    assert config.actor.use_kl_loss  # the reference runs on the trainer's device
    assert {e.source for e in report.refused()} <= set(BYPASS)


def test_the_hybrid_engine_left_on_is_refused_as_verl_does(verl_root):
    with pytest.raises(ConfigError) as error:
        _convert(["actor_rollout_ref.hybrid_engine=True"])
    message = str(error.value)
    assert "actor_rollout_ref.hybrid_engine = True" in message and "one-step-off" in message
    assert "actor_rollout_ref.hybrid_engine=False" in message and "\n" not in message


def test_an_estimator_the_one_step_off_trainer_lacks_is_refused(verl_root):
    with pytest.raises(ConfigError, match="algorithm.adv_estimator = 'remax'"):
        _convert(["algorithm.adv_estimator=remax"])


def test_main_ppo_without_the_hybrid_engine_is_refused_as_verl_does(verl_root):
    """verl's RayPPOTrainer asserts the hybrid engine: hybrid_engine=False with the plain
    main_ppo config is refused by name, never run as the hybrid engine."""
    config = verl_root / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    with pytest.raises(ConfigError) as error:
        convert_config(
            "verl",
            config,
            ["actor_rollout_ref.hybrid_engine=False", "actor_rollout_ref.rollout.name=vllm"],
        )
    message = str(error.value)
    assert "actor_rollout_ref.hybrid_engine = False" in message
    assert "verl.experimental.one_step_off_policy.main_ppo" in message


def test_the_one_step_off_config_file_alone_converts_the_same(verl_root):
    config, _ = convert_config(
        "verl",
        verl_root / ONE_STEP_OFF_CONFIG,
        [
            "actor_rollout_ref.hybrid_engine=False",
            "actor_rollout_ref.rollout.name=vllm",
            "trainer.n_gpus_per_node=4",
            "rollout.n_gpus_per_node=4",
        ],
        allow=BYPASS,
    )
    # verl's default estimator is GAE: the critic trains in the trainer's pool too
    trainer = [0, 1, 2, 3]
    assert config.cluster.placement == {
        "actor": trainer,
        "critic": trainer,
        "rollout": [4, 5, 6, 7],
    }
    assert config.trainer.mode == "one_step_off"
