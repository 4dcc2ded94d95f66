"""An RLinf user's job as they run it: RLinf's own math GRPO examples
(examples/reasoning/config/math/qwen2.5-1.5b-grpo-{fsdp,megatron}.yaml, verbatim), shrunk
to one CPU with RLinf's own keys (cluster, placement, paths, batch and lengths), on math
rows in RLinf's layout (jsonl, `prompt` / `solutions`) and a Qwen2.5-0.5B-shaped model
folder (2 layers, random weights). Both must train two steps and score with RLinf's math
reward (±reward_scale 5).

Nothing in these files is refused (their adam_eps 1e-5 is our optim.eps, their
normalize_advantages our whitening in RLinf's style) and nothing is allowed; the files'
offload settings are switched off with RLinf's keys (a CPU run); the FSDP file's fp16
autocast and gradient scaler train as RLinf runs them, with its FSDP mixed precision set
to null, which RLinf itself requires beside autocast (it refuses the file as shipped), and `rollout.rollout_backend=null` leaves
rl's HF engine (RLinf's engines, vLLM and SGLang, need a GPU). The megatron run needs
megatron's CPU mode (branch megatron-cpu-mode) until it is merged; with the test-only CPU
shims before it, it trained in two of four tries with the same config; the others stopped
at the first training rollout (HF sampling: "probability tensor contains nan")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

MATH = (
    Path(__file__).parent
    / "dialects"
    / "rlinf"
    / "upstream"
    / "examples"
    / "reasoning"
    / "config"
    / "math"
)


def shrink(model: Path, data: Path, out: Path) -> list[str]:
    """One CPU, two steps, RLinf's own keys (and rl's trainer.device)."""
    return [
        "cluster.num_nodes=1",
        "+cluster.num_gpus_per_node=1",
        f"rollout.model.model_path={model}",
        f"actor.tokenizer.tokenizer_model={model}",
        f"data.train_data_paths=[{data}]",
        f"data.val_data_paths=[{data}]",
        "data.rollout_batch_size=2",
        "algorithm.group_size=2",
        "algorithm.n_minibatches=1",
        "data.max_prompt_length=32",
        "runner.seq_length=48",
        "runner.max_steps=2",
        "runner.val_check_interval=-1",
        "runner.save_interval=-1",
        f"runner.output_dir={out}",
        "rollout.tensor_parallel_size=1",
        "rollout.rollout_backend=null",
        "trainer.device=cpu",
    ]


FSDP_CPU = [
    "actor.model.model_path={model}",
    "rollout.model.precision=fp32",
    "actor.enable_offload=False",
    "actor.fsdp_config.mixed_precision.param_dtype=null",
    "actor.fsdp_config.mixed_precision.reduce_dtype=null",
    "actor.fsdp_config.mixed_precision.buffer_dtype=null",  # RLinf: all null beside autocast
    # the file's fp16 autocast and gradient scaler stay on (torch autocasts fp16 on CPU)
]
MEGATRON_CPU = [
    "actor.megatron.ckpt_convertor.hf_model_path={model}",
    "actor.model.tensor_model_parallel_size=1",
    "actor.model.sequence_parallel=False",
    "actor.model.apply_rope_fusion=False",  # a Transformer Engine kernel
    "actor.model.precision=fp32",
    "actor.optim.fp16=False",
    "actor.offload_optimizer=False",
    "actor.offload_weight=False",
    "actor.offload_grad=False",
]


@pytest.fixture(scope="module")
def math_rows(tmp_path_factory):
    """RLinf's math layout: jsonl rows of a prompt text and a list of solutions."""
    path = tmp_path_factory.mktemp("math") / "train.jsonl"
    with path.open("w") as out:
        for i in range(8):
            prompt = f"What is {i}+{i}? Put the answer in \\boxed{{}}."
            out.write(json.dumps({"prompt": prompt, "solutions": [str(2 * i)]}) + "\n")
    return path


@pytest.mark.parametrize(
    ("name", "cpu"),
    [("qwen2.5-1.5b-grpo-fsdp", FSDP_CPU), ("qwen2.5-1.5b-grpo-megatron", MEGATRON_CPU)],
)
def test_rlinfs_math_example_trains(
    rl_executable, model_folder, math_rows, tmp_path, metrics_rows, name, cpu
):
    model = model_folder("qwen2.5-0.5b", num_layers=2)
    out = tmp_path / "results"
    command = [
        rl_executable,
        "train",
        "--from",
        "rlinf",
        str(MATH / f"{name}.yaml"),
        *shrink(model, math_rows, out),
        *(o.format(model=model) for o in cpu),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [r for r in metrics_rows(out / "grpo-1.5b") if "actor/pg_loss" in r]
    assert [r["step"] for r in rows] == [1, 2]
    # RLinf's math reward: +-reward_scale (5) per response
    assert all(-5.0 <= r["reward/mean"] <= 5.0 and r["reward/errors"] == 0 for r in rows)
    assert "running WITHOUT" not in result.stderr  # nothing dropped
    if name.endswith("fsdp"):  # the loss scaled by the file's grad_scaler, every step
        assert all(r["actor/grad_scale"] >= 1.0 for r in rows)
