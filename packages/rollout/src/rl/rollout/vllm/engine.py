"""`VLLMRolloutEngine`: generation with vLLM's in-process V1 engine.

Implements `rl.core.engines.RolloutEngine`. The engine runs in the trainer's
process (no engine-core subprocess), so a weight sync hands the trainer's tensors
straight to the model runner's in-place `reload_weights` — no disk, no copy of the
state dict. One background loop steps the engine (`driver.EngineLoop`): `generate`
submits a batch and waits, `generate_one` awaits one request while others run, and
concurrent requests share engine steps.

Log-probs are vLLM's "processed" ones: log_softmax(logits / temperature), the
quantity the trainer recomputes. With top-p/top-k truncation, a repetition
penalty or `min_new_tokens` on, they are those of the distribution actually
sampled (truncated and renormalised), which the trainer does not reproduce; the
`mismatch/*` metrics then show the gap.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from rl.core.config import Config
from rl.core.engines import (
    Classify,
    Closable,
    PreflightedRollout,
    RolloutEngine,
    Rollouts,
    SamplingParams,
    ScoresTokens,
    ServesClassifier,
)
from rl.core.models import load_model_config, model_source
from rl.core.weight_sync.groups import fused_module
from rl.rollout.vllm.driver import EngineLoop
from rl.rollout.vllm.options import check_tensor_parallel, cpu_binding, engine_args
from rl.rollout.vllm.outputs import to_rollouts
from rl.rollout.vllm.sampling import one_prompt, to_vllm
from rl.rollout.vllm.version import import_vllm
from rl.rollout.vllm.weights import WeightTable, lean_vocab_layers, refresh_tied_layers

log = logging.getLogger(__name__)


class VLLMRolloutEngine(
    RolloutEngine, Closable, PreflightedRollout, ScoresTokens, ServesClassifier
):
    """Token ids in, token ids and their log-probs out, from an in-process vLLM engine."""

    def __init__(
        self,
        engine: Any,
        weights: WeightTable,
        eos_token_id: int | None,
        *,
        free_cache_engine: bool = True,
        detokenize: bool = False,
        scratch_dir: str | None = None,
        tensor_parallel_size: int = 1,
    ) -> None:
        self._vllm = import_vllm()
        self.loop = EngineLoop(engine)
        self.weights = weights
        self.eos_token_id = eos_token_id
        self.free_cache_engine = free_cache_engine
        self.detokenize = detokenize
        self._scratch_dir = scratch_dir
        self._sleeping = False
        self.tensor_parallel_size = tensor_parallel_size

    @classmethod
    def preflight(cls, config: Config) -> None:
        """What this engine cannot run, refused before any model loads (ConfigError)."""
        check_tensor_parallel(config)

    @classmethod
    def classifier_from_config(cls, config: Config) -> Classify:
        from rl.rollout.vllm.classifier import VLLMClassifier

        return VLLMClassifier(config)

    @classmethod
    def from_config(cls, config: Config, tokenizer: Any) -> VLLMRolloutEngine:
        import_vllm()  # version check, in-process engine
        from vllm.engine.arg_utils import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        hf_config = load_model_config(config.model, tokenizer)
        model_dir, scratch = _model_dir(config, hf_config)
        on_cpu = config.trainer.device == "cpu"
        dtype = config.model.dtype if config.rollout.dtype == "auto" else config.rollout.dtype
        kwargs = engine_args(config, model_dir, dtype, on_cpu=on_cpu, hf_config=hf_config)
        if scratch is not None and kwargs["load_format"] != "dummy":
            log.info("rollout: the built-in model has no files; vLLM starts from dummy weights")
            kwargs["load_format"] = "dummy"
        threads = torch.get_num_threads()
        tp = config.rollout.tensor_parallel_size
        if on_cpu and tp > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(
                tp, sorted(os.sched_getaffinity(0))
            )
        engine = LLMEngine.from_engine_args(EngineArgs(**kwargs))
        engine.collective_rpc(lean_vocab_layers)  # one copy of each vocabulary matrix
        torch.set_num_threads(threads)  # vLLM lowers it for serving; the trainer shares it
        return cls(
            engine,
            WeightTable.from_hf_config(hf_config, config.model.trust_remote_code),
            tokenizer.eos_token_id,
            free_cache_engine=config.rollout.free_cache_engine,
            detokenize=config.rollout.detokenize,
            scratch_dir=scratch,
            tensor_parallel_size=tp,
        )

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams) -> Rollouts:
        """`sampling.n` responses per prompt, grouped: rows i*n .. i*n+n-1 belong to prompt i.
        Per-prompt seeds become request seeds (vLLM draws sample j from seed + j)."""
        sampling.sample_seeds(len(prompt_ids))  # the seeds fit the prompts (ValueError)
        futures = [
            self._submit(prompt, one_prompt(sampling, i)) for i, prompt in enumerate(prompt_ids)
        ]
        return to_rollouts(prompt_ids, [future.result() for future in futures], sampling.n)

    async def generate_one(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Rollouts:
        """One request; awaiting it lets other requests run in the same engine steps."""
        sampling.sample_seeds(1)
        output = await asyncio.wrap_future(self._submit(prompt_ids, one_prompt(sampling, 0)))
        return to_rollouts([prompt_ids], [output], sampling.n)

    def score(self, token_ids: Sequence[int]) -> list[float]:
        """log p(token_ids[i] | token_ids[:i]) for i >= 1: vLLM's prompt log-probs (raw
        logits, temperature 1), one token generated and dropped."""
        if self._sleeping:
            raise RuntimeError("the vLLM engine is asleep: call wake() before scoring")
        params = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        prompt = self._vllm.TokensPrompt(prompt_token_ids=list(token_ids))
        output = self.loop.submit(prompt, params).result()
        return [
            float(ranked[token].logprob)
            for token, ranked in zip(token_ids[1:], output.prompt_logprobs[1:], strict=True)
        ]

    def _submit(self, prompt: Sequence[int], sampling: SamplingParams) -> Any:
        if self._sleeping:
            raise RuntimeError("the vLLM engine is asleep: call wake() before generating")
        params = to_vllm(self._vllm, sampling, self.eos_token_id, self.detokenize)
        return self.loop.submit(self._vllm.TokensPrompt(prompt_token_ids=list(prompt)), params)

    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Load trainer weights (HF names) in place, streamed: vLLM fuses and repacks them.

        A tied model's embedding arrives once (`lm_head.weight`, if sent too, must equal
        it); its head, which the reload does not rebuild, is refreshed after it."""
        checked: Any = self.weights.checked(named_tensors)
        if self.tensor_parallel_size > 1:
            # the TP workers are processes of their own: the weights go to them pickled, a
            # full copy each (their loaders take their shards); a bucket view is copied
            # out first, or its whole bucket would travel with it
            checked = [(name, tensor.clone()) for name, tensor in checked]

        def reload(engine: Any) -> None:
            engine.collective_rpc("reload_weights", kwargs={"weights_iterator": checked})
            if self.weights.tied_loaded:
                engine.collective_rpc(refresh_tied_layers)
            engine.reset_prefix_cache()  # cached prefixes hold K/V of the old weights

        self.loop.exclusive(reload)

    def weight_group(self, name: str) -> str:
        """q/k/v, gate/up and a MoE block's experts load as one fused module."""
        return fused_module(name)

    def sleep(self) -> None:
        """Release the KV cache and offload weights (CUDA; `rollout.free_cache_engine`).

        vLLM's CPU build has no sleep mode: there this is a no-op and memory stays held."""
        if self.free_cache_engine and _sleep_supported():
            self.loop.exclusive(lambda engine: engine.sleep(level=1))
            self._sleeping = True

    def wake(self) -> None:
        if self._sleeping:
            self.loop.exclusive(lambda engine: engine.wake_up())
            self._sleeping = False

    def close(self) -> None:
        """Stop the loop and shut the engine down. vLLM's shutdown also destroys
        torch.distributed's default group (the trainer's too): call it at the end."""
        self.loop.close()
        self.loop.engine.engine_core.shutdown()
        if self._scratch_dir is not None:
            shutil.rmtree(self._scratch_dir, ignore_errors=True)


def _sleep_supported() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_sleep_mode_available())


def _model_dir(config: Config, hf_config: Any) -> tuple[str, str | None]:
    """(folder vLLM reads, scratch folder to delete or None). A built-in model has no
    files: its config goes to a scratch folder and the first sync brings the weights."""
    source = model_source(config.model)
    if source is not None:
        return source, None
    scratch = tempfile.mkdtemp(prefix="rl-vllm-model-")
    hf_config.save_pretrained(scratch)
    return scratch, scratch
