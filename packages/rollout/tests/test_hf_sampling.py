"""`rl.rollout.hf_sampling.sample` draws Hugging Face `generate`'s tokens, seed for seed,
with every prompt prefilled once for its n responses."""

import pytest
import torch
from transformers import DynamicCache, GenerationConfig

from rl.core.config import load_config
from rl.core.engines import SamplingParams
from rl.core.models import load_causal_lm, load_tokenizer
from rl.rollout.hf import left_pad
from rl.rollout.hf_sampling import sample


@pytest.fixture(scope="module")
def model_and_tokenizer():
    config = load_config()
    tokenizer = load_tokenizer(config.model)
    return load_causal_lm(config.model, tokenizer, seed=3).eval(), tokenizer


def with_generate(model, ids, mask, sampling, pad_id, stop_ids):
    """The oracle: transformers' own `generate` over the prompts repeated n times."""
    greedy = sampling.temperature == 0
    min_new = sampling.max_new_tokens if sampling.ignore_eos else sampling.min_new_tokens
    config = GenerationConfig(
        do_sample=not greedy,
        temperature=None if greedy else sampling.temperature,
        top_p=None if greedy else sampling.top_p,
        top_k=None if greedy else max(sampling.top_k, 0),
        max_new_tokens=sampling.max_new_tokens,
        min_new_tokens=min_new or None,
        repetition_penalty=sampling.repetition_penalty,
        eos_token_id=stop_ids,
        pad_token_id=pad_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    output = model.generate(
        input_ids=ids.repeat_interleave(sampling.n, 0),
        attention_mask=mask.repeat_interleave(sampling.n, 0),
        generation_config=config,
    )
    tokens = output.sequences[:, ids.shape[1] :]
    scaled = torch.stack(output.logits, 1).float() / (sampling.temperature or 1.0)
    logprobs = torch.log_softmax(scaled, -1).gather(-1, tokens[..., None]).squeeze(-1)
    return tokens, logprobs


SETTINGS = {
    "plain": SamplingParams(n=3, max_new_tokens=8),
    "warped": SamplingParams(n=2, temperature=0.7, top_p=0.8, top_k=7, max_new_tokens=8),
    "greedy": SamplingParams(n=1, temperature=0.0, max_new_tokens=6),
    "penalty_min_new": SamplingParams(
        n=3, temperature=1.3, repetition_penalty=1.5, min_new_tokens=4, max_new_tokens=8
    ),
    "ignore_eos": SamplingParams(n=2, ignore_eos=True, max_new_tokens=6),
    "stop_tokens": SamplingParams(n=4, stop_token_ids=[5, 6, 7, 8], max_new_tokens=8),
}


PROMPTS = {
    "padded": ("12+7=", "3-1=", "5=", "44+44="),
    "unpadded": ("1+2=", "3-1=", "9+9=", "7-5="),  # a mask of ones: generate skips it
}


def generate_and_sample(model, tokenizer, texts, sampling, seed, decode_step=True):
    """`generate`'s tokens and their log-probs (from its raw logits), then `sample`'s, from
    the same seed: (want_tokens, want_logprobs, tokens, logprobs, stop_ids)."""
    ids, mask = left_pad([tokenizer(text).input_ids for text in texts], tokenizer.pad_token_id)
    stop_ids = [tokenizer.eos_token_id, *sampling.stop_token_ids]
    with torch.inference_mode():
        torch.manual_seed(seed)
        want = with_generate(model, ids, mask, sampling, tokenizer.pad_token_id, stop_ids)
        torch.manual_seed(seed)
        got = sample(
            model, ids, mask, sampling, tokenizer.pad_token_id, stop_ids, decode_step=decode_step
        )
    return (*want, *got, stop_ids)


@pytest.mark.parametrize("decode_step", [True, False], ids=["decode_step", "model_forward"])
@pytest.mark.parametrize("prompt_set", PROMPTS)
@pytest.mark.parametrize("name", SETTINGS)
def test_the_tokens_and_logprobs_of_generate_seed_for_seed(
    model_and_tokenizer, name, prompt_set, decode_step
):
    model, tokenizer = model_and_tokenizer
    sampling = SETTINGS[name]
    want_tokens, want_logprobs, tokens, logprobs, stop_ids = generate_and_sample(
        model, tokenizer, PROMPTS[prompt_set], sampling, seed=11, decode_step=decode_step
    )
    assert tokens.shape[0] == len(PROMPTS[prompt_set]) * sampling.n
    assert torch.equal(tokens, want_tokens)
    assert torch.allclose(logprobs, want_logprobs, atol=1e-5)
    if name == "ignore_eos":
        assert tokens.shape[1] == sampling.max_new_tokens
        assert not torch.isin(tokens, torch.tensor(stop_ids)).any()
    if name == "stop_tokens":  # some rows stopped early on a stop token and were padded
        stopped = torch.isin(tokens, torch.tensor(stop_ids)).any(1)
        assert stopped.any()


@pytest.mark.parametrize("name", ["plain", "warped"])
def test_a_model_on_eager_attention_gets_the_same_tokens_as_generate(name):
    """Eager attention adds its mask to the scores, so decode steps keep the model's own
    (2-D) mask there; the SDPA mask is for SDPA only."""
    config = load_config()
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer, seed=3).eval()
    model.set_attn_implementation("eager")
    want_tokens, want_logprobs, tokens, logprobs, _ = generate_and_sample(
        model, tokenizer, PROMPTS["padded"], SETTINGS[name], seed=5
    )
    assert torch.equal(tokens, want_tokens)
    assert torch.allclose(logprobs, want_logprobs, atol=1e-5)


@pytest.mark.parametrize("decode", ["decode_step", "model_forward"])
def test_each_prompt_is_prefilled_once_for_its_n_responses(
    model_and_tokenizer, monkeypatch, decode
):
    """The prefill runs the 2 prompts once; the decode steps run 8 rows, in the engine's
    own decode step (`DecodeStep`: its key/value buffers hold 8 rows) or, for a model it
    does not serve, through `model(...)` after the cache's rows are repeated."""
    from rl.rollout import hf_sampling

    model, tokenizer = model_and_tokenizer
    prompts = [tokenizer(text).input_ids for text in ("12+7=", "3-1=")]
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    rows_seen, repeats, buffers = [], [], []
    forward = model.forward
    monkeypatch.setattr(
        model, "forward", lambda **kw: rows_seen.append(kw["input_ids"].shape) or forward(**kw)
    )
    original = DynamicCache.batch_repeat_interleave
    monkeypatch.setattr(
        DynamicCache,
        "batch_repeat_interleave",
        lambda self, n: repeats.append(n) or original(self, n),
    )
    if decode == "decode_step":
        start = hf_sampling.DecodeStep.start
        monkeypatch.setattr(
            hf_sampling.DecodeStep,
            "start",
            lambda self, *a: start(self, *a) or buffers.append([k.shape for k in self.keys]),
        )
    with torch.inference_mode():
        tokens, _ = sample(
            model,
            ids,
            mask,
            SamplingParams(n=4, max_new_tokens=3),
            tokenizer.pad_token_id,
            [0],
            decode_step=decode == "decode_step",
        )
    assert rows_seen[0] == ids.shape  # the prefill: 2 prompts, not 8 rows
    assert tokens.shape[0] == 8
    if decode == "model_forward":
        assert all(shape == (8, 1) for shape in rows_seen[1:])  # each decode step: 8 rows
        assert repeats == [4] and len(rows_seen) == 3
    else:  # one model(...) call, the prefill; room for the prompt and 3 new tokens
        layers = model.config.num_hidden_layers
        assert len(rows_seen) == 1 and not repeats
        assert buffers == [[(8, model.config.num_key_value_heads, ids.shape[1] + 3, 64)] * layers]
