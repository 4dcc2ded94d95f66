"""verl's roles on their own devices: its one-step-off launch script
(`verl/upstream/.../grpo_0.6b_gsm8k_fsdp2_2_6.sh`, verbatim) converts to our placement —
the trainer's pool (actor, ref) on devices 0..T-1 of each node, the rollout's on the R
after them — with trainer.mode one_step_off, the rollout's TP and engine; shrunk by the
script's own NGPUS_PER_NODE to 1 training + 2 rollout devices. What verl itself refuses
about the two pools is refused by name. Convert only (no model loads): seconds."""

from __future__ import annotations

import pytest

from rl.cli.convert_cmd import convert_config
from rl.core.config import ConfigError
from rl.core.workers.launch import cluster_placement

ONE_STEP_OFF_CONFIG = "verl/experimental/one_step_off_policy/config/one_step_off_ppo_trainer.yaml"


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


@pytest.fixture
def convert_script(one_step_off):
    """`convert_script(*overrides)`: the script converted (our config, the report)."""

    def run(*overrides):
        return convert_config("verl", one_step_off.script, list(overrides))

    return run


def test_the_script_as_upstream_runs_it_places_the_two_pools(verl_root, convert_script):
    config, report = convert_script()
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


def test_two_nodes_split_each_node(verl_root, convert_script, monkeypatch):
    monkeypatch.setenv("NNODES", "2")
    config, _ = convert_script()
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (2, 8)
    assert config.cluster.placement["actor"] == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]
    assert config.cluster.placement["rollout"] == [6, 7, 14, 15]


def test_pools_on_nodes_of_their_own(verl_root, convert_script):
    config, _ = convert_script(
        "trainer.nnodes=2", "trainer.n_gpus_per_node=8", "rollout.n_gpus_per_node=8"
    )
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (3, 8)
    assert config.cluster.placement["actor"] == list(range(16))
    assert config.cluster.placement["rollout"] == list(range(16, 24))
    with pytest.raises(ConfigError, match="rollout.nnodes = 1 × rollout.n_gpus_per_node = 2"):
        convert_script("trainer.nnodes=2")


def test_shrunk_to_one_training_and_two_rollout_devices(
    verl_root, convert_script, one_step_off, monkeypatch
):
    """The script's own NGPUS_PER_NODE=3 leaves 1 device to the trainer (its
    n_gpus_training = NGPUS_PER_NODE - 2), the rollout keeps its 2 and TP 2."""
    monkeypatch.setenv("NGPUS_PER_NODE", "3")
    config, report = convert_script(*one_step_off.shrink)
    assert config.cluster.placement == {"actor": [0], "ref": [0], "rollout": [1, 2]}
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (1, 3)
    assert config.cluster.cpus_per_worker == 0.5
    assert config.trainer.device == "cpu" and config.trainer.launcher == "ray"
    assert config.trainer.mode == "one_step_off"
    assert config.rollout.tensor_parallel_size == 2 and config.rollout.name == "vllm"
    assert config.rollout.n == 2 and config.trainer.total_training_steps == 2
    assert config.actor.use_kl_loss  # the reference runs on the trainer's device
    assert config.actor.strategy == "fsdp"  # verl's fsdp2: rl's FSDP2 engine
    assert not report.refused()  # every key of the script maps or is rl's own business
    # its config's bypass mode: the rollout's log-probs are the old policy's
    assert config.algorithm.rollout_correction.bypass_mode
    assert config.algorithm.rollout_correction.loss_type == "ppo_clip"


def test_the_hybrid_engine_left_on_is_refused_as_verl_does(verl_root, convert_script):
    with pytest.raises(ConfigError) as error:
        convert_script("actor_rollout_ref.hybrid_engine=True")
    message = str(error.value)
    assert "actor_rollout_ref.hybrid_engine = True" in message and "one-step-off" in message
    assert "actor_rollout_ref.hybrid_engine=False" in message and "\n" not in message


def test_an_estimator_the_one_step_off_trainer_lacks_is_refused(verl_root, convert_script):
    with pytest.raises(ConfigError, match="algorithm.adv_estimator = 'remax'"):
        convert_script("algorithm.adv_estimator=remax")


def test_main_ppo_without_the_hybrid_engine_is_refused_as_verl_does(verl_root, convert_script):
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
    )
    # verl's default estimator is GAE: the critic trains in the trainer's pool too
    trainer = [0, 1, 2, 3]
    assert config.cluster.placement == {
        "actor": trainer,
        "critic": trainer,
        "rollout": [4, 5, 6, 7],
    }
    assert config.trainer.mode == "one_step_off"


def test_run_elsewhere_the_searchpath_of_the_config_is_named(
    verl_release, monkeypatch, tmp_path, one_step_off
):
    """verl's one-step-off config finds ppo_trainer through `file://verl/trainer/config`,
    which Hydra reads against the current directory: elsewhere verl fails, and so does rl,
    saying where to run from."""
    monkeypatch.syspath_prepend(str(verl_release("0.9.1")))  # verl installed
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        convert_config("verl", one_step_off.script, [])
    message = str(error.value)
    assert "file://verl/trainer/config" in message and str(tmp_path) in message
    assert "\n" not in message


def test_the_fully_async_config_runs_ahead_on_its_own_rollout_devices(verl_release, monkeypatch):
    """verl's fully-async trainer: the same two pools, rl's trainer.mode async. Its config
    finds ppo_trainer through `pkg://verl.trainer.config`, read where Python finds verl
    (never imported). Its own async settings (staleness as a fraction of samples, sync
    cadence, rollout log-probs as the old policy's, ...) are refused by name for now."""
    monkeypatch.syspath_prepend(str(verl_release("0.9.1")))
    config_file = (
        verl_release("0.9.1")
        / "verl/experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml"
    )
    overrides = [
        "actor_rollout_ref.hybrid_engine=False",
        "actor_rollout_ref.rollout.name=vllm",
        "algorithm.adv_estimator=grpo",
        "trainer.n_gpus_per_node=4",
        "rollout.n_gpus_per_node=4",
    ]
    with pytest.raises(ConfigError) as error:
        convert_config("verl", config_file, overrides)
    assert "async_training.staleness_threshold" in str(error.value)
    refused = ["async_training.*", "rollout.*", "data.gen_batch_size", "*.use_rollout_log_probs"]
    config, _ = convert_config("verl", config_file, overrides, allow=refused)
    assert config.cluster.placement == {"actor": [0, 1, 2, 3], "rollout": [4, 5, 6, 7]}
    assert config.trainer.mode == "async"
