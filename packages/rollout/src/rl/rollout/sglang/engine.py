"""`SGLangRolloutEngine`: `rl.core.engines.RolloutEngine` on SGLang's offline `Engine`.

Token ids in and out (`skip_tokenizer_init`), one SGLang request per response row, log-probs
from `meta_info["output_token_logprobs"]` (see logprobs.py for exactly which distribution),
weights in through flattened-tensor buckets (payload.py), memory released between rollouts
with SGLang's memory saver. SGLang is imported, and its version checked, when an engine is
built, never when this module is imported.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from rl.core.config import Config
from rl.core.engines import Closable, RolloutEngine, Rollouts, SamplingParams
from rl.core.weight_sync.groups import fused_module
from rl.core.weight_sync.ties import TieCheck, Ties
from rl.rollout.sglang import outputs, payload
from rl.rollout.sglang import sampling as requests
from rl.rollout.sglang.logprobs import check_logprob_environment
from rl.rollout.sglang.options import server_args
from rl.rollout.sglang.version import import_sglang


def _sglang_weight_sync_types() -> tuple[Any, Any]:
    """SGLang's (MultiprocessingSerializer.serialize, FlattenedTensorMetadata)."""
    from sglang.srt.utils import MultiprocessingSerializer

    try:
        from sglang.srt.weight_sync.tensor_bucket import FlattenedTensorMetadata
    except ImportError:  # releases that kept it beside the model runner
        from sglang.srt.model_executor.model_runner import FlattenedTensorMetadata
    return MultiprocessingSerializer.serialize, FlattenedTensorMetadata


def _supports_sampling_seed() -> bool:
    from sglang.srt.sampling.sampling_params import SamplingParams as SGLangSamplingParams

    return hasattr(SGLangSamplingParams(), "sampling_seed")


class SGLangRolloutEngine(RolloutEngine, Closable):
    """Generation on an in-process SGLang `Engine` (its scheduler runs in child processes)."""

    def __init__(
        self,
        engine_args: dict[str, Any],
        tokenizer: Any,
        bucket_megabytes: int = 512,
        free_cache_engine: bool = True,
        ties: Ties | None = None,
    ) -> None:
        sglang = import_sglang()
        check_logprob_environment(os.environ)
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.tp_size = int(engine_args.get("tp_size", 1))
        self.bucket_bytes = bucket_megabytes << 20
        self.free_cache_engine = free_cache_engine
        self._ties = TieCheck(ties or Ties())  # the served model's (tie_word_embeddings)
        self._serialize, self._metadata_type = _sglang_weight_sync_types()
        self._seed_supported = _supports_sampling_seed()
        self._engine = sglang.Engine(**engine_args)

    @classmethod
    def from_config(cls, config: Config, tokenizer: Any) -> SGLangRolloutEngine:
        """Serve `model.path` (a built-in model is first written to a temporary folder)."""
        from rl.core.models.loading import load_model_config, model_source

        path = model_source(config.model) or _materialize_builtin(config, tokenizer)
        hf_config = load_model_config(config.model, tokenizer)
        context_length = config.data.max_prompt_length + config.data.max_response_length
        engine_args = server_args(
            config.rollout, path, context_length, config.model.trust_remote_code
        )
        return cls(
            engine_args,
            tokenizer,
            bucket_megabytes=config.rollout.update_weights_bucket_megabytes,
            free_cache_engine=config.rollout.free_cache_engine,
            ties=Ties.from_hf_config(hf_config, config.model.trust_remote_code),
        )

    def _requests(
        self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
    ) -> tuple[list[list[int]], list[dict[str, Any]]]:
        rows = requests.expand_prompts([list(p) for p in prompt_ids], params.n)
        per_row = requests.row_params(params, len(prompt_ids), self.eos_id, self._seed_supported)
        return rows, per_row

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams) -> Rollouts:
        """`n` responses per prompt, grouped: rows i*n .. i*n+n-1 belong to prompt i."""
        if not prompt_ids:
            return Rollouts([], [], [], [])
        rows, per_row = self._requests(prompt_ids, sampling)
        results = self._engine.generate(
            input_ids=rows, sampling_params=per_row, return_logprob=True
        )
        return outputs.to_rollouts(rows, results)

    async def generate_one(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Rollouts:
        """One prompt's n responses through SGLang's `async_generate` (no thread, no blocking)."""
        rows, per_row = self._requests([prompt_ids], sampling)
        results = await self._engine.async_generate(
            input_ids=rows, sampling_params=per_row, return_logprob=True
        )
        return outputs.to_rollouts(rows, results)

    @torch.no_grad()
    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Load trainer weights (Hugging Face names) bucket by bucket, then drop the KV cache;
        a tied model's embedding once (`payload.update_requests`)."""
        for request in payload.update_requests(
            named_tensors,
            self.bucket_bytes,
            self.tp_size,
            self._serialize,
            self._metadata_type,
            self._ties,
        ):
            payload.raise_on_failure(self._engine.update_weights_from_tensor(**request))
            del request  # the IPC handles keep the bucket alive only until loaded
        self._engine.flush_cache()  # cached prefixes were computed with the old weights

    def weight_group(self, name: str) -> str:
        """q/k/v, gate/up and a MoE block's experts load as one fused module."""
        return fused_module(name)

    def sleep(self) -> None:
        """Release SGLang's weights and KV cache (only when `rollout.free_cache_engine`)."""
        if self.free_cache_engine:
            self._engine.release_memory_occupation()

    def wake(self) -> None:
        """Take the memory back; weights are valid again after the next `update_weights`
        (or at once with `engine_kwargs.sglang.enable_weights_cpu_backup`)."""
        if self.free_cache_engine:
            self._engine.resume_memory_occupation()

    def close(self) -> None:
        """Stop SGLang's scheduler and detokenizer processes (as the vLLM engine's close)."""
        self._engine.shutdown()


def _materialize_builtin(config: Config, tokenizer: Any) -> str:
    """Write the built-in model (seeded random weights) to a temporary folder SGLang can load."""
    from rl.core.models.loading import load_causal_lm

    folder = tempfile.mkdtemp(prefix="rl-sglang-model-")
    load_causal_lm(config.model, tokenizer, seed=config.trainer.seed).save_pretrained(folder)
    return folder
