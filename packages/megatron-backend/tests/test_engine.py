"""The megatron engine against Hugging Face and against itself at other layouts.

Each scenario runs in 1 or 2 real processes (gloo on CPU, megatron-core's local spec in
rl-megatron's CPU debug mode); `_ranks.py` holds the scenarios. References are independent:
the HF model's own forward (fp32) for log-probs, the checkpoint's tensors for the weight
round trip, and the TP = PP = EP = DP = 1 run for training (itself checked against
log-probs of HF).
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

pytestmark = [pytest.mark.megatron, pytest.mark.slow]

LAYOUTS = {
    "TP=1": (1, {}),
    "TP=2 (sequence parallel)": (2, {"tensor_model_parallel_size": 2}),
    "TP=2 (no sequence parallel)": (
        2,
        {"tensor_model_parallel_size": 2, "sequence_parallel": False},
    ),
}


def close_to_hf(result, atol=2e-5):
    mask = result["mask"].bool()
    hf_logprobs, hf_entropy = result["hf"]
    for key in ("packed=True", "packed=False"):
        logprobs, entropy = result[key]
        assert (logprobs - hf_logprobs)[mask].abs().max() < atol, key
        assert (entropy - hf_entropy)[mask].abs().max() < atol, key
        assert not logprobs[~mask].any() and not entropy[~mask].any(), key  # zeros at padding
        alone, no_entropy = result[f"{key} without entropy"]  # the reference's call
        assert torch.equal(alone, logprobs) and no_entropy is None, key


def bit_exact_round_trip(result):
    exported, original = result["exported"], result["original"]
    assert list(exported) == [n for n in exported if n in original]
    assert set(exported) == set(original)
    for name, tensor in original.items():
        assert torch.equal(exported[name], tensor), name


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_logprobs_equal_hf_packed_and_padded_and_weights_round_trip(run_ranks, layout):
    world, options = LAYOUTS[layout]
    for result in run_ranks("logprobs", world, **options):
        close_to_hf(result)
        bit_exact_round_trip(result)


def test_qwen3_moe_at_ep2_equals_hf(run_ranks):
    for result in run_ranks("logprobs", 2, model_type="qwen3_moe", expert_model_parallel_size=2):
        close_to_hf(result)
        bit_exact_round_trip(result)


@pytest.fixture(scope="module")
def reference_runs():
    return {}


def trained(run_ranks, cache, world, **layout):
    key = (world, tuple(sorted(layout.items())))
    if key not in cache:
        cache[key] = run_ranks("train", world, **layout)
    return cache[key]


def same_steps(metrics, ref_metrics, weights, ref_weights, role="actor", weights_atol=2e-4):
    """Equal per-step metrics (loss, gradient norm, weight norm, lr) and updated weights.
    Two AdamW steps turn reduction-order rounding (~1e-7) into ~1e-5 differences in the
    weights at lr 1e-2, more where a gradient entry is near 0 (Adam divides by its root
    mean square; measured up to 6.7e-5 at TP 2 on an AMD EPYC, 1.4e-4 on the Qwen3 shape):
    the default bound is 2 % of one step, a wrong gradient moves weights by whole steps."""
    for mine, theirs in zip(metrics, ref_metrics, strict=True):
        for key in (f"{role}/loss", f"{role}/grad_norm", f"{role}/weight_norm", "lr"):
            assert mine[key] == pytest.approx(theirs[key], rel=1e-5), key
    assert set(weights) == set(ref_weights)
    for name, tensor in ref_weights.items():
        assert (weights[name] - tensor).abs().max() < weights_atol, name


def same_training(reference, results, weights_atol=2e-4):
    """Equal log-probs before training, then `same_steps` for every rank's result."""
    (ref,) = reference
    for result in results:
        assert (result["logprobs"] - ref["logprobs"]).abs().max() < 2e-5
        same_steps(
            result["metrics"],
            ref["metrics"],
            result["weights"],
            ref["weights"],
            "actor",
            weights_atol,
        )


@pytest.mark.parametrize(
    "world, layout",
    [
        (2, {"tensor_model_parallel_size": 2}),
        (2, {}),  # data parallel, distributed optimizer
        (2, {"pipeline_model_parallel_size": 2}),
    ],
    ids=["TP=2", "DP=2", "PP=2"],
)
def test_training_steps_equal_the_single_rank_ones(run_ranks, reference_runs, world, layout):
    reference = trained(run_ranks, reference_runs, 1)
    same_training(reference, trained(run_ranks, reference_runs, world, **layout))


def test_qwen3_moe_training_at_ep2_equals_ep1(run_ranks, reference_runs):
    reference = trained(run_ranks, reference_runs, 1, model_type="qwen3_moe")
    results = trained(
        run_ranks, reference_runs, 2, model_type="qwen3_moe", expert_model_parallel_size=2
    )
    same_training(reference, results)


def test_bf16_training_tracks_fp32(run_ranks, reference_runs):
    """`megatron.dtype: bfloat16`: bf16 weights and activations, fp32 master weights in
    the optimizer (megatron's Float16Module and mixed-precision optimizer): the loss and
    gradient norm stay within 2 % of the fp32 run's (measured: 1.0 % on the gradient norm
    on an AMD EPYC, bf16 keeps 8 bits of mantissa), steps are taken, weights are bf16."""
    (reference,) = trained(run_ranks, reference_runs, 1)
    (bf16,) = trained(run_ranks, reference_runs, 1, dtype="bfloat16")
    assert (bf16["logprobs"] - reference["logprobs"]).abs().max() < 0.02
    for mine, theirs in zip(bf16["metrics"], reference["metrics"], strict=True):
        assert mine["actor/skipped_steps"] == 0.0
        for key in ("actor/loss", "actor/grad_norm", "actor/weight_norm"):
            assert mine[key] == pytest.approx(theirs[key], rel=0.02), key
    assert all(tensor.dtype == torch.bfloat16 for tensor in bf16["weights"].values())


def test_fp16_scales_the_loss_dynamically_or_as_override_optimizer_config_says(run_ranks):
    """`megatron.dtype: float16`: megatron's fp16 optimizer with dynamic loss scaling takes
    its steps; a static `loss_scale` (override_optimizer_config, RLinf's optim.loss_scale)
    too large for fp16 gradients overflows on every step, and every step is skipped."""
    (dynamic,) = run_ranks(
        "train", 1, dtype="float16", override_optimizer_config={"initial_loss_scale": 1024.0}
    )
    assert [m["actor/skipped_steps"] for m in dynamic["metrics"]] == [0.0, 0.0]
    assert dynamic["metrics"][0]["actor/grad_scale"] == 1024.0
    (static,) = run_ranks(
        "train", 1, dtype="float16", override_optimizer_config={"loss_scale": 2.0**40}
    )
    assert [m["actor/skipped_steps"] for m in static["metrics"]] == [1.0, 1.0]
    assert all(m["actor/grad_scale"] == 2.0**40 for m in static["metrics"])


def test_the_single_rank_step_equals_the_fsdp_engines(run_ranks, reference_runs):
    """An independent reference: the FSDP engine (HF model, torch AdamW) on the same batch,
    loss and optimizer settings reports the same loss and gradient norm and ends with the
    same weights."""
    (ref,) = trained(run_ranks, reference_runs, 1)
    same_steps(ref["metrics"], ref["fsdp_metrics"], ref["weights"], ref["fsdp_weights"])
    first, second = ref["metrics"]
    assert second["actor/loss"] < first["actor/loss"] - 0.1  # and it learns


def test_interleaved_pipeline_pp3_vpp2_equals_one_rank(run_ranks):
    """The interleaved schedule: 6 layers as PP 3 × VPP 2 (each rank holds two 1-layer
    chunks; 3 processes on 2 cores) trains like 1 rank on 3 variable-length micro-batches,
    and its log-probs in 1 micro-batch (the schedule needs PP: 2 copies are run and
    ignored) equal 1 rank's."""
    options = {"num_hidden_layers": 6}
    (reference,) = run_ranks("train", 1, **options)
    results = run_ranks(
        "train",
        3,
        pipeline_model_parallel_size=3,
        virtual_pipeline_model_parallel_size=2,
        **options,
    )
    same_training([reference], results)


@pytest.mark.parametrize(
    "layout", [{"tensor_model_parallel_size": 2}, {}], ids=["TP=2", "DP=2 distributed optimizer"]
)
def test_a_resumed_step_is_bit_identical_to_the_uninterrupted_one(resume_runs, layout):
    """dist-checkpointing of the model and the (distributed) optimizer state, and the LR
    schedule, the Adam step and the sampling generator beside it: the step after loading
    equals the step the saving engine took next, bit for bit."""
    for result in resume_runs(**layout):
        (straight, straight_weights), (resumed, resumed_weights) = (
            result["straight"],
            result["resumed"],
        )
        assert resumed == straight
        for name, tensor in straight_weights.items():
            assert torch.equal(resumed_weights[name], tensor), name


@pytest.mark.parametrize(
    "layout",
    [{}, {"tensor_model_parallel_size": 2, "use_distributed_optimizer": False}],
    ids=["DP=2 distributed optimizer", "TP=2 plain optimizer"],
)
def test_offload_frees_the_memory_and_onload_resumes_bit_identically(run_ranks, layout):
    """`param_offload` / `grad_offload` / `optimizer_offload`: while offloaded the
    parameters', gradients' and optimizer state's storages hold no memory; after onload
    the next step is the uninterrupted engine's, bit for bit."""
    for result in run_ranks("offload", 2, **layout):
        assert result["offloads"]
        assert all(size > 0 for size in result["before"].values()), result["before"]
        assert result["while_away"] == {"params": 0, "grads": 0, "optimizer": 0}
        (straight, straight_weights), (moved, moved_weights) = (
            result["straight"],
            result["offloaded"],
        )
        assert moved == straight
        for name, tensor in straight_weights.items():
            assert torch.equal(moved_weights[name], tensor), name


@pytest.mark.parametrize(
    "model_type, layout",
    [
        ("qwen2", {"pipeline_model_parallel_size": 2}),
        ("qwen3_moe", {"expert_model_parallel_size": 2}),
        ("qwen2", {"tensor_model_parallel_size": 2}),
    ],
    ids=["PP=2", "EP=2", "TP=2"],
)
def test_each_rank_reads_only_its_part_of_the_checkpoint(run_ranks, model_type, layout):
    """From a safetensors folder, a pipeline stage reads its own layers (the first the
    embedding, the last the final norm and head), an expert rank its own experts, a TP
    rank its rows or columns of each split tensor; the log-probs still equal HF's."""
    first, second = run_ranks("reads", 2, model_type=model_type, **layout)
    for result in (first, second):
        assert (result["logprobs"] - result["hf"]).abs().max() < 2e-5
    names = [{name for name, _ in result["read"]} for result in (first, second)]
    elements = [sum(math.prod(shape) for _, shape in result["read"]) for result in (first, second)]
    if "pipeline_model_parallel_size" in layout:  # 4 layers: 0-1 on rank 0, 2-3 on rank 1
        assert not any(".layers.2." in n or ".layers.3." in n for n in names[0])
        assert not any(".layers.0." in n or ".layers.1." in n for n in names[1])
        assert "model.embed_tokens.weight" in names[0] - names[1]
        assert "model.norm.weight" in names[1] - names[0]
    elif "expert_model_parallel_size" in layout:  # 4 experts: 0-1 on rank 0, 2-3 on rank 1
        experts = [{n for n in found if ".experts." in n} for found in names]
        assert experts[0] and experts[1] and not experts[0] & experts[1]
        assert all(".experts.0." in n or ".experts.1." in n for n in experts[0])
        assert names[0] - experts[0] == names[1] - experts[1]
    else:  # the same tensors, each rank about half of every split one
        assert names[0] == names[1]
        assert all(0.45 < count / first["total"] < 0.55 for count in elements), elements


@pytest.fixture(scope="module")
def critic_runs():
    return {}


def critic_run(run_ranks, cache, world, **layout):
    key = (world, tuple(sorted(layout.items())))
    if key not in cache:
        cache[key] = run_ranks("critic", world, **layout)
    return cache[key]


def test_the_critic_values_equal_hf_and_its_steps_the_fsdp_critics(run_ranks, critic_runs):
    """A megatron critic (backbone + `ValueHead`) started from an HF token-classification
    model: V(s) equals the HF model's; two value-loss steps equal the FSDP critic's (loss,
    gradient norm, weights); its `save_hf` folder loads as an HF value model."""
    import transformers

    (result,) = critic_run(run_ranks, critic_runs, 1)
    mask = result["mask"].bool()
    assert (result["values"][mask] - result["hf_values"][mask]).abs().max() < 2e-5
    assert result["values"][~mask].abs().max() == 0
    same_steps(
        result["metrics"],
        result["fsdp_metrics"],
        result["weights"],
        result["fsdp_weights"],
        "critic",
    )
    loaded = transformers.AutoModelForTokenClassification.from_pretrained(result["folder"])
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, result["weights"][name]), name


@pytest.mark.parametrize(
    "layout",
    [{"tensor_model_parallel_size": 2}, {"pipeline_model_parallel_size": 2}],
    ids=["TP=2 SP", "PP=2"],
)
def test_the_critic_at_two_ranks_equals_one(run_ranks, critic_runs, layout):
    (reference,) = critic_run(run_ranks, critic_runs, 1)
    for result in critic_run(run_ranks, critic_runs, 2, **layout):
        assert (result["values"] - reference["values"]).abs().max() < 2e-5
        same_steps(
            result["metrics"],
            reference["metrics"],
            result["weights"],
            reference["weights"],
            "critic",
        )


def test_a_torn_checkpoint_is_one_clear_error(run_ranks):
    (result,) = run_ranks("torn", 1)
    assert result["type"] == "CheckpointError", result
    assert "is not a readable megatron checkpoint" in result["message"]
    assert "resume from an earlier one" in result["message"]


def convert(rl_executable, to, source, out):
    result = subprocess.run(
        [rl_executable, "convert-ckpt", "--to", to, str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_hf_to_megatron_checkpoint_loads_at_tp2_and_a_tp2_checkpoint_converts_to_hf(
    run_ranks, resume_runs, tmp_path, rl_executable
):
    """`rl convert-ckpt` (one CPU process, no CUDA stand-ins) writes a distributed
    checkpoint that an engine at TP 2 starts from (`use_dist_checkpointing`: log-probs =
    HF; a critic takes its backbone and a new head, and a critic's own checkpoint its
    head too); converting back is bit-exact; and a checkpoint a TP 2 run saved converts to the
    HF weights that run exported."""
    (written,) = run_ranks("write_hf", 1)
    convert(rl_executable, "megatron", written["folder"], tmp_path / "dist")
    convert(rl_executable, "hf", tmp_path / "dist", tmp_path / "back")
    original = load_file(Path(written["folder"]) / "model.safetensors")
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert set(back) == set(original)
    assert all(torch.equal(back[name], tensor) for name, tensor in original.items())

    layout = {"use_dist_checkpointing": True, "dist_checkpointing_path": str(tmp_path / "dist")}
    for result in run_ranks("logprobs", 2, tensor_model_parallel_size=2, **layout):
        close_to_hf(result)
    # a critic from the LM checkpoint (new head) and from its own (head kept)
    for result in run_ranks("critic_from_dist", 2, tensor_model_parallel_size=2, **layout):
        mask = result["mask"].bool()
        assert (result["started"] - result["hf"])[mask].abs().max() < 2e-5
        assert (result["trained"] - result["started"])[mask].abs().max() > 1e-3
        assert torch.equal(result["restarted"], result["trained"])

    # the TP 2 run of test_a_resumed_step_is_bit_identical_to_the_uninterrupted_one
    trained = resume_runs(tensor_model_parallel_size=2)[0]
    convert(rl_executable, "hf", trained["checkpoint"], tmp_path / "trained")
    exported = load_file(tmp_path / "trained" / "model.safetensors")
    assert set(exported) == set(trained["saved"])
    for name, tensor in trained["saved"].items():
        assert torch.equal(exported[name], tensor), name


def test_override_optimizer_config_names_what_it_cannot_take():
    from rl.core.config import ConfigError, OptimConfig
    from rl.megatron.config import MegatronConfig
    from rl.megatron.optimizer import optimizer_config

    def built(**override):
        m = MegatronConfig(override_optimizer_config=override)
        return optimizer_config(m, OptimConfig(lr=1e-3, eps=1e-6), torch.float16, "critic")

    config = built(loss_scale=128.0, hysteresis=3)
    assert (config.loss_scale, config.hysteresis, config.adam_eps) == (128.0, 3, 1e-6)
    with pytest.raises(
        ConfigError,
        match=r"critic.megatron.override_optimizer_config.lr: rl "
        r"sets it from critic.optim.lr",
    ):
        built(lr=0.5)
    with pytest.raises(ConfigError, match="loss_scael is not OptimizerConfig field"):
        built(loss_scael=2.0)
