"""Packed rows and token-budget micro-batches in the FSDP engine, against the padded path:
log-probs, entropy, values and whole updates are the same (fp32 tolerance) for any budget,
any micro-batch size, packed or padded; results come back in the caller's row order.

Shared prompts (`use_prefix_grouper`): rows with the same prompt hold it once in the packed
row. The packed row must be the unshared one with the repeats left out, and log-probs,
entropy, values and the gradients of an update must equal those of unshared packing (fp32
tolerance), whatever the order of the rows, with empty responses and tool tokens."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rl.core.config import ConfigError, OptimConfig, load_config
from rl.core.engines import Rollouts
from rl.core.micro_batches import MicroBatching
from rl.core.models import load_causal_lm, load_tokenizer, load_value_model
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.engine import FSDPTrainEngine
from rl.fsdp.packing import pack, prompt_owners, shared_prompt_fraction


def full(tensor):
    """The whole tensor: FSDP2's DTensors gathered (plain tensors at one rank in fp32)."""
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(load_config().model)


def qwen2(tokenizer, seed=0):
    return load_causal_lm(load_config().model, tokenizer, seed=seed)


def llama(tokenizer, seed=0):
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # GQA
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config).float()


MODELS = {"qwen2": qwen2, "llama": llama}


def ragged_batch(tokenizer, rows=7, seed=0, width=9):
    """Prompts and responses of very different lengths (a long tail, and empty responses)."""
    generator = torch.Generator().manual_seed(seed)
    prompts = [tokenizer(f"{i * 37}+{i}=" * (1 + i % 3)).input_ids for i in range(rows)]
    lengths = [width, 1, 0, 3, width, 2, 5][:rows]
    responses = [
        torch.randint(3, len(tokenizer), (n,), generator=generator).tolist() for n in lengths
    ]
    return build_batch(
        Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]),
        tokenizer.pad_token_id,
        width,
    )


def engine(model, role="actor", packed=True, rows=8, max_tokens=None, use_fused_kernels=False):
    batching = MicroBatching(rows, max_tokens, "actor.ppo_max_token_len_per_gpu")
    return FSDPTrainEngine(
        model,
        RoleSpec(
            role,
            optim=None if role == "ref" else OptimConfig(lr=1e-2),
            mini_batch_size=7,
            use_remove_padding=packed,
            train_batching=batching,
            use_fused_kernels=use_fused_kernels,
        ),
    )


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("fused", [False, True])
def test_packed_logprobs_and_entropy_equal_the_padded_ones(tokenizer, name, fused):
    batch = ragged_batch(tokenizer)
    padded = engine(MODELS[name](tokenizer), "ref", packed=False, use_fused_kernels=fused)
    packed = engine(MODELS[name](tokenizer), "ref", packed=True, use_fused_kernels=fused)
    a, b = padded.compute_logprobs(batch), packed.compute_logprobs(batch)
    mask = batch["response_mask"]
    assert torch.allclose(a.logprobs, b.logprobs, atol=2e-5)
    assert torch.allclose(a.entropy * mask, b.entropy * mask, atol=2e-5)
    assert (b.logprobs[mask == 0] == 0).all()


def test_packed_values_equal_the_padded_ones(tokenizer):
    batch = ragged_batch(tokenizer)
    model_config = load_config().model
    padded = engine(load_value_model(model_config, tokenizer), "critic", packed=False)
    packed = engine(load_value_model(model_config, tokenizer), "critic", packed=True)
    assert torch.allclose(padded.compute_values(batch), packed.compute_values(batch), atol=2e-5)


def test_the_critic_values_are_the_same_in_training_as_in_the_forward_pass(tokenizer):
    """No dropout in the value head (HF's token-classification default is 10 %): the
    values the update trains on are the ones `compute_values` gave."""
    batch = ragged_batch(tokenizer)
    critic = engine(load_value_model(load_config().model, tokenizer), "critic", packed=True)
    seen = []

    def record(values, micro, mini):
        seen.append((values.detach(), micro["response_mask"]))
        return (values * 0).sum(), {}

    forward = critic.compute_values(batch)
    critic.train_step(batch, record)
    trained = torch.cat([values[mask.bool()] for values, mask in seen])
    expected = forward[batch["response_mask"].bool()]
    assert torch.allclose(trained.sort().values, expected.sort().values, atol=1e-5)


def nll(output, micro, mini):
    """Token-mean over the whole mini-batch: micro-batch losses add up to the mini-batch's."""
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def gradients(step_gradients, tokenizer, name, packed, rows=8, max_tokens=None):
    """The gradient of one mini-batch update (compared instead of the weights, which
    AdamW's normalisation makes sign-sensitive)."""
    trained = engine(MODELS[name](tokenizer), packed=packed, rows=rows, max_tokens=max_tokens)
    with step_gradients(trained) as grads:
        metrics = trained.train_step(ragged_batch(tokenizer), nll)
    return grads, metrics


@pytest.mark.parametrize("name", list(MODELS))
def test_one_update_is_the_same_packed_or_padded_for_any_budget(tokenizer, name, step_gradients):
    """The token-mean loss is normalised by the whole mini-batch, so neither packing nor how
    the rows are cut into micro-batches (by rows or by token budget) changes the update."""
    reference, ref_metrics = gradients(step_gradients, tokenizer, name, packed=False, rows=7)
    longest = int(ragged_batch(tokenizer)["attention_mask"].sum(1).max())
    for packed, rows, budget in [
        (True, 7, None),
        (True, 2, None),
        (False, 3, None),
        (True, 8, longest),  # many micro-batches, one long row each
        (True, 8, 2 * longest),
        (False, 8, longest + 3),
    ]:
        grads, metrics = gradients(step_gradients, tokenizer, name, packed, rows, budget)
        assert metrics["actor/grad_norm"] == pytest.approx(ref_metrics["actor/grad_norm"], 1e-4)
        for key, value in reference.items():
            assert torch.allclose(value, grads[key], rtol=1e-4, atol=1e-7), (packed, rows, key)


def test_logprobs_come_back_in_the_callers_row_order(tokenizer):
    """A budget that groups rows out of order (heaviest first) must not permute results."""
    batch = ragged_batch(tokenizer)
    one_by_one = engine(qwen2(tokenizer), "ref", rows=1).compute_logprobs(batch)
    longest = int(batch["attention_mask"].sum(1).max())
    budgeted = engine(qwen2(tokenizer), "ref", rows=1, max_tokens=longest + 4)
    budgeted.forward_batching = MicroBatching(1, longest + 4, "ref.log_prob_max_token_len_per_gpu")
    got = budgeted.compute_logprobs(batch)
    assert torch.allclose(one_by_one.logprobs, got.logprobs, atol=2e-5)
    rows = [int(r) for r in torch.argsort(batch["response_mask"].sum(1))]
    assert rows != sorted(rows)  # the batch does reveal a permutation


def test_a_row_longer_than_the_budget_names_the_key_and_the_numbers(tokenizer):
    batch = ragged_batch(tokenizer)
    longest = int(batch["attention_mask"].sum(1).max())
    small = engine(qwen2(tokenizer), max_tokens=longest - 1)
    with pytest.raises(ValueError, match=rf"actor.ppo_max_token_len_per_gpu = {longest - 1}"):
        small.train_step(batch, nll)


@pytest.mark.parametrize("packed", [False, True])
def test_tool_tokens_are_context_not_trained_on(tokenizer, packed):
    """An agentic row interleaves model tokens (loss mask 1) with tool tokens (0): the
    log-probs at the model's tokens equal those of the same row with nothing masked (the
    tool tokens are attended to), none are computed at the tool tokens, and the outcome
    score sits on the last model token."""
    from rl.core.trainer.rollout_batch import scores_to_token_level

    prompts = [tokenizer("3+4=").input_ids, tokenizer("12+30=").input_ids]
    responses = [tokenizer("a:7 t:7 a:7").input_ids, tokenizer("a:42 t:4").input_ids]
    masks = [[1] * 4 + [0] * 4 + [1] * 3, [1] * 5 + [0] * 3]
    logprobs = [[0.0] * len(r) for r in responses]
    agentic = build_batch(
        Rollouts(prompts, responses, logprobs, [], masks), tokenizer.pad_token_id, 12
    )
    plain = build_batch(Rollouts(prompts, responses, logprobs), tokenizer.pad_token_id, 12)
    assert torch.equal(agentic["attention_mask"], plain["attention_mask"])
    assert torch.equal(agentic["input_ids"], plain["input_ids"])
    assert agentic["response_mask"][0].tolist() == [float(m) for m in masks[0]] + [0.0]
    ref = engine(qwen2(tokenizer), "ref", packed=packed)
    with_holes, full = ref.compute_logprobs(agentic).logprobs, ref.compute_logprobs(plain).logprobs
    model_tokens = agentic["response_mask"].bool()
    assert torch.allclose(with_holes[model_tokens], full[model_tokens], atol=2e-5)
    assert (with_holes[~model_tokens] == 0).all()
    scores = scores_to_token_level([1.0, 2.0], agentic["response_mask"])
    assert scores[0].nonzero().flatten().tolist() == [10] and scores[0, 10] == 1.0
    assert scores[1].nonzero().flatten().tolist() == [4] and scores[1, 4] == 2.0


# --- shared prompts ------------------------------------------------------------

# prompts by index into TEXTS: three groups, interleaved, one prompt alone
TEXTS = ["12+30=", "7+5=", "100+23=", "3+4="]
ROWS = [0, 1, 0, 2, 1, 0, 3, 2, 1]
LENGTHS = [4, 1, 0, 6, 3, 6, 2, 5, 6]  # responses, one empty, several full width


def grouped_batch(tokenizer, seed=0, width=6, tool_tokens=False):
    generator = torch.Generator().manual_seed(seed)
    prompts = [tokenizer(TEXTS[i]).input_ids for i in ROWS]
    responses = [
        torch.randint(3, len(tokenizer), (n,), generator=generator).tolist() for n in LENGTHS
    ]
    # agentic rows: the middle of some responses are tool tokens (context, not trained on)
    masks = [[0 if tool_tokens and 0 < t < 3 else 1 for t in range(len(r))] for r in responses]
    logprobs = [[0.0] * len(r) for r in responses]
    return build_batch(
        Rollouts(prompts, responses, logprobs, [], masks), tokenizer.pad_token_id, width
    )


def test_the_shared_row_is_the_unshared_one_without_the_repeated_prompts(tokenizer):
    batch = grouped_batch(tokenizer)
    plain, shared = pack(batch), pack(batch, share_prompts=True)
    prompt_lengths = [len(tokenizer(TEXTS[i]).input_ids) for i in range(len(TEXTS))]
    assert shared.input_ids.shape[1] == sum(prompt_lengths) + sum(LENGTHS)
    assert plain.input_ids.shape[1] == sum(prompt_lengths[i] for i in ROWS) + sum(LENGTHS)
    # each row's sequence, gathered from the shared row, is its unshared sequence
    index = shared.sequence_index
    assert torch.equal(shared.input_ids[0, index], plain.input_ids[0])
    assert torch.equal(shared.position_ids[0, index], plain.position_ids[0])
    assert torch.equal(shared.cu_seqlens.long(), plain.cu_seqlens.long())
    assert shared.max_seqlen == plain.max_seqlen
    # every packed position is written by exactly one sequence
    writes = torch.bincount(index[shared.owned], minlength=shared.input_ids.shape[1])
    assert (writes == 1).all()
    # the same tokens are predicted, from the same context
    assert torch.equal(
        shared.input_ids[0, shared.predict_index], plain.input_ids[0, plain.predict_index]
    )
    assert torch.equal(
        shared.position_ids[0, shared.predict_index], plain.position_ids[0, plain.predict_index]
    )


def test_rows_are_grouped_by_their_prompts_real_tokens(tokenizer):
    batch = grouped_batch(tokenizer)
    prompt_width = batch["input_ids"].shape[1] - batch["responses"].shape[1]
    owners = prompt_owners(
        batch["input_ids"][:, :prompt_width], batch["attention_mask"][:, :prompt_width]
    )
    assert owners.tolist() == [ROWS.index(i) for i in ROWS]
    repeated = sum(
        len(tokenizer(TEXTS[i]).input_ids) for row, i in enumerate(ROWS) if ROWS.index(i) != row
    )
    total = int(batch["attention_mask"].sum())
    assert shared_prompt_fraction(batch) == pytest.approx(repeated / total)


def test_distinct_prompts_pack_as_before(tokenizer):
    prompts = [tokenizer(text).input_ids for text in TEXTS]
    batch = build_batch(Rollouts(prompts, [[5, 6]] * 4, [[0.0] * 2] * 4), tokenizer.pad_token_id, 4)
    plain, shared = pack(batch), pack(batch, share_prompts=True)
    assert shared.sequence_index is None
    assert torch.equal(plain.input_ids, shared.input_ids)


def grouping_engine(model, role="actor", share=True, fused=False, rows=16):
    trained = engine(model, role, rows=rows, use_fused_kernels=fused)
    trained.passes.share_prompts = share
    return trained


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("fused", [False, True])
def test_logprobs_and_entropy_equal_the_unshared_ones(tokenizer, name, fused):
    batch = grouped_batch(tokenizer, tool_tokens=True)
    plain = grouping_engine(MODELS[name](tokenizer), "ref", share=False, fused=fused)
    shared = grouping_engine(MODELS[name](tokenizer), "ref", share=True, fused=fused)
    a, b = plain.compute_logprobs(batch), shared.compute_logprobs(batch)
    mask = batch["response_mask"]
    assert mask.sum() > 0 and (mask == 0).any()
    assert torch.allclose(a.logprobs, b.logprobs, atol=2e-5)
    assert torch.allclose(a.entropy * mask, b.entropy * mask, atol=2e-5)
    assert (b.logprobs[mask == 0] == 0).all()
    # and the shared forward is its own reference: the same rows give the same bits
    assert torch.equal(b.logprobs, shared.compute_logprobs(batch).logprobs)


def test_values_equal_the_unshared_ones(tokenizer):
    batch = grouped_batch(tokenizer)
    model_config = load_config().model
    plain = grouping_engine(load_value_model(model_config, tokenizer), "critic", share=False)
    shared = grouping_engine(load_value_model(model_config, tokenizer), "critic", share=True)
    assert torch.allclose(plain.compute_values(batch), shared.compute_values(batch), atol=2e-5)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("rows", [16, 4])  # one micro-batch; groups cut across micro-batches
def test_one_update_has_the_unshared_gradients(tokenizer, name, rows, step_gradients):
    """A repeated prompt's tokens get the gradients of all its rows' responses at once."""
    results = []
    for share in (False, True):
        trained = grouping_engine(MODELS[name](tokenizer), share=share, rows=rows)
        with step_gradients(trained) as grads:
            metrics = trained.train_step(grouped_batch(tokenizer), nll)
        results.append((grads, metrics))
    (reference, ref_metrics), (grads, metrics) = results
    assert metrics["actor/grad_norm"] == pytest.approx(ref_metrics["actor/grad_norm"], 1e-4)
    # to rounding, with a margin for CPUs whose kernels round differently: measured on an
    # AMD EPYC with 16 rows in one micro-batch, every tensor within 4.5e-5 of its norm and
    # 1.9e-4 of its largest entry (embed_tokens; 1e-6 with 4 rows); a wrong gradient is off
    # by percents
    for key, value in reference.items():
        difference = value - grads[key]
        assert difference.norm() <= 2e-4 * value.norm(), key
        assert difference.abs().max() <= 1e-3 * value.abs().max(), key
    assert "actor/prompt_tokens_shared" not in ref_metrics
    assert metrics["actor/prompt_tokens_shared"] > 0


def test_it_is_on_by_default_for_packed_rows_and_off_for_padded_ones(tokenizer):
    assert engine(qwen2(tokenizer)).passes.share_prompts
    assert not engine(qwen2(tokenizer), packed=False).passes.share_prompts


def test_asking_for_it_on_padded_rows_names_the_keys(tokenizer):
    with pytest.raises(ConfigError, match=r"actor.use_prefix_grouper = true needs actor.use_re"):
        FSDPTrainEngine(
            qwen2(tokenizer), RoleSpec("ref", use_remove_padding=False, use_prefix_grouper=True)
        )


@pytest.mark.parametrize("layout", ["padded", "packed", "shared"])
def test_the_lm_head_runs_on_the_positions_that_predict_response_tokens_only(tokenizer, layout):
    """`logits_to_keep`: the same logits as the head over every position, picked after."""
    from rl.fsdp.forward import response_outputs

    model = qwen2(tokenizer)
    batch = grouped_batch(tokenizer) if layout == "shared" else ragged_batch(tokenizer)
    rows_seen = []
    model.lm_head.register_forward_hook(lambda m, args, out: rows_seen.append(args[0].shape))
    options = {"packed": layout != "padded", "share_prompts": layout == "shared"}
    with torch.no_grad():
        everywhere = response_outputs(model, batch, **options)
        picked = response_outputs(model, batch, **options, lm_head=True)
    torch.testing.assert_close(picked, everywhere, rtol=0, atol=1e-6)
    tokens = int(batch["response_mask"].sum())
    real = int(batch["attention_mask"].sum())
    rows, response_len = batch["responses"].shape
    if layout == "padded":  # the response's columns (and the one before them) of each row
        assert rows_seen[1][:2] == (rows, response_len + 1)
    elif layout == "packed":
        assert rows_seen[0][1] <= real and rows_seen[1][1] == tokens
    else:  # a prompt's last position predicts each of its rows' first token: once on CPU
        distinct = pack(batch, share_prompts=True).predict_index.unique().numel()
        assert distinct < tokens and rows_seen[1][1] == distinct


def test_shared_prompt_gradients_are_bit_identical_run_to_run_with_two_threads(tokenizer):
    """The demo drifted from step 3 (issue 34): with two torch threads, the gradients of a
    shared prompt's keys and values (gathered into each of its rows' sequences) and of its
    last position's logits (one per row) were summed in thread order. 8 prompts of 16 rows,
    shuffled, responses long enough that the logits' gradient is parallelised too."""
    generator = torch.Generator().manual_seed(0)
    prompts = [tokenizer(f"{7 * i}+{i + 3}=").input_ids for i in range(8)]
    order = torch.randperm(8 * 16, generator=generator).tolist()
    lengths = torch.randint(1, 13, (8 * 16,), generator=generator).tolist()
    responses = [
        torch.randint(3, len(tokenizer), (n,), generator=generator).tolist() for n in lengths
    ]
    batch = build_batch(
        Rollouts(
            [prompts[row // 16] for row in order],
            [responses[row] for row in order],
            [[0.0] * len(responses[row]) for row in order],
        ),
        tokenizer.pad_token_id,
        12,
    )
    trained = grouping_engine(qwen2(tokenizer), rows=8 * 16)
    assert int(batch["response_mask"].sum()) * len(tokenizer) > 32768  # torch's grain size
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = []
        for _ in range(4):
            trained.model.zero_grad(set_to_none=True)
            loss, _ = nll(trained.passes.forward(batch, True), batch, batch)
            loss.backward()
            runs.append([full(p.grad).clone() for p in trained.model.parameters()])
    finally:
        torch.set_num_threads(threads)
    for grads in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(grads, runs[0], strict=True))
