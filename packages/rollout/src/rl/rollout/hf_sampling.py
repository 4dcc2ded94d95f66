"""Sampling with a KV cache for `HFRolloutEngine`, each prompt prefilled once for its n
responses.

The same tokens as Hugging Face `generate` (`test_hf_sampling.py` checks it, seed for
seed): the same logits processors in the same order (repetition penalty, min new tokens,
then temperature, top-k, top-p), `softmax` + `multinomial` (or `argmax` when greedy),
finished rows padded, the loop ending once every row has stopped. What it leaves out is
`generate`'s generality — its per-call set-up and per-step bookkeeping for every decoding
strategy — and its prefill of every prompt n times: here a prompt is run once, and its
cache and last logits are repeated for its n rows. With SDPA attention a decode step also
skips the model's mask building: it gets the mask SDPA reads, [rows, 1, 1, keys], grown
by one column a step.

With per-prompt seeds (`SamplingParams.prompt_seeds`, which the trainer always sets) each
row draws from its own generator instead (`RowDraws`, inverse-CDF over the same
probabilities), so a row's samples do not depend on the rows beside it; the tokens then
differ from `generate`'s, the distribution does not.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rl.core.engines import SamplingParams
from rl.core.models.token_logprobs import logprobs_and_entropy
from rl.rollout.decode_step import DecodeStep


def logits_processors(
    sampling: SamplingParams, prompt_width: int, stop_ids: list[int], device: torch.device
) -> list[Any]:
    """`generate`'s processors for these sampling settings, in `generate`'s order, each
    called as `processor(sequences, scores)`."""
    from transformers.generation import logits_process as lp

    greedy = sampling.temperature == 0
    processors: list[Any] = []
    if sampling.repetition_penalty != 1:
        processors.append(lp.RepetitionPenaltyLogitsProcessor(sampling.repetition_penalty))
    # EOS cannot be sampled and sampling go on: ignore_eos forbids the stop tokens instead
    min_new = sampling.max_new_tokens if sampling.ignore_eos else sampling.min_new_tokens
    if min_new > 0:
        processors.append(
            lp.MinNewTokensLengthLogitsProcessor(
                prompt_width, min_new, stop_ids, device=str(device)
            )
        )
    if greedy:
        return processors
    if sampling.temperature != 1:
        processors.append(lp.TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k > 0:
        processors.append(lp.TopKLogitsWarper(top_k=sampling.top_k))
    if sampling.top_p < 1:
        processors.append(lp.TopPLogitsWarper(top_p=sampling.top_p))
    return processors


def _keeps_logits(model: torch.nn.Module) -> bool:
    """Whether the model's forward takes `logits_to_keep` (transformers' own models do)."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def _reads_sdpa_mask(model: torch.nn.Module) -> bool:
    """Whether the model attends with SDPA, which takes a ready [rows, 1, q, keys] boolean
    mask as it is (transformers passes a 4-D mask through; flash-attention wants 2-D)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == "sdpa"


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of left-padded rows (padding at 1, as `generate` has it)."""
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)


@dataclass(frozen=True)
class VisionPrefill:
    """The images of a chunk of prompts as the prefill shows them: their patches and
    grids back to back (prompt order) and the prompts' multimodal rotary positions,
    int64 [3, U, L] (`rl.core.vision.rope`)."""

    pixel_values: torch.Tensor
    image_grid_thw: torch.Tensor
    positions: torch.Tensor

    def model_inputs(self) -> dict[str, torch.Tensor]:
        return {"pixel_values": self.pixel_values, "image_grid_thw": self.image_grid_thw}

    def last_positions(self) -> torch.Tensor:
        """[U, 1]: each prompt's highest position (the next token's is one more)."""
        return self.positions.amax(dim=(0, 2))[:, None]


@dataclass(frozen=True)
class TrainerLogprobs:
    """The trainer's own log-prob function for the sampled tokens (`rollout.batch_invariant`):
    the fused kernel's (`fused`, its epilogue on the logits the step computed anyway) or the
    plain path's. With a batch-invariant model both give the trainer's numbers bit for bit."""

    fused: bool

    def __call__(self, logits: torch.Tensor, token: torch.Tensor, scale: float) -> torch.Tensor:
        if self.fused:
            from rl.kernels import logprob_of_logits

            return logprob_of_logits(logits, token, scale)
        return logprobs_and_entropy(logits, token, scale, False)[0]


def sample(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    sampling: SamplingParams,
    pad_id: int,
    stop_ids: Sequence[int],
    vision: VisionPrefill | None = None,
    trainer_logprobs: TrainerLogprobs | None = None,
    decode_step: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`sampling.n` responses to each left-padded prompt row ([U, L] ids and mask): sampled
    tokens [U * n, R] (rows i*n .. i*n+n-1 answer prompt i; `pad_id` after a row stops, R
    <= max_new_tokens) and each token's float32 log-prob under softmax(raw logits / T)
    [U * n, R] (the sampling distribution before top-k/top-p, which the trainer recomputes;
    T = 1 when greedy). Each step's [rows, V] logits are dropped once its token is drawn:
    keeping them all would hold [U * n, R, V] (622 MB at 32 x 32 tokens and a 152K vocab).
    With `sampling.prompt_seeds` each row draws from its own generator (`RowDraws`), else
    all rows from torch's global one, as `generate` does. `vision`: the prompts' images,
    shown in the prefill at their multimodal positions; each new token then takes the
    next position after its prompt's last (the same in all three rotary sections).
    `trainer_logprobs`: the log-probs come from the trainer's function instead.
    `decode_step`: the decode steps run in `DecodeStep` where it serves the model (False:
    always through `model(...)`, as `generate` does)."""
    from transformers import DynamicCache

    n, device = sampling.n, prompt_ids.device
    if sampling.max_new_tokens < 1:
        raise ValueError(f"max_new_tokens = {sampling.max_new_tokens}: at least 1 token to sample")
    stops = torch.tensor(list(stop_ids), device=device)
    cache = DynamicCache(config=getattr(model, "config", None))
    # the last position's logits only, where the model can (as generate does)
    last_only = {"logits_to_keep": 1} if _keeps_logits(model) else {}
    prefill_positions = positions(prompt_mask) if vision is None else vision.positions
    output = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=prefill_positions,
        past_key_values=cache,
        use_cache=True,
        **last_only,
        **({} if vision is None else vision.model_inputs()),
    )
    logits = output.logits[:, -1].float().repeat_interleave(n, 0)
    # the decode steps without `model(...)`'s per-call machinery, where the model allows
    fast = DecodeStep.of(model) if decode_step and vision is None else None
    decode = fast if fast is not None else CachedForward(model)
    decode.start(cache, n, sampling.max_new_tokens)
    del cache
    mask = prompt_mask.repeat_interleave(n, 0)
    if _reads_sdpa_mask(model):  # the keys each new token attends to: all real ones
        mask = mask.bool()[:, None, None, :]
    sequences = prompt_ids.repeat_interleave(n, 0)  # prompt + sampled so far (processors)
    processors = logits_processors(sampling, prompt_ids.shape[1], list(stop_ids), device)
    last_position = (
        positions(prompt_mask)[:, -1:] if vision is None else vision.last_positions()
    ).repeat_interleave(n, 0)
    running = torch.ones(sequences.shape[0], dtype=torch.bool, device=device)
    seeds = sampling.sample_seeds(prompt_ids.shape[0])
    draws = RowDraws(seeds, sampling.max_new_tokens) if seeds is not None else None
    scale = sampling.temperature if sampling.temperature != 0 else 1.0
    tokens, logprobs = [], []
    for step in range(sampling.max_new_tokens):
        scores = logits
        for processor in processors:
            scores = processor(sequences, scores)
        if sampling.temperature == 0:
            token = scores.argmax(-1)
        elif draws is not None:
            token = draws.sample(torch.softmax(scores, -1), step)
        else:
            token = torch.multinomial(torch.softmax(scores, -1), 1).squeeze(1)
        token = token.masked_fill(~running, pad_id)
        tokens.append(token)
        if trainer_logprobs is None:
            logprobs.append(chosen_logprob(logits, token, scale))
        else:
            logprobs.append(trainer_logprobs(logits, token, scale))
        running &= ~torch.isin(token, stops)
        if step + 1 == sampling.max_new_tokens or not running.any():
            break
        sequences = torch.cat([sequences, token[:, None]], 1)
        mask = torch.cat([mask, mask.new_ones(*mask.shape[:-1], 1)], -1)
        last_position = last_position + 1
        logits = decode(token[:, None], last_position, mask).float()
    return torch.stack(tokens, 1), torch.stack(logprobs, 1)


class CachedForward:
    """Decode steps through `model(...)` and its `DynamicCache` (any model)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.cache = model, None

    def start(self, cache: Any, repeat: int, new_tokens: int) -> None:
        """Decode on from the prefill's `cache`, each prompt's rows `repeat` times (the
        cache grows as it goes)."""
        if repeat > 1:
            cache.batch_repeat_interleave(repeat)
        self.cache = cache

    def __call__(
        self, token: torch.Tensor, position: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """The next logits [rows, V] after `token` [rows, 1] at `position` [rows, 1]."""
        output = self.model(
            input_ids=token,
            attention_mask=mask,
            position_ids=position,
            past_key_values=self.cache,
            use_cache=True,
        )
        return output.logits[:, -1]


def chosen_logprob(logits: torch.Tensor, token: torch.Tensor, scale: float) -> torch.Tensor:
    """log softmax(logits / scale) at `token`, per row: [rows, V], [rows] -> [rows]."""
    scaled = logits / scale if scale != 1.0 else logits
    # log_softmax is one kernel; logsumexp is several (5x its time at [32, 51] on CPU)
    return torch.log_softmax(scaled, -1).gather(-1, token[:, None]).squeeze(1)


class RowDraws:
    """One random stream per sample row, seeded by the row's seed alone: row r's token at
    step t depends on its own distribution and its t-th uniform draw, never on the rows
    beside it (placement-independent sampling). Inverse-CDF sampling: the first token whose
    cumulative probability exceeds u × the total (a token of probability 0 never is)."""

    def __init__(self, seeds: Sequence[int], steps: int) -> None:
        # each row's first `steps` uniforms in one call per row: the same numbers as one
        # call a step (torch's CPU generator fills in order), without 32 calls a step
        self.uniforms = torch.stack(
            [
                torch.rand(
                    steps, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
                )
                for seed in seeds
            ]
        )

    def sample(self, probs: torch.Tensor, step: int) -> torch.Tensor:
        """One token per row of `probs` [rows, V] at decode step `step`: each row's
        `step`-th uniform."""
        return inverse_cdf(probs, self.uniforms[:, step].to(probs.device))


CDF_BLOCK = 1024


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor, block: int = CDF_BLOCK) -> torch.Tensor:
    """Per row of `probs` [rows, V] (float32, not normalised), the first token whose
    cumulative probability exceeds `uniform` [rows] × the row's total.

    In two levels, so that no [rows, V] float64 copy or cumulative sum is made (at a 152K
    vocabulary that was 2 × 39 MB and ~25 ms a decode step): the blocks' totals and their
    running sum find the block that holds the crossing, and a running sum inside that
    block alone finds the token. Where the two summation orders round apart and the
    block holds no crossing, its last token of non-zero probability is taken.
    """
    rows, vocab = probs.shape
    if vocab <= block:  # one block: the same numbers as below, without the first level
        threshold = uniform.to(torch.float64) * probs.sum(-1).double()
        values = probs.double()
        offset = torch.searchsorted(values.cumsum(-1), threshold[:, None], right=True)
        tokens = torch.arange(vocab, device=probs.device)
        last_positive = torch.where(values > 0, tokens, -1).amax(-1, keepdim=True)
        return torch.minimum(offset, last_positive).squeeze(1)
    whole = vocab // block * block
    # float32 within a block (converting [rows, V] to float64 alone took ~18 ms), float64
    # across blocks and tokens
    totals = probs[:, :whole].reshape(rows, -1, block).sum(-1)
    if whole < vocab:
        totals = torch.cat([totals, probs[:, whole:].sum(-1, keepdim=True)], 1)
    ends = totals.double().cumsum(-1)  # [rows, blocks]: the running sum at each block's end
    threshold = uniform.to(torch.float64) * ends[:, -1]
    which = torch.searchsorted(ends, threshold[:, None], right=True)
    which = which.clamp_(max=ends.shape[1] - 1)  # u × total == total: the last block
    before = torch.where(which > 0, ends.gather(1, (which - 1).clamp(min=0)), 0.0)
    offsets = torch.arange(block, device=probs.device)
    columns = which * block + offsets  # [rows, block]
    inside = columns < vocab
    values = probs.gather(1, columns.clamp(max=vocab - 1)).double() * inside
    cumulative = before + values.cumsum(-1)
    offset = torch.searchsorted(cumulative, threshold[:, None], right=True)
    last_positive = torch.where(values > 0, offsets, -1).amax(-1, keepdim=True)
    token = which * block + torch.minimum(offset, last_positive)
    return token.squeeze(1)
