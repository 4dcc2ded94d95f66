"""A ChatLearn user's job as they run it: ChatLearn's own templates (grpo_fsdp.yaml,
grpo_megatron.yaml) and launch script (scripts/fsdp_vllm/train_fsdp_vllm_qwen3_8b_grpo.sh),
with ChatLearn's own keys for paths and sizes, on MATH-lighteval rows in ChatLearn's layout
(JSON Lines `.json`) and a Qwen3-0.6B-shaped model folder (2 layers, random weights), shrunk
to 2 steps on one CPU. Generation uses rl's HF engine (`rollout.name=hf`, rl's own key):
vLLM and SGLang need their builds."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

UPSTREAM = Path(__file__).parent / "dialects" / "chatlearn" / "upstream"
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
# 2 episodes of 2 prompts × 2 responses, one update each (ChatLearn's keys, in responses)
SHRINK = [
    "runtime_args.num_episode=2",
    "runtime_args.sample_per_episode=4",
    "runtime_args.train_global_batch_size=4",
    "runtime_args.train_micro_batch_size=2",
    "runtime_args.eval_episode_interval=0",
    "models.policy.num_inference_per_prompt=2",
    "models.policy.max_prompt_tokens_length=96",
    "models.policy.max_response_tokens_length=16",
    "models.policy_trainer.num_gpu=1",
    "models.policy_trainer.free_gpu_memory.offload_weights=False",
    "models.policy_trainer.free_gpu_memory.offload_optimizer_states=False",
    # random weights score 0 everywhere (no advantage): ChatLearn's entropy term (FSDP)
    # gives the update a gradient
    "models.policy_trainer.entropy_coef=0.001",
    # rl's own keys: one CPU, the HF engine
    "trainer.device=cpu",
    "rollout.name=hf",
]


def math_rows(count: int, split: str) -> list[dict]:
    """Rows as ChatLearn's data_preprocess/math_lighteval.py writes them."""
    return [
        {
            "data_source": "DigitalLearningGmbH/MATH-lighteval",
            "prompt": [{"role": "user", "content": f"What is {i} + {i + 1}? {INSTRUCTION}"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i + 1)},
            "extra_info": {"split": split, "index": i},
        }
        for i in range(count)
    ]


def write_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", 8), ("test", 4)):
        lines = "".join(json.dumps(row) + "\n" for row in math_rows(count, split))
        (folder / f"{split}.json").write_text(lines)
    return folder


@pytest.fixture(scope="module")
def qwen3(model_folder):
    return model_folder("qwen3-0.6b", num_layers=2, hidden_size=256, intermediate_size=512)


def train(rl, target, overrides, cwd, env=None):
    import os

    return subprocess.run(
        [rl, "train", "--from", "chatlearn", str(target), *overrides],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def assert_trained(result, out, metrics_rows):
    assert result.returncode == 0, result.stderr[-4000:]
    assert "0 unsupported" in result.stderr  # nothing of the job was dropped
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] >= 0 for r in rows)


def template_overrides(tmp_path, data, out):
    return [
        f"runtime_args.data_path={data / 'train.json'}",
        f"runtime_args.eval_data_path={data / 'test.json'}",
        f"runtime_args.output_dir={out}",
        *SHRINK,
    ]


def test_grpo_fsdp_template_trains(tmp_path, rl_executable, qwen3, metrics_rows):
    data, out = write_dataset(tmp_path / "math"), tmp_path / "out"
    overrides = [
        *template_overrides(tmp_path, data, out),
        f"models.policy_trainer.load={qwen3}",
        "models.policy_trainer.kl_coef=0.001",
    ]
    result = train(rl_executable, UPSTREAM / "template" / "grpo_fsdp.yaml", overrides, tmp_path)
    assert_trained(result, out, metrics_rows)
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert all(r["actor/grad_norm"] > 0 for r in rows)  # the entropy term updated the actor
    config = (out / "config.yaml").read_text()
    assert "pkg://rl.core.rewards.chatlearn_rule" in config and "enable_thinking: false" in config


@pytest.mark.megatron
def test_grpo_megatron_template_trains(tmp_path, rl_executable, qwen3, metrics_rows):
    """The megatron trainer starts from the HF folder (models.policy.load) when
    models.policy_trainer.load (an mcore checkpoint upstream) is null."""
    pytest.importorskip("megatron.core", reason="megatron-core is not installed")
    data, out = write_dataset(tmp_path / "math"), tmp_path / "out"
    overrides = [
        *template_overrides(tmp_path, data, out),
        f"models.policy.load={qwen3}",
        "models.policy_trainer.load=null",
        "models.policy.tensor_model_parallel_size=1",
        "models.policy_trainer.packing=False",
        "models.policy_trainer.free_gpu_memory.free_grad_buffers=False",
    ]
    target = UPSTREAM / "template" / "grpo_megatron.yaml"
    result = train(rl_executable, target, overrides, tmp_path)
    assert_trained(result, out, metrics_rows)
    assert "strategy: megatron" in (out / "config.yaml").read_text()


def test_the_fsdp_vllm_qwen3_script_converts_from_a_checkout(tmp_path, rl_executable, qwen3):
    """The script as it is, read from a ChatLearn checkout (its --config-file and
    ${CHATLEARN}/dataset, ${CHATLEARN}/pretrained_models paths), num_device exported as
    base_env.sh would set it, ChatLearn's own keys after it to shrink. It converts to the
    job the FSDP template test above trains (training it again would only repeat that run
    in CI): the script's own settings and paths land, nothing is refused."""
    checkout = tmp_path / "ChatLearn"
    shutil.copytree(UPSTREAM / "template", checkout / "template")
    shutil.copytree(UPSTREAM / "scripts", checkout / "scripts")
    write_dataset(checkout / "dataset" / "MATH-lighteval")
    (checkout / "pretrained_models").mkdir()
    (checkout / "pretrained_models" / "Qwen3-8B").symlink_to(qwen3, target_is_directory=True)
    script = "scripts/fsdp_vllm/train_fsdp_vllm_qwen3_8b_grpo.sh"
    overrides = [*SHRINK, "models.policy_trainer.packing=False"]
    import os

    import yaml

    converted = tmp_path / "ours.yaml"
    result = subprocess.run(
        [rl_executable, "convert", "--from", "chatlearn", script, *overrides, "-o", str(converted)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=checkout,
        env={**os.environ, "num_device": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:] + result.stdout[-4000:]
    assert "0 unsupported" in result.stdout
    config = yaml.safe_load(converted.read_text())
    assert config["model"]["path"].endswith("pretrained_models/Qwen3-8B/")
    assert config["data"]["train_files"][0].endswith("dataset/MATH-lighteval/train.json")
    assert config["actor"]["optim"]["lr"] == 2e-6  # the script's own value
    assert config["rollout"]["n"] == 2  # the shrink, after the script's 32
    assert config["trainer"]["output_dir"].endswith("output/qwen3-grpo-8b")
    assert config["reward"]["custom_reward_function"]["path"] == (
        "pkg://rl.core.rewards.chatlearn_rule"
    )
