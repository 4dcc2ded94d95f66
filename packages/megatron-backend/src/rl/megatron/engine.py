"""`MegatronTrainEngine`: actor, reference or critic on megatron-core (`TrainEngine`).

The same semantics as the FSDP engine: a mini-batch is one optimizer step, cut into
micro-batches (rows or a token budget) whose gradients accumulate; `loss_fn` normalises
by the whole mini-batch; with several data-parallel groups each takes its token-balanced
share of every mini-batch and the update equals one rank's on the whole of it. Micro-
batches run through megatron-core's pipeline schedule (1F1B, interleaved with virtual
stages at PP >= 3), gradients through its DDP (bucketed, optionally overlapped) and the
step through its optimizer (distributed or not, fp32 master weights under bf16/fp16,
dynamic loss scaling under fp16), the learning rate through its `OptimizerParamScheduler`.
The critic is the same model with a `ValueHead` for an output layer.

The engine is a facade over one module per concern: `build` (the model chunks and their
first weights), `optimizer` (DDP, optimizer, LR schedule), `schedule` (the pipeline
schedule, forward-only passes), `update` (train steps and their metrics), `export` (HF
weights out and in, `save_hf`), `checkpoint` (save / load) and `offload`. Built on the
CPU (`trainer.device=cpu`) it first installs `cpu_mode`, the CPU debug mode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rl.core.config import ConfigError
from rl.core.distributed import ensure_process_group
from rl.core.engines import (
    ExportsHF,
    LogprobOutput,
    LossFn,
    Offloading,
    Preflighted,
    Replicated,
    TrainEngine,
)
from rl.core.micro_batches import mini_batches
from rl.core.role_spec import RoleSpec
from rl.megatron import cpu_mode
from rl.megatron.build import DTYPES, build_chunks, hf_folder, hf_weights, load_initial_weights
from rl.megatron.checkpoint import Checkpoints
from rl.megatron.config import MegatronConfig
from rl.megatron.export import HFWeights
from rl.megatron.layouts import converter_for
from rl.megatron.model import resolve_spec
from rl.megatron.offload import Offloader
from rl.megatron.optimizer import make_training
from rl.megatron.parallel import check_layout, fit_world, init_model_parallel
from rl.megatron.schedule import PipelineSchedule
from rl.megatron.update import TrainSteps

SECTION = "megatron"  # the backend section this engine reads (`actor.megatron`)
OFFLOAD_KEYS = ("param_offload", "grad_offload", "optimizer_offload")


class MegatronTrainEngine(TrainEngine, Offloading, ExportsHF, Preflighted, Replicated):
    """One model on megatron-core with (for the actor and critic) its optimizer and LR
    schedule. It starts from `hf_folder` (a Hugging Face safetensors folder, of which each
    rank reads only its slices) or, without one, from the tensors `hf_weights()` streams
    (a built-in model); `megatron.use_dist_checkpointing` overrides both."""

    def __init__(
        self,
        hf_config: Any,
        hf_weights: Callable[[], Iterable[tuple[str, torch.Tensor]]],
        spec: RoleSpec,
        hf_folder: Path | None = None,
    ) -> None:
        self.role_spec, self.role, self.section = spec, spec.role, spec.section
        self.device = torch.device(spec.device)
        self.m = spec.backend(SECTION, MegatronConfig)
        section, seed = spec.section, spec.seed
        ensure_process_group(self.device.type)
        cpu_mode.install_for(self.device)  # megatron-core on CPU: the debug mode; never on CUDA
        check_layout(hf_config, self.m, dist.get_world_size(), section, spec.use_remove_padding)
        init_model_parallel(self.m)
        from megatron.core import parallel_state as ps

        self.ps = ps
        self.dtype = DTYPES[self.m.dtype or spec.dtype]
        self.spec = resolve_spec("auto")
        self.hf_config = hf_config
        self.converter = converter_for(hf_config, spec=self.spec)
        critic = spec.kind.values
        # the random init is overwritten below; the run's random stream stays untouched
        with torch.random.fork_rng(devices=[]):
            self.chunks, self.tf_config = build_chunks(
                hf_config, self.m, self.spec, self.dtype, self.device, critic, section
            )
        self.weights_read = load_initial_weights(  # the HF blocks read (slices)
            self.chunks, self.m, self.converter, hf_config, seed, critic, hf_folder, hf_weights
        )
        self.mini_batch_size, self.ppo_epochs, self.shuffle = (
            spec.mini_batch_size,
            spec.ppo_epochs,
            spec.shuffle,
        )
        self.train_batching, self.forward_batching = spec.updates, spec.forwards
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer: Any = None
        self.lr_scheduler: Any = None
        if not spec.kind.trains:
            for chunk in self.chunks:
                chunk.requires_grad_(False)
        else:
            assert spec.optim is not None, f"the {spec.role} engine needs an optimizer config"
            self.chunks, self.optimizer, self.lr_scheduler = make_training(
                self.chunks,
                self.tf_config,
                self.m,
                spec.optim,
                spec.total_steps,
                self.dtype,
                section,
            )
        self._schedule = PipelineSchedule(
            self.chunks,
            self.m,
            self.tf_config,
            critic,
            spec.use_remove_padding,
            spec.temperature,
            self.device,
        )
        self._steps = (
            None
            if self.optimizer is None
            else TrainSteps(self._schedule, self.optimizer, self.lr_scheduler, section)
        )
        self._weights = HFWeights(self.chunks, self.converter, self.device, critic, hf_config)
        self._checkpoints = Checkpoints(
            self.chunks, self.optimizer, self.lr_scheduler, self.generator, hf_config
        )
        self._offloader = Offloader(self.chunks, self.optimizer, self.m, self.device)

    # --- from config ------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec: RoleSpec, tokenizer: Any) -> MegatronTrainEngine:
        """The engine of `spec`, starting from `model.path`'s safetensors folder or the
        tensors of the model it names (the reference uses the actor's `megatron` layout)."""
        from rl.core.models import load_model_config

        _refuse_prefix_grouper(spec)
        return cls(
            load_model_config(spec.model, tokenizer),
            partial(hf_weights, spec.model, spec.seed, tokenizer, spec.kind.values),
            spec,
            hf_folder=hf_folder(spec.model),
        )

    @classmethod
    def preflight(cls, spec: RoleSpec, world: int) -> None:
        """The layout against the model's shapes and the world, before any process starts."""
        from rl.core.models import load_model_config, load_tokenizer

        if spec.lora is not None:
            raise ConfigError(
                f"model.lora_rank = {spec.model.lora_rank}: LoRA on the megatron engine is "
                "not in rl; the FSDP engine has it (actor.strategy=fsdp)"
            )
        hf_config = load_model_config(spec.model, load_tokenizer(spec.model))
        _refuse_prefix_grouper(spec)
        megatron = spec.backend(SECTION, MegatronConfig)
        check_layout(hf_config, megatron, world, spec.section, spec.use_remove_padding)

    @classmethod
    def replica_size(cls, spec: RoleSpec) -> int:
        """Consecutive ranks that hold one model copy between them and share its rows."""
        return spec.backend(SECTION, MegatronConfig).model_parallel_size

    @classmethod
    def fit_world(cls, spec: RoleSpec, world: int) -> dict[str, Any]:
        """TP, CP, PP, EP (and what depends on them) shrunk to a layout of `world` ranks."""
        megatron = spec.backend(SECTION, MegatronConfig)
        return fit_world(megatron, world, f"{spec.section}.{SECTION}")

    # --- forward and update -----------------------------------------------------------

    def scheduled(self, micro_batches: int) -> int:
        """How many micro-batches the pipeline schedule runs for `micro_batches` (the
        interleaved schedule pads fewer than PP)."""
        return self._schedule.scheduled(micro_batches)

    @torch.no_grad()
    def compute_logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs and (if `calculate_entropy`, else None) entropy of the response
        tokens: float32 [B, R] each, in the caller's order (every rank of a model copy
        returns them)."""
        names = ("logprobs", "entropy") if calculate_entropy else ("logprobs",)
        out = self._schedule.forward_only(
            batch,
            self.forward_batching,
            lambda o: {name: getattr(o, name) for name in names},
            calculate_entropy,
        )
        return LogprobOutput(out["logprobs"], out.get("entropy"))

    def compute_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """A critic's values of the response positions: float32 [B, R], in the caller's
        order (every rank of a model copy returns them)."""
        assert self.role_spec.kind.values, f"compute_values on the {self.role} engine"
        with torch.no_grad():
            return self._schedule.forward_only(
                batch, self.forward_batching, lambda values: {"values": values}
            )["values"]

    def train_step(self, batch: Mapping[str, torch.Tensor], loss_fn: LossFn) -> dict[str, float]:
        """`ppo_epochs` passes of mini-batch updates; metrics averaged over them (see
        `FSDPTrainEngine.train_step`: the same contract, rank by rank)."""
        assert self._steps is not None and self.lr_scheduler is not None
        minis = mini_batches(
            batch, self.mini_batch_size, self.ppo_epochs, self.shuffle, self.generator
        )
        return self._steps.train_step(minis, loss_fn, self.train_batching)

    # --- weights and checkpoints ------------------------------------------------------

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors under their Hugging Face names, one at a time, on every rank in the
        same order (each rank feeds its rollout replica): TP shards gathered, pipeline
        stages' and expert ranks' tensors broadcast from their holder."""
        return self._weights.export_weights()

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights with full HF-named tensors (the reference from the actor)."""
        self._weights.load_weights(named_tensors)

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder (safetensors, the model's config) from the exported
        weights; a critic's loads with `AutoModelForTokenClassification` (`num_labels` 1)."""
        self._weights.save_hf(path, tokenizer)

    def save(self, path: str) -> None:
        """megatron-core dist-checkpointing into `path`/dist (every rank writes its shards;
        model and optimizer state load at another TP/PP/DP layout, `rl.megatron.checkpoint`),
        the rest (LR schedule, Adam step, sampling generator) by rank 0 into
        `path`/state.pt, and the HF config.json (so `rl convert-ckpt --to hf` and
        `use_dist_checkpointing` read the folder). A failed write is an OSError."""
        self._checkpoints.save(path)

    def load(self, path: str) -> None:
        """What `save` wrote (at any TP/PP layout); an unreadable one is a CheckpointError."""
        self._checkpoints.load(path)

    # --- colocation -------------------------------------------------------------------

    @classmethod
    def offload_keys(cls, spec: RoleSpec) -> tuple[str, ...]:
        """`<section>.megatron.param_offload` / `grad_offload` / `optimizer_offload` where
        they are on (the reference uses the actor's section and has no optimizer)."""
        m = spec.backend(SECTION, MegatronConfig)
        keys = OFFLOAD_KEYS if spec.kind.trains else ("param_offload",)
        return tuple(f"{spec.section}.{SECTION}.{key}" for key in keys if getattr(m, key))

    @property
    def offloads(self) -> bool:
        """Whether this engine steps aside for colocated roles (`megatron.*_offload`)."""
        return self._offloader.offloads

    def offload(self) -> None:
        """Release the device memory `megatron.param_offload` / `grad_offload` /
        `optimizer_offload` name (see `rl.megatron.offload`; weights and optimizer state
        wait on the host, gradients are dropped)."""
        self._offloader.offload()

    def onload(self) -> None:
        """Bring back what `offload` released."""
        self._offloader.onload()


def _refuse_prefix_grouper(spec: RoleSpec) -> None:
    """Shared prompts are rl-fsdp's (megatron packs each row whole)."""
    name = spec.section
    if spec.use_prefix_grouper:
        raise ConfigError(
            f"{name}.use_prefix_grouper = true is not supported with {name}.strategy=megatron "
            "(rl-fsdp shares prompts; megatron packs each row whole): set it to null or false"
        )
