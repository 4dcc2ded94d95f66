"""The HF engine under `rollout.batch_invariant`: a sampled token's log-prob is the one a
trainer's full-sequence forward of the same model gives it, bit for bit, whatever the
decode batch (fewer than 16 rows included) and with the narrow decode linears of a
real-width layer."""

import pytest
import torch
import transformers

from rl.core.engines import SamplingParams
from rl.core.models.token_logprobs import logprobs_and_entropy
from rl.kernels import fused_logprob_entropy
from rl.rollout.hf import HFRolloutEngine
from rl.rollout.hf_sampling import TrainerLogprobs
from rl.rollout.narrow_linear import NARROW_MIN_WEIGHTS


class Tokens:
    pad_token_id, eos_token_id = 0, 1


def model():
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=5000,  # the LM head has 4.5M weights: a narrow linear in decode steps
        hidden_size=896,
        intermediate_size=256,
        num_hidden_layers=1,
        num_attention_heads=14,
        num_key_value_heads=2,
        head_dim=64,
    )
    built = transformers.Qwen2ForCausalLM(config).eval()
    assert built.lm_head.weight.numel() >= NARROW_MIN_WEIGHTS
    return built


def trainer_logprobs(engine, prompts, rollouts, fused, temperature):
    """What a trainer's packed full-sequence forward of the engine's model gives the
    sampled tokens (its attention within each sequence, its log-prob function)."""
    rows = [p + r for p, r in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)]
    ids = torch.tensor([t for row in rows for t in row])[None]
    positions = torch.cat([torch.arange(len(row)) for row in rows])[None]
    bounds = torch.tensor([0, *torch.tensor([len(row) for row in rows]).cumsum(0).tolist()])
    with torch.no_grad():
        hidden = engine.model(
            input_ids=ids,
            position_ids=positions,
            cu_seq_lens_q=bounds,
            cu_seq_lens_k=bounds,
            max_length_q=max(map(len, rows)),
            max_length_k=max(map(len, rows)),
            output_hidden_states=True,
        ).hidden_states[-1][0]
        picked = torch.cat(
            [
                torch.arange(start + len(p) - 1, start + len(p) - 1 + len(r))
                for start, p, r in zip(
                    bounds[:-1].tolist(), rollouts.prompt_ids, rollouts.response_ids, strict=True
                )
            ]
        )
        tokens = torch.tensor([t for r in rollouts.response_ids for t in r])
        weight = engine.model.lm_head.weight
        if fused:
            return fused_logprob_entropy(hidden[picked], weight, tokens, temperature)[0]
        logits = engine.model.lm_head(hidden[picked])
        return logprobs_and_entropy(logits, tokens, temperature, False)[0]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "plain"])
@pytest.mark.parametrize(
    ("prompts", "n"), [(1, 1), (2, 2), (5, 2)], ids=["1-row", "4-rows", "10-rows"]
)
def test_the_rollouts_logprobs_are_a_full_forwards(fused, prompts, n):
    engine = HFRolloutEngine(model(), Tokens(), trainer_logprobs=TrainerLogprobs(fused))
    generator = torch.Generator().manual_seed(prompts)
    prompt_ids = [
        torch.randint(2, 5000, (int(n),), generator=generator).tolist()
        for n in torch.randint(3, 12, (prompts,), generator=generator)
    ]
    sampling = SamplingParams(n=n, max_new_tokens=6, temperature=0.8, ignore_eos=True, seed=3)
    rollouts = engine.generate(prompt_ids, sampling)
    got = torch.tensor([t for row in rollouts.logprobs for t in row])
    want = trainer_logprobs(engine, prompt_ids, rollouts, fused, 0.8)
    assert torch.equal(got, want)
