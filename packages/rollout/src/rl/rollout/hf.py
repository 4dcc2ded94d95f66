"""`HFRolloutEngine`: generation from a Hugging Face causal LM with a KV cache
(`hf_sampling`: `generate`'s tokens, each prompt prefilled once for its n responses).

Implements `rl.core.engines.RolloutEngine`. Log-probs are those of the
sampling distribution before top-p/top-k filtering, softmax(logits / T), the
same quantity the trainer recomputes, so the two can be compared token by token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import torch

from rl.core.config import Config
from rl.core.config.schema import fused_log_probs
from rl.core.engines import (
    Classify,
    RecordsRoutes,
    RolloutEngine,
    Rollouts,
    SamplingParams,
    ScoresTokens,
    SeesImages,
    ServesClassifier,
    SharesWeights,
)
from rl.core.models import load_causal_lm
from rl.core.models.batch_invariant import make_batch_invariant
from rl.core.models.loading import allocate_unread
from rl.core.models.routing_replay import recording, require_routers
from rl.core.vision.inputs import ImageInputs
from rl.core.vision.rope import mrope_positions
from rl.core.weight_sync.groups import each_tensor
from rl.core.weight_sync.ties import TieCheck, Ties
from rl.core.workers.request_batcher import RequestBatcher
from rl.rollout.hf_routes import row_routes
from rl.rollout.hf_sampling import TrainerLogprobs, VisionPrefill, sample
from rl.rollout.narrow_linear import use_narrow_linears


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [B, L] and attention mask [B, L] of left-padded rows."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids, mask


class HFRolloutEngine(
    RolloutEngine, SharesWeights, RecordsRoutes, ScoresTokens, ServesClassifier, SeesImages
):
    """Batched sampling from a transformers causal LM (any device, no server)."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        device: str = "cpu",
        max_batch_size: int = 256,
        free_cache_engine: bool = False,
        weights_pending: bool = False,
        trainer_logprobs: TrainerLogprobs | None = None,
    ) -> None:
        self.model = model.to(device).eval()
        if self.model.device.type == "cpu":  # decode steps' few rows: weight @ x^T on CPU
            use_narrow_linears(self.model)
        # rollout.batch_invariant: a batch-invariant model (made so after the narrow linears,
        # which then get at least MIN_ROWS rows too), the sampled tokens' log-probs by the
        # trainer's function
        self.trainer_logprobs = trainer_logprobs
        if trainer_logprobs is not None:
            make_batch_invariant(self.model)
        self.free_cache_engine, self._asleep = free_cache_engine, False
        self.shared = False  # whether the weights are the trainer's own (`share_weights`)
        # rollout.load_format=dummy: no weights until the first update_weights / share_weights
        self.weights_pending = weights_pending
        self._parameters: dict[str, torch.nn.Parameter] | None = None
        self._ties = TieCheck(Ties.of(self.model))  # tie_word_embeddings: one tensor
        self.tokenizer, self.device = tokenizer, torch.device(device)
        self.max_batch_size = max_batch_size
        self.records_routes = False  # MoE routes in `Rollouts.routed_experts` (`record_routes`)
        self.pad_id = tokenizer.pad_token_id
        self.eos_id = tokenizer.eos_token_id
        self._batcher = RequestBatcher(
            lambda prompts, sampling: asyncio.to_thread(self.generate, prompts, sampling),
            max_batch_size,
        )

    @classmethod
    def classifier_from_config(cls, config: Config) -> Classify:
        """transformers' classifier of the folder (rl-core's `HFClassifier`)."""
        from rl.core.rewards.model_scorer import HFClassifier

        dtype = config.model.dtype if config.rollout.dtype == "auto" else config.rollout.dtype
        model = config.reward.reward_model
        return HFClassifier.from_folder(
            str(config.model.path),
            getattr(torch, dtype),
            model.batch_size,
            model.max_length,
            config.trainer.device,
        )

    @classmethod
    def from_config(cls, config: Config, tokenizer: Any) -> HFRolloutEngine:
        # load_format=dummy (verl's default): the trainer's first weight sync, made before
        # anything is generated, fills the weights; no copy is read from disk for them
        dummy = config.rollout.load_format == "dummy"
        model = load_causal_lm(config.model, tokenizer, seed=config.trainer.seed, empty=dummy)
        if config.rollout.dtype != "auto":
            model = model.to(getattr(torch, config.rollout.dtype))
        if dummy:
            model = allocate_unread(model, config.trainer.device)
        return cls(
            model,
            tokenizer,
            device=config.trainer.device,
            free_cache_engine=config.rollout.free_cache_engine,
            weights_pending=dummy,
            trainer_logprobs=_on_policy(model, config) if config.rollout.batch_invariant else None,
        )

    def _check_weights(self) -> None:
        if self.weights_pending:
            raise RuntimeError(
                "the HF rollout engine has no weights yet: with rollout.load_format=dummy they "
                "come from the trainer's first sync (update_weights / share_weights); set "
                "rollout.load_format=auto to read them from model.path"
            )

    def record_routes(self, on: bool) -> None:
        """Record the experts each token is routed to (routing replay R3); an MoE model only."""
        if on:
            require_routers(self.model, "actor.router_replay.mode=R3")
        self.records_routes = on

    @torch.inference_mode()  # no autograd bookkeeping at all: cheaper per op than no_grad
    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams) -> Rollouts:
        """`sampling.n` responses per prompt, grouped: rows i*n .. i*n+n-1 belong to prompt i."""
        return self.generate_with_images(prompt_ids, [None] * len(prompt_ids), sampling)

    @torch.inference_mode()
    def generate_with_images(
        self,
        prompt_ids: Sequence[Sequence[int]],
        images: Sequence[ImageInputs | None],
        sampling: SamplingParams,
    ) -> Rollouts:
        """`generate`, prompt i showing `images[i]` to a vision-language model."""
        self._check_weights()
        if len(images) != len(prompt_ids):
            raise ValueError(f"{len(images)} image entries for {len(prompt_ids)} prompts")
        if sampling.seed is None:
            return self._generate(prompt_ids, sampling, images)
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(sampling.seed)
            return self._generate(prompt_ids, sampling, images)

    def _generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        sampling: SamplingParams,
        images: Sequence[ImageInputs | None],
    ) -> Rollouts:
        rollouts = Rollouts([], [], [], [])
        # whole groups per chunk: a prompt is prefilled once for its n responses
        per_chunk = max(1, self.max_batch_size // sampling.n)
        sampling.sample_seeds(len(prompt_ids))  # the seeds fit the prompts (ValueError)
        for start in range(0, len(prompt_ids), per_chunk):
            indices = range(start, min(start + per_chunk, len(prompt_ids)))
            chunk = self._generate_chunk(
                [list(prompt_ids[i]) for i in indices],
                sampling.for_prompts(indices),
                [images[i] for i in indices],
            )
            for field in (
                "prompt_ids",
                "response_ids",
                "logprobs",
                "finish_reasons",
                "routed_experts",
            ):
                getattr(rollouts, field).extend(getattr(chunk, field))
        if any(image is not None for image in images):  # each row its prompt's (or None)
            rollouts.images = [image for image in images for _ in range(sampling.n)]
        return rollouts

    def _generate_chunk(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        images: list[ImageInputs | None],
    ) -> Rollouts:
        input_ids, attention_mask = left_pad(prompts, self.pad_id)
        stop_ids = [self.eos_id, *sampling.stop_token_ids]
        vision = self._vision(input_ids, attention_mask, images)
        with recording(self.model) if self.records_routes else nullcontext() as recorder:
            tokens, logprobs = sample(
                self.model,
                input_ids.to(self.device),
                attention_mask.to(self.device),
                sampling,
                self.pad_id,
                stop_ids,
                vision,
                self.trainer_logprobs,
            )
        tokens, logprobs = tokens.cpu(), logprobs.cpu()
        expanded = [p for p in prompts for _ in range(sampling.n)]
        rollouts = self._trim(expanded, tokens, logprobs, set(stop_ids))
        if recorder is not None:
            lengths = [len(row) for row in rollouts.response_ids]
            rollouts.routed_experts = row_routes(recorder.calls, prompts, sampling.n, lengths)
        return rollouts

    def _vision(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, images: list[Any]
    ) -> VisionPrefill | None:
        """The chunk's images for the prefill (None when no prompt has any)."""
        present = [image for image in images if image is not None]
        if not present:
            return None
        config = self.model.config
        if getattr(config, "vision_config", None) is None:
            raise ValueError("prompts with images, but the rollout model reads text only")
        empty = torch.zeros(0, 3, dtype=torch.long)
        grids = [empty if image is None else image.image_grid_thw for image in images]
        positions = mrope_positions(
            input_ids,
            attention_mask,
            grids,
            config.image_token_id,
            config.vision_config.spatial_merge_size,
        )
        joined = ImageInputs.concat(present)
        dtype = next(self.model.parameters()).dtype
        return VisionPrefill(
            joined.pixel_values.to(self.device, dtype),
            joined.image_grid_thw.to(self.device),
            positions.to(self.device),
        )

    @staticmethod
    def _trim(
        prompts: list[list[int]], tokens: torch.Tensor, logprobs: torch.Tensor, stop_ids: set[int]
    ) -> Rollouts:
        """Cut each response after its first stop token (kept); the rest is padding."""
        result = Rollouts([], [], [], [])
        for prompt, row, row_logprobs in zip(
            prompts, tokens.tolist(), logprobs.tolist(), strict=True
        ):
            end = next((i + 1 for i, t in enumerate(row) if t in stop_ids), len(row))
            result.prompt_ids.append(prompt)
            result.response_ids.append(row[:end])
            result.logprobs.append(row_logprobs[:end])
            result.finish_reasons.append(
                "stop" if row[:end] and row[end - 1] in stop_ids else "length"
            )
        return result

    async def generate_one(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Rollouts:
        """One request (for agent loops): the requests waiting at the same time run as one
        batch of the batched path, in a worker thread (`RequestBatcher`)."""
        return await self._batcher.submit(prompt_ids, sampling)

    @torch.no_grad()
    @torch.inference_mode()
    def score(self, token_ids: Sequence[int]) -> list[float]:
        """log p(token_ids[i] | token_ids[:i]) for i >= 1, at temperature 1 (the weight-sync
        probe's question: what these weights give now)."""
        self._check_weights()
        ids = torch.tensor([list(token_ids)], device=self.device)
        logits = self.model(input_ids=ids, use_cache=False).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
        return [float(v) for v in logprobs.cpu()]

    @torch.no_grad()  # grad mode is per thread: a sender's thread may have it on
    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Copy trainer weights in, by Hugging Face name, casting to this model's dtype.

        A tied model (`tie_word_embeddings`) holds `lm_head.weight` as its embedding: it
        comes once, as `model.embed_tokens.weight`; sent too, it must equal it (`TieCheck`,
        which also refuses a tied trainer's weights for an untied model)."""
        params: dict[str, torch.Tensor] = {**self._named_parameters()}
        params.update(dict(self.model.named_buffers()))
        for name, tensor in self._ties.stream(named_tensors, params.__getitem__):
            if name not in params:
                raise KeyError(f"rollout model has no weight named {name!r}")
            params[name].copy_(tensor)
        self.weights_pending = False

    @torch.no_grad()
    def share_weights(self, named_tensors: Sequence[tuple[str, torch.Tensor]]) -> bool:
        """Take the trainer's tensors as this model's own weights, without a copy: after
        that the trainer's updates are the rollout's weights, and a sync costs nothing.

        Only where every parameter has a tensor of the same shape, dtype and device among
        `named_tensors` (a trainer in the same process, on the same device, in the
        rollout's dtype); otherwise nothing changes and the answer is False (then copy
        with `update_weights`). Tensors already shared are left as they are. A tied
        parameter (`lm_head.weight` of a tied model) is one parameter, shared once, so the
        tie holds; an offered tied name must then be the same memory, else the trainer's
        model is untied and False is the answer (`update_weights` says why). The caller
        must not generate while the trainer updates (the weights would change mid-way).
        """
        offered = dict(named_tensors)
        params = self._named_parameters()
        for name, param in params.items():
            tensor = offered.get(name)
            if tensor is None or (tensor.shape, tensor.dtype, tensor.device) != (
                param.shape,
                param.dtype,
                param.device,
            ):
                return False
        for alias, name in self._ties.ties.aliases.items():
            tensor = offered.get(alias)
            if tensor is not None and not _same_memory(tensor, offered[name]):
                return False
        for name, param in params.items():
            if param.data_ptr() != offered[name].data_ptr():
                param.data = offered[name]
        self.shared = True
        self.weights_pending = False
        return True

    def _named_parameters(self) -> dict[str, torch.nn.Parameter]:
        """The model's parameters by name (its modules do not change: walked once)."""
        if self._parameters is None:
            self._parameters = dict(self.model.named_parameters())
        return self._parameters

    def weight_group(self, name: str) -> str:
        """Each tensor is copied on its own: every weight is its own group."""
        return each_tensor(name)

    def sleep(self) -> None:
        """Free device memory between rollouts (`rollout.free_cache_engine`): the weights
        move to CPU. Nothing to free on a CPU device, or when the weights are the trainer's."""
        if self.free_cache_engine and self.device.type != "cpu" and not self.shared:
            self.model.to("cpu")
            self._asleep = True

    def wake(self) -> None:
        if self._asleep:
            self.model.to(self.device)
            self._asleep = False


def _on_policy(model: torch.nn.Module, config: Config) -> TrainerLogprobs:
    """The log-prob function of the trainer's passes (the fused kernel or the plain path,
    as the actor chooses)."""
    vocab = int(model.get_output_embeddings().weight.shape[0])
    device = torch.device(config.trainer.device).type
    return TrainerLogprobs(fused_log_probs(config.actor.use_fused_kernels, device, vocab))


def _same_memory(first: torch.Tensor, second: torch.Tensor) -> bool:
    return (first.data_ptr(), first.shape, first.stride(), first.dtype) == (
        second.data_ptr(),
        second.shape,
        second.stride(),
        second.dtype,
    )
