"""verl's reward loop as its users configure it: the discriminative reward model of verl's
own launch script (`verl/upstream/examples/ppo_trainer/run_qwen2.5-3b_rm_reward_loop_colocate.sh`,
verbatim: `reward_model.use_reward_loop=True`, `reward_model.rollout.*`: served by vLLM's
pooling runner), and the generative
reward model as verl's reward-loop test sets it up (a custom function prompting the served
model on a resource pool of its own). Both convert with nothing refused, under the release
whose layout they use; the generative one trains 2 steps with a real served model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config

SCRIPT = (
    Path(__file__).parent
    / "verl/upstream/examples/ppo_trainer/run_qwen2.5-3b_rm_reward_loop_colocate.sh"
)
FUNCTIONS = Path(__file__).parents[3] / "core/tests/rewards/genrm/genrm_reward.py"

# verl's reward-loop GenRM test (tests/experimental/reward_loop/test_reward_model_genrm.py)
# sets these on its config, in the reward.* layout of verl 0.7.1+
GENRM = [
    f"reward.custom_reward_function.path={FUNCTIONS}",
    "reward.custom_reward_function.name=compute_score",
    "reward.reward_manager.name=dapo",
    "reward.reward_model.enable=True",
    "reward.reward_model.enable_resource_pool=True",
    "reward.reward_model.n_gpus_per_node=8",
    "reward.reward_model.nnodes=1",
    "reward.reward_model.model_path=/models/Qwen2.5-1.5B-Instruct",
    "reward.reward_model.rollout.name=vllm",
    "reward.reward_model.rollout.gpu_memory_utilization=0.9",
    "reward.reward_model.rollout.tensor_model_parallel_size=2",
    "reward.reward_model.rollout.skip_tokenizer_init=False",
    "reward.reward_model.rollout.prompt_length=2048",
    "reward.reward_model.rollout.response_length=4096",
]


@pytest.fixture
def release_root(verl_release, monkeypatch, tmp_path):
    """`release_root(version)`: verl's package folder as the current directory (its scripts
    run from its checkout's root), HOME a fresh folder, the script's environment unset."""

    def enter(version: str) -> Path:
        root = verl_release(version)
        monkeypatch.chdir(root)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        return root

    return enter


def test_verls_reward_loop_script_converts_with_nothing_refused(release_root, tmp_path):
    """Under verl 0.7.0, the release of the script's time (0.8 moved the critic's
    `model.fsdp_config` it sets)."""
    release_root("0.7.0")
    config, report = convert_config("verl", SCRIPT, [])
    model = config.reward.reward_model
    assert model.path == str(tmp_path / "home/models/Skywork-Reward-V2-Llama-3.2-3B")
    # discriminative (no custom function): a classifier served by vLLM's pooling runner
    assert model.rollout.name == "vllm" and not config.reward.generative_reward_model
    assert not model.enable_resource_pool  # colocated, as the script's name says
    assert model.rollout.context == 8192  # prompt_length + response_length
    entries = {entry.source: entry for entry in report.entries}
    assert [e.source for e in report.entries if e.status == "unsupported"] == []
    assert entries["reward_model.use_reward_loop"].status == "ignored"
    assert config.algorithm.adv_estimator == "gae" and config.uses_critic


@pytest.fixture(scope="module")
def quickstart(verl_quickstart):
    """verl's quickstart overrides (the run GenRM's keys are added to)."""
    return verl_quickstart("/models/qwen", "/data/gsm8k/train.parquet", "/data/gsm8k/test.parquet")


def test_verls_generative_reward_model_converts_with_nothing_refused(
    release_root, verl_release, quickstart
):
    release_root("0.9.1")
    trainer = verl_release("0.9.1") / "verl/trainer/config/ppo_trainer.yaml"
    config, report = convert_config("verl", trainer, [*quickstart, *GENRM])
    reward = config.reward
    assert reward.generative_reward_model
    model = reward.reward_model
    assert (model.path, model.rollout.name) == ("/models/Qwen2.5-1.5B-Instruct", "vllm")
    assert model.enable_resource_pool and model.replicas == 4  # 8 devices, 2 a replica
    assert model.rollout.context == 6144 and model.rollout.gpu_memory_utilization == 0.9
    assert reward.custom_reward_function.path == str(FUNCTIONS)
    assert [e.source for e in report.entries if e.status == "unsupported"] == []


@pytest.mark.slow
def test_verls_generative_reward_model_trains_two_steps_with_a_served_model(
    release_root,
    verl_release,
    quickstart,
    judge_folder,
    tmp_path,
    monkeypatch,
    shrunk,
    ray_stopped_after,
):
    """The served model says "7" to every prompt and stops: every sample scores 7, read by
    the function from the endpoint's answer."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rl.core.trainer import run_training

    release_root("0.9.1")
    judge = judge_folder("7", then_stop=True)
    monkeypatch.setenv("GENRM_MODEL", str(judge))
    trainer = verl_release("0.9.1") / "verl/trainer/config/ppo_trainer.yaml"
    config, _ = convert_config("verl", trainer, [*quickstart, *GENRM])
    monkeypatch.chdir(tmp_path)  # the run (and the Ray cluster it starts) from a folder of ours
    rows = [
        {
            "prompt": f"{a}+{b}=",
            "data_source": "arithmetic",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {"question": f"What is {a}+{b}?"},
        }
        for a in range(1, 5)
        for b in range(1, 3)
    ]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    tree = shrunk.tiny_cpu_run(config, data, tmp_path / "out")
    tree.pop("critic", None)  # verl's quickstart is PPO; GRPO here, no critic to train
    tree["algorithm"].update(adv_estimator="grpo")
    served = tree["reward"]["reward_model"]
    served.update(path=str(judge), n_gpus_per_node=1, nnodes=1)  # one Ray actor, on the CPU
    served["rollout"].update(name="hf", tensor_model_parallel_size=1, dtype="float32")
    served["rollout"].update(prompt_length=256, response_length=32)
    tree["reward"].update(reward_manager="naive", timeout_s=120)
    run_training(shrunk.build(tree))
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if '"reward/mean"' in line]
    assert len(steps) == 2
    for step in steps:
        assert step["reward/mean"] == 7.0
        assert step["reward/errors"] == 0
        assert step["reward/reward_model_requests"] == 8  # 4 prompts x 2 samples
