"""The Hugging Face rollout engine with the built-in tiny Qwen2 (real generate, real KV cache)."""

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.engines import SamplingParams
from rl.core.models import load_causal_lm, load_tokenizer
from rl.rollout.hf import HFRolloutEngine, left_pad


@pytest.fixture(scope="module")
def setup():
    config = load_config(overrides=["rollout.load_format=auto"])  # the weights read
    tokenizer = load_tokenizer(config.model)
    return config, tokenizer, HFRolloutEngine.from_config(config, tokenizer)


def forward_logprobs(model, prompt, response, temperature):
    """Independent check: one full forward pass over prompt + response, float64 softmax."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].double()
    logp = torch.log_softmax(logits / temperature, -1)
    return logp.gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


def test_groups_of_n_and_logprobs_match_a_full_forward(setup):
    _, tokenizer, engine = setup
    prompts = [tokenizer("12+7=").input_ids, tokenizer("3-1=").input_ids, tokenizer("5=").input_ids]
    torch.manual_seed(0)
    rollouts = engine.generate(prompts, SamplingParams(n=3, temperature=0.7, max_new_tokens=6))
    assert len(rollouts.response_ids) == 9
    assert [rollouts.prompt_ids[i] for i in (0, 3, 6)] == prompts
    for prompt, response, logprobs in zip(
        rollouts.prompt_ids, rollouts.response_ids, rollouts.logprobs, strict=True
    ):
        assert 1 <= len(response) <= 6 and len(logprobs) == len(response)
        expected = forward_logprobs(engine.model, prompt, response, 0.7)
        assert torch.allclose(torch.tensor(logprobs, dtype=torch.float64), expected, atol=1e-4)
        assert all(lp <= 0 for lp in logprobs)


def test_greedy_is_deterministic_and_picks_the_argmax(setup):
    _, tokenizer, engine = setup
    prompt = tokenizer("7+8=").input_ids
    first = engine.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=5))
    second = engine.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=5))
    assert first.response_ids == second.response_ids
    ids = torch.tensor([prompt + first.response_ids[0]])
    with torch.no_grad():
        logits = engine.model(input_ids=ids).logits[0]
    argmax = logits[len(prompt) - 1 : -1].argmax(-1).tolist()
    assert argmax == first.response_ids[0]


def test_stops_at_eos_and_respects_min_new_tokens(setup):
    _, tokenizer, engine = setup
    model, original_head = engine.model, engine.model.lm_head
    head = torch.nn.Linear(original_head.in_features, original_head.out_features, bias=True)
    with torch.no_grad():  # same weights, plus a bias that makes EOS the argmax everywhere
        head.weight.copy_(original_head.weight)
        head.bias.zero_()
        head.bias[tokenizer.eos_token_id] = 1e3
    model.lm_head = head
    try:
        prompt = tokenizer("1+1=").input_ids
        short = engine.generate([prompt], SamplingParams(temperature=0.0, max_new_tokens=6))
        assert short.response_ids[0] == [tokenizer.eos_token_id] and short.finish_reasons == [
            "stop"
        ]
        longer = engine.generate(
            [prompt], SamplingParams(temperature=0.0, max_new_tokens=6, min_new_tokens=3)
        )
        assert len(longer.response_ids[0]) == 4
        assert longer.response_ids[0][-1] == tokenizer.eos_token_id
        assert tokenizer.eos_token_id not in longer.response_ids[0][:3]
    finally:
        model.lm_head = original_head


def test_update_weights_changes_generation_and_rejects_unknown_names(setup):
    config, tokenizer, engine = setup
    other = load_causal_lm(config.model, tokenizer, seed=123)
    prompt = tokenizer("9-4=").input_ids
    engine.update_weights(iter(other.state_dict().items()))
    after = engine.generate(
        [prompt], SamplingParams(temperature=0.0, max_new_tokens=5)
    ).response_ids
    ids = torch.tensor([prompt])
    expected = other.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=5,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    assert after[0] == expected[0, len(prompt) :].tolist()[: len(after[0])]
    with pytest.raises(KeyError, match="no weight named 'nope'"):
        engine.update_weights(iter([("nope", torch.zeros(1))]))


def test_left_pad():
    ids, mask = left_pad([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_ignore_eos_seeds_and_repetition_penalty(setup):
    _, tokenizer, engine = setup
    prompts = [tokenizer("4+4=").input_ids, tokenizer("2*3=").input_ids]
    free = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=6, ignore_eos=True))
    assert all(len(r) == 6 and tokenizer.eos_token_id not in r for r in free.response_ids)
    seeded = SamplingParams(n=3, temperature=1.0, max_new_tokens=5, seed=7)
    first = engine.generate(prompts, seeded)
    torch.manual_seed(123)  # the global RNG does not matter, the request's seed does
    assert engine.generate(prompts, seeded).response_ids == first.response_ids
    assert engine.generate(prompts, SamplingParams(n=3, max_new_tokens=5, seed=8)).response_ids != (
        first.response_ids
    )
    # a strong penalty never repeats a token in a greedy response (log-probs stay those of
    # logits / T, what the trainer recomputes, without the penalty)
    penalised = engine.generate(
        prompts,
        SamplingParams(temperature=0.0, max_new_tokens=6, ignore_eos=True, repetition_penalty=1e6),
    )
    for prompt, response in zip(prompts, penalised.response_ids, strict=True):
        assert not set(response) & set(prompt) and len(set(response)) == len(response)


def sampled_ranks(engine, tokenizer, top_k):
    """Rank of each sampled token in its step's distribution (0 = the most likely)."""
    prompt = tokenizer("4*4=").input_ids
    torch.manual_seed(0)
    sampling = SamplingParams(n=64, temperature=20.0, top_k=top_k, max_new_tokens=8)
    rollouts = engine.generate([prompt], sampling)
    ranks = []
    for response in rollouts.response_ids:
        ids = torch.tensor([prompt + response])
        with torch.no_grad():
            logits = engine.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        order = logits.argsort(-1, descending=True)
        ranks += [(order[t] == token).nonzero().item() for t, token in enumerate(response)]
    return ranks


def test_no_top_k_samples_the_whole_vocabulary_not_generates_default_50(setup):
    """`top_k: -1` is no truncation (as in vLLM): transformers' own default of 50 must
    not slip in, or the rollout samples from another distribution than the one whose
    log-probs it reports and the trainer recomputes."""
    _, tokenizer, engine = setup
    assert len(tokenizer) > 50
    # temperature 20 makes the distribution nearly flat: the tail gets sampled
    assert max(sampled_ranks(engine, tokenizer, -1)) >= 50
    assert max(sampled_ranks(engine, tokenizer, 5)) < 5


def test_chunks_keep_each_prompts_group_whole(setup):
    _, tokenizer, engine = setup
    small = HFRolloutEngine(engine.model, tokenizer, max_batch_size=5)  # 2 prompts of n=2
    prompts = [tokenizer(text).input_ids for text in ("1+1=", "22+2=", "3=", "4-4=", "5+55=")]
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=3)
    chunked, whole = small.generate(prompts, sampling), engine.generate(prompts, sampling)
    assert chunked.prompt_ids == [p for p in prompts for _ in range(2)]
    assert chunked.response_ids == whole.response_ids  # greedy: chunking changes nothing


def test_load_format_dummy_reads_no_weights_and_the_first_sync_fills_them(tmp_path):
    """rollout.load_format=dummy (the default): the engine is built without reading the
    folder's weights (a folder without its weights file builds; with `auto` it does not),
    and once the trainer's weights are synced it samples what the loaded engine samples."""
    config = load_config(overrides=["rollout.load_format=auto"])
    tokenizer = load_tokenizer(config.model)
    weights = load_causal_lm(config.model, tokenizer, seed=7)
    weights.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").rename(tmp_path.parent / "kept.safetensors")
    folder = [f"model.path={tmp_path}"]
    with pytest.raises(ConfigError, match="no file named model.safetensors"):
        HFRolloutEngine.from_config(
            load_config(overrides=[*folder, "rollout.load_format=auto"]), tokenizer
        )
    engine = HFRolloutEngine.from_config(load_config(overrides=folder), tokenizer)
    with pytest.raises(RuntimeError, match="rollout.load_format=auto"):
        engine.generate([tokenizer("1+1=").input_ids], SamplingParams(max_new_tokens=2))

    def tied(model):
        return model.get_output_embeddings().weight is model.get_input_embeddings().weight

    assert tied(engine.model) == tied(weights)  # a tie (or none) survives
    engine.update_weights(iter(weights.state_dict().items()))
    prompts = [tokenizer("12+7=").input_ids, tokenizer("3-1=").input_ids]
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=5)
    got = engine.generate(prompts, sampling)
    want = HFRolloutEngine(weights, tokenizer).generate(prompts, sampling)
    assert got.response_ids == want.response_ids
    assert got.logprobs == want.logprobs
