"""Tied word embeddings in the megatron engine (Qwen2.5-0.5B, Qwen3-0.6B and Llama-3.2-1B
tie them): `share_embeddings_and_output_weights` follows the HF config, log-probs equal
the HF model's at TP 1, TP 2 and PP 2 (where the last stage holds a copy of the output
layer), the export sends the embedding once (no lm_head.weight, as save_pretrained), and
training equals one rank's and the FSDP engine's, the output layer moving with the
embedding. Each scenario runs in real processes (`_ranks.py`, gloo, the CPU debug mode)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

# the checks of test_engine.py (tests run with --import-mode=importlib: not importable)
_spec = importlib.util.spec_from_file_location(
    "megatron_test_engine", Path(__file__).with_name("test_engine.py")
)
_checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_checks)
bit_exact_round_trip, close_to_hf = _checks.bit_exact_round_trip, _checks.close_to_hf
same_steps, same_training = _checks.same_steps, _checks.same_training

pytestmark = [pytest.mark.megatron, pytest.mark.slow]

TIED = {"tie_word_embeddings": True}
LLAMA3_ROPE = dict(
    rope_type="llama3",
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=32,
)
LOGPROB_LAYOUTS = {
    "qwen2 TP=1": (1, {"model_type": "qwen2"}),
    "qwen3 TP=2 (sequence parallel)": (2, {"model_type": "qwen3", "tensor_model_parallel_size": 2}),
    "llama llama3-rope TP=2": (
        2,
        {"model_type": "llama", "rope_scaling": LLAMA3_ROPE, "tensor_model_parallel_size": 2},
    ),
    "qwen2 PP=2": (2, {"model_type": "qwen2", "pipeline_model_parallel_size": 2}),
}


@pytest.mark.parametrize("layout", list(LOGPROB_LAYOUTS))
def test_tied_logprobs_equal_hf_and_the_embedding_is_exported_once(run_ranks, layout):
    world, options = LOGPROB_LAYOUTS[layout]
    results = run_ranks("logprobs", world, **TIED, **options)
    for result in results:
        assert result["shared_embedding"]
        assert "lm_head.weight" not in result["original"]  # save_pretrained writes it once
        assert "lm_head.weight" not in result["exported"]
        close_to_hf(result)
        bit_exact_round_trip(result)
    folder = Path(results[0]["hf_folder"])  # save_hf: the same, loadable tied
    assert set(load_file(folder / "model.safetensors")) == set(results[0]["original"])
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.weight, results[0]["original"]["model.embed_tokens.weight"])


def test_untied_llama3_rope_scaling_equals_hf(run_ranks):
    """The rotary scaling alone (megatron ignored it: other positions than HF's)."""
    for result in run_ranks("logprobs", 1, model_type="llama", rope_scaling=LLAMA3_ROPE):
        assert not result["shared_embedding"]
        assert "lm_head.weight" in result["exported"]
        close_to_hf(result)
        bit_exact_round_trip(result)


@pytest.fixture(scope="module")
def tied_runs():
    return {}


def tied_training(run_ranks, cache, world, **layout):
    key = (world, tuple(sorted(layout.items())))
    if key not in cache:
        # Qwen2, whose weight bounds test_engine.py measured (Adam turns rounding into
        # ~1e-4 moves of a few MLP weights of the Qwen3 shape, tied or not)
        cache[key] = run_ranks("train", world, **TIED, model_type="qwen2", **layout)
    return cache[key]


def test_a_tied_single_rank_step_equals_the_fsdp_engines(run_ranks, tied_runs):
    (ref,) = tied_training(run_ranks, tied_runs, 1)
    assert "lm_head.weight" not in ref["weights"] and "lm_head.weight" not in ref["fsdp_weights"]
    same_steps(ref["metrics"], ref["fsdp_metrics"], ref["weights"], ref["fsdp_weights"])
    embedding = "model.embed_tokens.weight"  # both uses' gradient, one tensor
    assert (ref["weights"][embedding] - ref["fsdp_weights"][embedding]).abs().max() < 1e-5
    assert (ref["logprobs_after"] - ref["fsdp_logprobs_after"]).abs().max() < 5e-5


@pytest.mark.parametrize(
    "layout",
    [{"tensor_model_parallel_size": 2}, {"pipeline_model_parallel_size": 2}],
    ids=["TP=2", "PP=2"],
)
def test_tied_training_at_two_ranks_equals_one_rank(run_ranks, tied_runs, layout):
    """At PP 2 the last stage's output layer is a copy of the first stage's embedding:
    their gradients are summed over the embedding group, so after the steps the log-probs
    (which read the copy) still equal one rank's, where the two are one tensor."""
    reference = tied_training(run_ranks, tied_runs, 1)
    results = tied_training(run_ranks, tied_runs, 2, **layout)
    same_training(reference, results, weights_atol=ADAM_NOISE)
    for result in results:
        few_off(result["weights"], reference[0]["weights"])
        assert (result["logprobs_after"] - reference[0]["logprobs_after"]).abs().max() < 5e-5


# A weight whose gradient is near zero moves by a rounding-dependent part of Adam's step
# (lr 1e-2): with tied embeddings one element of the Qwen2 shape's o_proj ended 9e-5 away
# at TP 2. Bound: 2 % of a step for any element, 0.5 % for all but 2 of each tensor.
ADAM_NOISE = 2e-4


def few_off(weights, reference):
    for name, tensor in reference.items():
        off = int(((weights[name] - tensor).abs() > 5e-5).sum())
        assert off <= 2, (name, off)


def test_a_tied_folder_at_pp2_gives_the_last_stage_its_head_from_the_embedding(run_ranks):
    """A save_pretrained folder of a tied model holds no lm_head.weight: the last stage's
    copy of the output layer is read from model.embed_tokens.weight (its rows only)."""
    first, second = run_ranks(
        "reads", 2, **TIED, model_type="qwen2", pipeline_model_parallel_size=2
    )
    for result in (first, second):
        assert (result["logprobs"] - result["hf"]).abs().max() < 2e-5
    names = [{name for name, _ in result["read"]} for result in (first, second)]
    assert "model.embed_tokens.weight" in names[0] & names[1]  # stage 0 and the head's copy
    assert not any("lm_head" in name for found in names for name in found)
