"""`FSDPTrainEngine`: actor, reference or critic on FSDP2, implementing `rl.core.engines.TrainEngine`.

Mini-batches (one optimizer step each) are split into micro-batches whose gradients
accumulate; the loss function normalises by the whole mini-batch, so the update does not
depend on the micro-batch size.

The engine is a facade over one module per concern, as the megatron engine is: `build`
(LoRA, attention for packed rows, sharding, meta init, ties), `optimizer` (AdamW, LR
schedule, gradient scaler), `passes` (log-probs, entropy, values), `update` (train steps
and their metrics), `checkpoint` (save / load), `export` (HF weights out and in,
`save_hf`, the LoRA adapter) and `offload`. What it is built from is a `RoleSpec`; what
differs between its roles is the spec's `kind`, never the role's name.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from rl.core.config.schema import FUSED_VOCAB_ON_CPU
from rl.core.engines import (
    ExportsHF,
    ExportsViews,
    HasAdapters,
    LogprobOutput,
    LossFn,
    Offloading,
    ReplaysRoutes,
    Replicated,
    TrainEngine,
    TrainsOnImages,
)
from rl.core.models.vision_models import is_vision_language
from rl.core.role_spec import RoleSpec
from rl.fsdp import checkpoint, export
from rl.fsdp.build import build_model
from rl.fsdp.config import FSDPConfig
from rl.fsdp.distributed import ensure_process_group
from rl.fsdp.gated_mlp import use_gated_mlps
from rl.fsdp.offload import move
from rl.fsdp.optimizer import make_training
from rl.fsdp.passes import Passes
from rl.fsdp.tied_lookup import rows_into_gradient
from rl.fsdp.update import Updates

SECTION = "fsdp_config"  # the backend section this engine reads (`actor.fsdp_config`)


class FSDPTrainEngine(
    TrainEngine,
    Offloading,
    ExportsHF,
    ExportsViews,
    Replicated,
    ReplaysRoutes,
    HasAdapters,
    TrainsOnImages,
):
    """One model on FSDP2 with (for actor and critic) its AdamW optimizer and LR schedule."""

    def __init__(self, model: torch.nn.Module, spec: RoleSpec) -> None:
        self.role_spec, self.role, self.device = spec, spec.role, torch.device(spec.device)
        self.fsdp = spec.backend(SECTION, FSDPConfig)
        self.lora, self.lora_save_merged = spec.lora, spec.lora_save_merged
        self.built = build_model(model, spec, self.fsdp, self.device)
        self.model = self.built.model
        self.rank, self.world_size = self.built.rank, self.built.world_size
        self.generator = torch.Generator().manual_seed(spec.seed)
        output = None if spec.kind.values else model.get_output_embeddings()
        vocab_size = 0 if output is None else int(output.weight.shape[0])
        if spec.kind.trains and self.built.plain and self.built.tied:
            tied_lookup_gradient(self.model, vocab_size)
        # fsdp_config.amp_autocast: every forward of the model in its precision
        amp = self.fsdp.amp_autocast
        self.autocast_dtype = getattr(torch, amp.precision) if amp.enabled else None
        self.passes = Passes(
            self.built, spec, self.device, self.autocast_dtype, vocab_size, self.exports_views
        )
        if spec.kind.trains and self.passes.fused() and self.autocast_dtype is None:
            # with the fused kernels: half the MLP activations
            use_gated_mlps(self.model, invariant=spec.batch_invariant)
        self.training = make_training(self.model, spec, self.fsdp, self.device)
        self.updates = (
            None
            if self.training is None
            else Updates(self.built, self.passes, self.training, spec, self.device)
        )

    def trains_on_images(self) -> bool:
        """A vision-language model: its passes show each row's images (`rl.fsdp.vision`)."""
        return is_vision_language(self.model.config)

    @classmethod
    def from_spec(cls, spec: RoleSpec, tokenizer: Any) -> FSDPTrainEngine:
        """The engine of `spec`: its model loaded (a value model for the critic); under
        `meta_init` rank 0 reads it and the others receive their shards."""
        import torch.distributed as dist

        from rl.core.models import load_causal_lm, load_value_model

        ensure_process_group(spec.device)
        load = load_value_model if spec.kind.values else load_causal_lm
        empty = spec.backend(SECTION, FSDPConfig).meta_init and dist.get_rank() != 0
        return cls(load(spec.model, tokenizer, seed=spec.seed, empty=empty), spec)

    @classmethod
    def replica_size(cls, spec: RoleSpec) -> int:
        """Consecutive ranks that share rows: a Ulysses group."""
        return spec.sequence_parallel_size

    @classmethod
    def fit_world(cls, spec: RoleSpec, world: int) -> dict[str, Any]:
        """The Ulysses group and the FSDP shard group shrunk to divide `world` ranks."""
        overrides: dict[str, Any] = {}
        sp = spec.sequence_parallel_size
        if world % sp:
            overrides[f"{spec.section}.ulysses_sequence_parallel_size"] = math.gcd(sp, world)
        size = spec.backend(SECTION, FSDPConfig).fsdp_size
        if size != -1 and world % size:
            overrides[f"{spec.section}.{SECTION}.fsdp_size"] = -1  # shard over every rank
        return overrides

    # --- state the tests and tools read ----------------------------------------------

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        return None if self.training is None else self.training.optimizer

    @property
    def lr_scheduler(self) -> Any:
        return None if self.training is None else self.training.lr_scheduler

    @property
    def grad_scaler(self) -> Any:
        return None if self.training is None else self.training.grad_scaler

    # --- forward and update -----------------------------------------------------------

    def replays_routes(self) -> bool:
        return self.passes.router_replay != "disabled"

    def compute_logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs and (if `calculate_entropy`, else None) entropy of the response
        tokens: float32 [B, R] each, in the caller's row order; with routing replay R2,
        the routes the pass recorded."""
        return self.passes.logprobs(batch, calculate_entropy)

    def compute_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Critic values of the response positions: float32 [B, R], in the caller's order."""
        return self.passes.critic_values(batch)

    def train_step(self, batch: Mapping[str, torch.Tensor], loss_fn: LossFn) -> dict[str, float]:
        """`ppo_epochs` passes of mini-batch updates; returns metrics averaged over them.

        `loss_fn(output, micro_batch, mini_batch) -> (loss, metrics)` must normalise by
        the mini-batch so that micro-batch losses add up to the mini-batch loss; with
        several data-parallel ranks the update is the one a single rank makes on the same
        batch (`rl.fsdp.update`)."""
        assert self.updates is not None, f"train_step on the frozen {self.role} engine"
        return self.updates.train_step(batch, loss_fn, self.generator)

    # --- weights and checkpoints ------------------------------------------------------

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full (unsharded) tensors under their Hugging Face names, one at a time; a tied
        parameter once, under its first name (`model.embed_tokens.weight`, no
        `lm_head.weight`), as `save_pretrained` writes it. Every rank must iterate in step
        and gets every tensor; at most one unsharded parameter is alive at a time besides
        what the consumer keeps."""
        return export.export_weights(self.built, self.lora)

    @property
    def exports_views(self) -> bool:
        """Whether `export_weights` yields the live parameters themselves (a plain model,
        not sharded by FSDP2): a rollout engine in this process may then share them. Not
        with LoRA: the merged weights it yields are copies, made at each export."""
        return self.built.plain and self.lora is None

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights (e.g. the reference from the warm-started actor); a tied
        parameter comes under its first name (as `export_weights` yields it)."""
        export.load_weights(self.built, self.lora, named_tensors)

    def save(self, path: str) -> None:
        """Sharded, loadable at any world size (`rl.fsdp.checkpoint`)."""
        checkpoint.save(Path(path), self.built, self.training, self.generator)

    def load(self, path: str) -> None:
        checkpoint.load(Path(path), self.built, self.training, self.generator)

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder (`AutoModelForCausalLM.from_pretrained` loads it); under
        LoRA the adapter in PEFT's format (and `path`/merged with `lora_save_merged`)."""
        if self.lora is not None:
            export.save_adapter(self.built, self.lora, self.lora_save_merged, path, tokenizer)
        else:
            export.save_hf(self.built, path, tokenizer)

    # --- LoRA: the reference is this model with its adapters off ---------------------

    @property
    def has_adapters(self) -> bool:
        """Whether the model carries LoRA adapters (`model.lora_rank` > 0)."""
        return self.lora is not None

    @torch.no_grad()
    def compute_base_logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = False
    ) -> LogprobOutput:
        """`compute_logprobs` of the base model: every adapter bypassed."""
        from rl.core.models.lora import adapters_disabled

        with adapters_disabled(self.model):
            return self.compute_logprobs(batch, calculate_entropy)

    # --- colocation -------------------------------------------------------------------

    @classmethod
    def offload_keys(cls, spec: RoleSpec) -> tuple[str, ...]:
        """`<section>.fsdp_config.param_offload` / `optimizer_offload` where they are on
        (the reference uses the actor's section)."""
        fsdp = spec.backend(SECTION, FSDPConfig)
        keys = ("param_offload", "optimizer_offload")
        return tuple(f"{spec.section}.{SECTION}.{key}" for key in keys if getattr(fsdp, key))

    @property
    def offloads(self) -> bool:
        """Whether this engine steps aside for colocated roles (`fsdp_config.param_offload`
        / `optimizer_offload`)."""
        return self.fsdp.param_offload or self.fsdp.optimizer_offload

    def offload(self) -> None:
        """Move weights and optimizer state to CPU while another role uses the device
        (only what `fsdp_config.param_offload` / `optimizer_offload` name, when either is
        set; both otherwise)."""
        move(self.model, self.optimizer, self.fsdp, self.device, torch.device("cpu"))

    def onload(self) -> None:
        move(self.model, self.optimizer, self.fsdp, self.device, self.device)


def tied_lookup_gradient(model: torch.nn.Module, vocab_size: int) -> bool:
    """At a real vocabulary (from `FUSED_VOCAB_ON_CPU` tokens) a tied embedding's lookup
    adds its gradient rows into the shared weight's `.grad` in place
    (`rl.fsdp.tied_lookup`): no second or third [vocab, hidden] tensor in backward. Only
    for plain (unsharded) parameters; returns whether it applies."""
    return vocab_size >= FUSED_VOCAB_ON_CPU and rows_into_gradient(model)
