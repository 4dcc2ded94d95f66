"""`FSDPTrainEngine`: actor, reference or critic on FSDP2, implementing `rl.core.engines.TrainEngine`.

Mini-batches (one optimizer step each) are split into micro-batches whose
gradients accumulate; the loss function normalises by the whole mini-batch, so
the update does not depend on the micro-batch size.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from rl.core.batch import select, to_device
from rl.core.checkpoint_io import load_state, save_state
from rl.core.config import Config, OptimConfig
from rl.core.config.schema import FUSED_VOCAB_ON_CPU, fused_log_probs
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
)
from rl.core.file_modes import follow_umask
from rl.core.micro_batches import (
    MicroBatching,
    micro_batch_rows,
    micro_batching,
    mini_batches,
)
from rl.core.models import load_causal_lm, load_value_model
from rl.core.models.lora import LoraSettings
from rl.core.optim import make_lr_scheduler, resume_schedule
from rl.core.sharded_io import load_sharded, save_sharded
from rl.core.updates import TOKENS, mini_batch_updates
from rl.core.updates import step_metrics as step_metrics_of
from rl.core.weight_sync.ties import retie, tied_aliases, with_aliases, without_aliases
from rl.core.workers.dispatch import data_parallel_rows
from rl.fsdp.config import FSDPConfig
from rl.fsdp.distributed import ensure_process_group, fsdp_mesh
from rl.fsdp.forward import fused_logprobs_and_entropy, response_logprobs, response_values
from rl.fsdp.packing import prefix_grouping, shared_prompt_fraction
from rl.fsdp.precision import autocast, grad_scaler
from rl.fsdp.routing_replay import (
    Phase,
    RecordedRoutes,
    check_replay,
    replay_session,
    routing_pass,
)
from rl.fsdp.tied_lookup import rows_into_gradient
from rl.fsdp.ulysses import SequenceParallel, check_heads, sequence_parallel_group
from rl.fsdp.ulysses import register as register_ulysses
from rl.fsdp.wrap import shard_model
from rl.kernels.varlen_attention import register as register_varlen_attention

Role = Literal["actor", "ref", "critic"]
FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


class FSDPTrainEngine(
    TrainEngine, Offloading, ExportsHF, ExportsViews, Replicated, ReplaysRoutes, HasAdapters
):
    """One model on FSDP2 with (for actor and critic) its AdamW optimizer and LR schedule."""

    def __init__(
        self,
        model: torch.nn.Module,
        role: Role,
        device: str = "cpu",
        optim: OptimConfig | None = None,
        total_steps: int = 1,
        mini_batch_size: int = 8,
        micro_batch_size: int = 8,
        ppo_epochs: int = 1,
        shuffle: bool = False,
        temperature: float = 1.0,
        seed: int = 0,
        use_fused_kernels: bool | None = None,
        use_remove_padding: bool = True,
        use_prefix_grouper: bool | None = None,
        train_batching: MicroBatching | None = None,
        forward_batching: MicroBatching | None = None,
        fsdp: FSDPConfig | None = None,
        sequence_parallel_size: int = 1,
        router_replay: str = "disabled",
        lora: LoraSettings | None = None,
        lora_save_merged: bool = False,
    ) -> None:
        self.role, self.device = role, torch.device(device)
        # MoE routing replay (`actor.router_replay.mode`): the actor's only
        self.router_replay = router_replay if role == "actor" else "disabled"
        check_replay(model, self.router_replay, sequence_parallel_size)
        section = "critic" if role == "critic" else "actor"
        self.fsdp = fsdp or FSDPConfig()
        # LoRA adapters (model.lora_rank > 0): injected before anything reads the model's
        # names or wraps it; only they train (rl.core.models.lora)
        self.lora, self.lora_save_merged = lora, lora_save_merged
        if lora is not None:
            from rl.core.models.lora import apply_lora

            if role == "critic":
                from rl.core.config import ConfigError

                raise ConfigError(
                    "model.lora_rank > 0 applies to the actor; the critic has no LoRA"
                )
            checkpointing = bool(getattr(model, "is_gradient_checkpointing", False))
            apply_lora(model, lora, checkpointing, seed)
        if self.fsdp.offload_policy and self.device.type != "cuda":
            from rl.core.config import ConfigError

            raise ConfigError(
                f"{section}.fsdp_config.offload_policy = true needs trainer.device=cuda (it "
                "moves shards between the GPU and CPU; on CPU they are there already)"
            )
        mesh = fsdp_mesh(self.device.type, self.fsdp.fsdp_size, f"{section}.fsdp_config.fsdp_size")
        self.sp = self._sequence_parallel(
            model, sequence_parallel_size, use_remove_padding, section
        )
        if use_remove_padding:  # attention within each packed sequence, no [N, N] mask
            attention = register_varlen_attention() if self.sp is None else register_ulysses()
            model.set_attn_implementation(attention)
        # FSDP shards (or HSDP replicates) over every rank and averages gradients over all
        # of them; data parallelism is over groups of sequence-parallel ranks, which share
        # their rows: each group takes its share of every batch
        world = dist.get_world_size()
        self.rank, self.world_size, self.loss_scale = dist.get_rank(), world, world
        self.dp_size = world // sequence_parallel_size
        self.dp_rank = dist.get_rank() // sequence_parallel_size
        empty = any(p.is_meta for p in model.parameters())
        # rank 0's full weights, to broadcast once sharded (meta_init)
        full = model.to(self.device).state_dict() if self.fsdp.meta_init and not empty else None
        # tied parameters (`tie_word_embeddings`: lm_head.weight IS the embedding) by their
        # other names: one parameter, exported, checkpointed and optimized once
        self.tied = tied_aliases(model)
        self.model = shard_model(model if empty else model.to(self.device), mesh, self.fsdp)
        # plain parameters (no FSDP2 at world size 1): `export_weights` yields them as views
        self._plain = not any(hasattr(p, "full_tensor") for p in self.model.parameters())
        if self.fsdp.meta_init:
            self._receive_from_rank0(full)
        self.mini_batch_size = mini_batch_size
        # micro-batches of updates and of forward-only passes: rows, or a token budget
        self.train_batching = train_batching or MicroBatching(rows=micro_batch_size)
        self.forward_batching = forward_batching or self.train_batching
        self.packed = use_remove_padding
        self.share_prompts = prefix_grouping(use_prefix_grouper, self.packed, self.sp, section)
        self.ppo_epochs, self.shuffle, self.temperature = ppo_epochs, shuffle, temperature
        self.generator = torch.Generator().manual_seed(seed)
        # None = auto (`_fused`): fused on GPU, and on CPU for a real vocabulary, where
        # the [tokens, vocab] logits it never holds are the memory that counts
        self.use_fused_kernels = use_fused_kernels
        output = model.get_output_embeddings() if role != "critic" else None
        self.vocab_size = 0 if output is None else int(output.weight.shape[0])
        if role == "actor" and self._plain and self.tied:
            tied_lookup_gradient(self.model, self.vocab_size)
        self.optim_config = optim
        self.optimizer: torch.optim.Optimizer | None = None
        self.grad_scaler: Any = None  # fsdp_config.grad_scaler (a trained role's)
        # fsdp_config.amp_autocast: every forward of the model in its precision
        autocast = self.fsdp.amp_autocast
        self.autocast_dtype = getattr(torch, autocast.precision) if autocast.enabled else None
        self.lr_scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        if role == "ref":
            self.model.requires_grad_(False)
        else:
            assert optim is not None, f"the {role} engine needs an optimizer config"
            _refuse_megatron_schedule_keys(optim, section)
            trained = [p for p in self.model.parameters() if p.requires_grad]
            self.optimizer = torch.optim.AdamW(
                trained,
                lr=optim.lr,
                betas=tuple(optim.betas),  # type: ignore[arg-type]
                eps=optim.eps,
                weight_decay=optim.weight_decay,
                **adamw_implementation(self.model, trained, self.fsdp.grad_scaler.enabled),
            )
            self.lr_scheduler = make_lr_scheduler(self.optimizer, optim, total_steps)
            self.grad_scaler = grad_scaler(self.fsdp.grad_scaler, self.device)
            # as built from the config: a resumed run keeps these, not the checkpoint's
            self._hyperparameters = [
                {k: v for k, v in group.items() if k != "params"}
                for group in self.optimizer.param_groups
            ]

    def _receive_from_rank0(self, full: dict[str, torch.Tensor] | None) -> None:
        """Every rank's shards from rank 0's full weights (the others built the model on
        the meta device); buffers, persistent or not (rotary frequencies), likewise."""
        if self.rank != 0:
            self.model.to_empty(device=self.device)
            retie(self.model, self.tied)  # a plain module's to_empty would untie them
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(self.model, full or {}, options=options)
        with torch.no_grad():
            for buffer in self.model.buffers():
                dist.broadcast(buffer, src=0)

    def _sequence_parallel(
        self, model: torch.nn.Module, size: int, packed: bool, section: str
    ) -> SequenceParallel | None:
        key = f"{section}.ulysses_sequence_parallel_size"
        if size == 1:
            return None
        from rl.core.config import ConfigError

        world = dist.get_world_size()
        if world % size:
            raise ConfigError(f"{key} = {size} does not divide the world of {world} ranks")
        if not packed:
            raise ConfigError(f"{key} = {size} needs {section}.use_remove_padding=true")
        check_heads(model.config, size, key)
        return sequence_parallel_group(self.device.type, size)

    @classmethod
    def from_config(
        cls,
        config: Config,
        role: Role,
        tokenizer: Any,
        total_steps: int = 1,
        responses_per_prompt: int = 1,
        section: Any = None,
        temperature: float | None = None,
    ) -> FSDPTrainEngine:
        """Build the `role` engine from config (`actor.*` or `critic.*`, or `section`).

        Log-probs use `rollout.temperature` (as the sampler did) unless `temperature` is given.
        """
        if section is None:
            section = config.critic if role == "critic" else config.actor
        fsdp = config.critic.fsdp_config if role == "critic" else config.actor.fsdp_config
        ensure_process_group(config.trainer.device)
        load = load_value_model if role == "critic" else load_causal_lm
        empty = fsdp.meta_init and dist.get_rank() != 0  # rank 0 reads, the others receive
        model = load(config.model, tokenizer, seed=config.trainer.seed, empty=empty)
        train, forward = micro_batching(config, role, section)
        return cls(
            model,
            role,
            device=config.trainer.device,
            optim=None if role == "ref" else section.optim,
            total_steps=total_steps,
            mini_batch_size=section.ppo_mini_batch_size * responses_per_prompt,
            ppo_epochs=section.ppo_epochs,
            shuffle=getattr(section, "shuffle", False),
            temperature=config.rollout.temperature if temperature is None else temperature,
            seed=config.trainer.seed,
            use_fused_kernels=getattr(section, "use_fused_kernels", None),
            use_remove_padding=section.use_remove_padding,
            use_prefix_grouper=section.use_prefix_grouper,
            train_batching=train,
            forward_batching=forward,
            fsdp=fsdp,
            sequence_parallel_size=(
                config.critic if role == "critic" else config.actor
            ).ulysses_sequence_parallel_size,
            router_replay=config.actor.router_replay.mode,
            lora=LoraSettings.of(config.model) if role == "actor" else None,
            lora_save_merged=config.model.lora_save_merged,
        )

    @classmethod
    def replica_size(cls, config: Config, role: str) -> int:
        """Consecutive ranks that share rows: a Ulysses group."""
        section = config.critic if role == "critic" else config.actor
        return section.ulysses_sequence_parallel_size

    @classmethod
    def fit_world(cls, config: Config, role: str, world: int) -> dict[str, Any]:
        """The Ulysses group and the FSDP shard group shrunk to divide `world` ranks."""
        name = "critic" if role == "critic" else "actor"
        section = getattr(config, name)
        overrides: dict[str, Any] = {}
        sp = section.ulysses_sequence_parallel_size
        if world % sp:
            overrides[f"{name}.ulysses_sequence_parallel_size"] = math.gcd(sp, world)
        size = section.fsdp_config.fsdp_size
        if size != -1 and world % size:
            overrides[f"{name}.fsdp_config.fsdp_size"] = -1  # shard over every rank
        return overrides

    # --- forward ------------------------------------------------------------------

    def _fused(self) -> bool:
        """One log-prob path for every pass (old, reference, training), whatever the grad
        mode: a frozen copy of the actor then gives exactly the training log-probs (zero
        KL), which two paths, equal only to rounding, do not."""
        return fused_log_probs(self.use_fused_kernels, self.device.type, self.vocab_size)

    def replays_routes(self) -> bool:
        return self.router_replay != "disabled"

    def _forward(
        self, micro: Mapping[str, torch.Tensor], with_entropy: bool, phase: Phase = "update"
    ) -> Any:
        packing = {"packed": self.packed, "sp": self.sp, "share_prompts": self.share_prompts}
        if self.role == "critic":
            with self._autocast():
                return response_values(self.model, micro, **packing)
        compute = fused_logprobs_and_entropy if self._fused() else response_logprobs
        routing = routing_pass(self.router_replay, micro, phase)
        with self._autocast():
            output = LogprobOutput(
                *compute(
                    self.model, micro, self.temperature, with_entropy, **packing, routing=routing
                )
            )
        output.routed_experts = None if routing is None else routing.recorded
        return output

    def _autocast(self) -> Any:
        return autocast(self.autocast_dtype, self.device)

    def _set_training(self, training: bool) -> None:
        """`model.train(training)`, skipped when already so (it walks every module)."""
        if self.model.training != training:
            self.model.train(training)

    def _forward_rows(self, batch: Mapping[str, torch.Tensor], with_entropy: bool) -> list[Any]:
        """Forward-only over `forward_batching` micro-batches; each result with its rows."""
        self._set_training(False)
        results = []
        # inference mode (no autograd bookkeeping per op) on a plain model; FSDP2's
        # parameter hooks need autograd's version counters, so the callers' no_grad there
        # (not `inference_mode(False)`: that turns grad mode back on)
        with (
            torch.inference_mode() if self.exports_views else nullcontext(),
            replay_session(self.model, self.router_replay),
        ):
            for rows in micro_batch_rows(batch["attention_mask"], self.forward_batching):
                if rows.numel():
                    micro = to_device(select(batch, rows), self.device)
                    results.append((rows, self._forward(micro, with_entropy, "old")))
        return results

    @torch.no_grad()
    def compute_logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs and (if `calculate_entropy`, else None) entropy of the response
        tokens: float32 [B, R] each, in the caller's row order whatever the micro-batching
        did; with routing replay R2, the routes the pass recorded."""
        shape = batch["response_mask"].shape
        logprobs = torch.zeros(shape)
        entropy = torch.zeros(shape) if calculate_entropy else None
        routes = RecordedRoutes(*batch["input_ids"].shape)
        for rows, output in self._forward_rows(batch, calculate_entropy):
            logprobs[rows] = output.logprobs.cpu()
            if entropy is not None:
                entropy[rows] = output.entropy.cpu()
            routes.add(rows, output.routed_experts)
        return LogprobOutput(logprobs, entropy, routes.routes)

    @torch.no_grad()
    def compute_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Critic values of the response positions: float32 [B, R], in the caller's order."""
        values = torch.zeros(batch["response_mask"].shape)
        for rows, output in self._forward_rows(batch, False):
            values[rows] = output.cpu()
        return values

    # --- update -------------------------------------------------------------------

    def train_step(self, batch: Mapping[str, torch.Tensor], loss_fn: LossFn) -> dict[str, float]:
        """`ppo_epochs` passes of mini-batch updates; returns metrics averaged over them.

        `loss_fn(output, micro_batch, mini_batch) -> (loss, metrics)` must normalise
        by the mini-batch so that micro-batch losses add up to the mini-batch loss.

        With several data-parallel ranks, every rank gets the whole `batch` and draws
        the same mini-batches; each takes its token-balanced share of a mini-batch
        (`data_parallel_rows`) while `loss_fn` still normalises by the whole one, and
        the gradients, which FSDP averages over ranks, are summed instead: the update
        is the one a single rank makes on the same batch. Metrics are this rank's.
        """
        assert self.optimizer is not None and self.lr_scheduler is not None
        scheduler = self.lr_scheduler
        self._set_training(True)
        with replay_session(self.model, self.router_replay):  # routes left for no one after
            return mini_batch_updates(
                mini_batches(
                    batch, self.mini_batch_size, self.ppo_epochs, self.shuffle, self.generator
                ),
                lambda mini: self._optimizer_step(to_device(mini, self.device), loss_fn),
                "critic" if self.role == "critic" else "actor",
                lambda: scheduler.get_last_lr()[0],
                scheduler.step,
                self._weight_norm,
            )

    def _all_reduce(self, values: torch.Tensor, op: str) -> torch.Tensor:
        """`values` summed (or maxed) over every rank."""
        on_device = values.to(self.device) if self.device.type == "cuda" else values.clone()
        reduce_op = dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX
        dist.all_reduce(on_device, op=reduce_op)
        return on_device.cpu()

    def _trained_parameters(self) -> list[torch.Tensor]:
        """The optimizer's parameters: the model's, without walking its modules."""
        assert self.optimizer is not None
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    @torch.no_grad()
    def _weight_norm(self) -> float:
        norm = torch.nn.utils.get_total_norm(self._trained_parameters())
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def _optimizer_step(
        self, mini: Mapping[str, torch.Tensor], loss_fn: LossFn
    ) -> dict[str, float]:
        assert self.optimizer is not None and self.optim_config is not None
        self.optimizer.zero_grad(set_to_none=True)
        step_metrics: dict[str, list[float]] = defaultdict(list)
        prefix = "critic" if self.role == "critic" else "actor"
        mine = data_parallel_rows(mini["attention_mask"].cpu(), self.dp_size)[self.dp_rank]
        local = select(mini, mine.to(self.device))
        for rows in micro_batch_rows(local["attention_mask"], self.train_batching):
            if not rows.numel():
                continue
            micro = select(local, rows.to(self.device))
            if self.share_prompts:
                step_metrics["prompt_tokens_shared"].append(shared_prompt_fraction(micro))
            step_metrics[TOKENS].append(float(micro["response_mask"].sum()))
            loss, metrics = loss_fn(self._forward(micro, True), micro, mini)
            # FSDP averages over all ranks; each rank's loss is its share (a sequence-parallel
            # group's ranks each backpropagate their slice of the same share)
            shared = loss * self.loss_scale
            (shared if self.grad_scaler is None else self.grad_scaler.scale(shared)).backward()
            # the mini-batch loss: micro-batch shares add up, over ranks too
            step_metrics[f"{prefix}/loss"].append(float(loss.detach()))
            for key, value in metrics.items():
                step_metrics[key].append(float(value))
        if self.grad_scaler is not None:  # the true gradients, before clipping
            self.grad_scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self._trained_parameters(), self.optim_config.grad_clip
        )
        grad_norm = float(
            grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        )
        if math.isfinite(grad_norm):
            if self.grad_scaler is None:
                self.optimizer.step()
            else:
                self.grad_scaler.step(self.optimizer)
        if self.grad_scaler is not None:  # back off after an overflow, grow after a run
            self.grad_scaler.update()
        # the whole mini-batch's metrics, over micro-batches and ranks (`step_metrics`);
        # loss functions may already name them ("actor/pg_loss"), others get the role
        averaged = step_metrics_of(
            step_metrics,
            prefix,
            self._all_reduce if self.world_size > 1 else None,
            duplicates=self.world_size // self.dp_size,
        )
        averaged[f"{prefix}/grad_norm"] = grad_norm
        averaged[f"{prefix}/skipped_steps"] = float(not math.isfinite(grad_norm))
        if self.grad_scaler is not None:
            averaged[f"{prefix}/grad_scale"] = float(self.grad_scaler.get_scale())
        return averaged

    # --- weights and checkpoints --------------------------------------------------

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full (unsharded) tensors under their Hugging Face names, one at a time; a tied
        parameter once, under its first name (`model.embed_tokens.weight`, no
        `lm_head.weight`), as `save_pretrained` writes it.

        Each is all-gathered when it is reached, so every rank must iterate in step and
        gets every tensor (a rollout replica per rank loads from it); at most one
        unsharded parameter is alive at a time besides what the consumer keeps.
        """
        with torch.no_grad():
            named = (
                (name, tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor)
                for name, tensor in without_aliases(self.model.state_dict().items(), self.tied)
            )
            if self.lora is not None:  # W + (alpha/r) B A under the base names
                from rl.core.models.lora import merged_weights

                named = merged_weights(named, self.lora.scaling)
            for name, full in named:
                yield name, full.detach()

    @property
    def exports_views(self) -> bool:
        """Whether `export_weights` yields the live parameters themselves (a plain model,
        not sharded by FSDP2): a rollout engine in this process may then share them. Not
        with LoRA: the merged weights it yields are copies, made at each export."""
        return self._plain and self.lora is None

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights (e.g. the reference from the warm-started actor); a tied
        parameter comes under its first name (as `export_weights` yields it)."""
        full = with_aliases(dict(named_tensors), self.tied)
        if self.lora is not None:  # into the base weights; the adapters stay as they are
            from rl.core.models.lora import base_weights

            full = base_weights(self.model, full)
            options = StateDictOptions(full_state_dict=True, cpu_offload=True, strict=False)
            set_model_state_dict(self.model, full, options=options)
            return
        set_model_state_dict(self.model, full, options=FULL)

    def save(self, path: str) -> None:
        """Sharded: each rank writes its shards of the weights and optimizer state to
        `path`/dcp (torch.distributed.checkpoint, tensors only); rank 0 writes the rest
        (LR schedule, optimizer hyper-parameters, sampling generator) to `path`/state.pt.
        Loads at any world size (`load` reshards), and `rl merge` makes a Hugging Face
        folder of it. Nothing in it is unpickled as code (`rl.core.sharded_io`)."""
        folder = Path(path)
        tensors: dict[str, Any] = {"model": self._model_state()}
        state: dict[str, Any] = {"generator": self.generator.get_state()}
        if self.optimizer is not None and self.lr_scheduler is not None:
            # gradients left by a skipped step (a non-finite norm) would keep torch from
            # building the Adam state a run that never stepped still has to write: the
            # next step zeroes them first anyway
            self.optimizer.zero_grad(set_to_none=True)
            optim = get_optimizer_state_dict(self.model, self.optimizer)
            tensors["optimizer"] = optim["state"]
            state["param_groups"] = optim["param_groups"]
            state["lr_scheduler"] = self.lr_scheduler.state_dict()
        if self.grad_scaler is not None:
            state["grad_scaler"] = self.grad_scaler.state_dict()
        save_sharded(tensors, folder / "dcp")
        if self.rank == 0:
            save_state(state, folder / "state.pt")
        if self.world_size > 1:
            dist.barrier()  # no rank reads the folder before it is written

    def load(self, path: str) -> None:
        folder = Path(path)
        tensors: dict[str, Any] = {"model": self._model_state()}
        if self.optimizer is not None:
            tensors["optimizer"] = get_optimizer_state_dict(self.model, self.optimizer)["state"]
        load_sharded(tensors, folder / "dcp")
        set_model_state_dict(self.model, with_aliases(tensors["model"], self.tied))
        state = load_state(folder / "state.pt")
        self.generator.set_state(state["generator"])
        if self.optimizer is not None and self.lr_scheduler is not None:
            set_optimizer_state_dict(
                self.model,
                self.optimizer,
                {"state": tensors["optimizer"], "param_groups": state["param_groups"]},
            )
            resume_schedule(
                self.optimizer, self.lr_scheduler, state["lr_scheduler"], self._hyperparameters
            )
        if self.grad_scaler is not None and "grad_scaler" in state:
            self.grad_scaler.load_state_dict(state["grad_scaler"])

    def _model_state(self) -> dict[str, Any]:
        """The (sharded) model state dict with each tied parameter once: checkpoints hold
        it once (one written before ties were skipped loads too: its copy goes unread)."""
        return dict(without_aliases(get_model_state_dict(self.model).items(), self.tied))

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder loadable with `AutoModelForCausalLM.from_pretrained`; a tied
        model's shared tensor is written once (the config keeps `tie_word_embeddings`)."""
        if self.lora is not None:
            self._save_adapter(path, tokenizer)
            return
        state = get_model_state_dict(self.model, options=FULL)  # every rank gathers
        # gathered separately, tied names are two tensors: save_pretrained would write both
        state = dict(without_aliases(state.items(), self.tied))
        if self.rank == 0:
            self.model.save_pretrained(path, state_dict=state)
            if tokenizer is not None:
                tokenizer.save_pretrained(path)
            follow_umask(path)  # safetensors writes its files 0600
        if self.world_size > 1:
            dist.barrier()

    def _save_adapter(self, path: str, tokenizer: Any = None) -> None:
        """LoRA: the adapter alone in PEFT's format in `path` (`PeftModel.from_pretrained`
        on the base folder loads it), and with `model.lora_save_merged` the merged model
        as a Hugging Face folder in `path`/merged."""
        from rl.core.models.lora import adapter_state, merged_weights, save_adapter, save_merged

        assert self.lora is not None
        state = get_model_state_dict(self.model, options=FULL)  # every rank gathers, once
        if self.rank == 0:
            save_adapter(path, self.lora, adapter_state(state.items()))
            if tokenizer is not None:
                tokenizer.save_pretrained(path)
            if self.lora_save_merged:  # from the same gathered state
                named = without_aliases(state.items(), self.tied)
                merged = dict(merged_weights(named, self.lora.scaling))
                save_merged(self.model, merged, Path(path) / "merged", tokenizer)
            follow_umask(path)
        if self.world_size > 1:
            dist.barrier()

    # --- LoRA: the reference is this model with its adapters off -----------------

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

    @classmethod
    def offload_keys(cls, config: Config, role: str) -> tuple[str, ...]:
        """`<section>.fsdp_config.param_offload` / `optimizer_offload` where they are on
        (the reference uses the actor's section)."""
        section = "critic" if role == "critic" else "actor"
        fsdp = config.critic.fsdp_config if section == "critic" else config.actor.fsdp_config
        keys = ("param_offload", "optimizer_offload")
        return tuple(f"{section}.fsdp_config.{key}" for key in keys if getattr(fsdp, key))

    @property
    def offloads(self) -> bool:
        """Whether this engine steps aside for colocated roles (`fsdp_config.param_offload`
        / `optimizer_offload`)."""
        return self.fsdp.param_offload or self.fsdp.optimizer_offload

    def offload(self) -> None:
        """Move weights and optimizer state to CPU while another role uses the device
        (only what `fsdp_config.param_offload` / `optimizer_offload` name, when either is
        set; both otherwise)."""
        self._move(torch.device("cpu"))

    def onload(self) -> None:
        self._move(self.device)

    def _move(self, device: torch.device) -> None:
        if self.device.type == "cpu" or self.fsdp.offload_policy:
            return  # nothing on an accelerator (the offload policy keeps shards on CPU)
        either = self.fsdp.param_offload or self.fsdp.optimizer_offload
        if self.fsdp.param_offload or not either:
            self.model.to(device)
        if self.optimizer is not None and (self.fsdp.optimizer_offload or not either):
            for state in self.optimizer.state.values():
                for key, value in state.items():
                    if isinstance(value, torch.Tensor):
                        state[key] = value.to(device, non_blocking=True)


def tied_lookup_gradient(model: torch.nn.Module, vocab_size: int) -> bool:
    """At a real vocabulary (from `FUSED_VOCAB_ON_CPU` tokens) a tied embedding's lookup
    adds its gradient rows into the shared weight's `.grad` in place
    (`rl.fsdp.tied_lookup`): no second or third [vocab, hidden] tensor in backward. Only
    for plain (unsharded) parameters; returns whether it applies."""
    return vocab_size >= FUSED_VOCAB_ON_CPU and rows_into_gradient(model)


def adamw_implementation(
    model: torch.nn.Module, trained: list[torch.Tensor] | None = None, scaled: bool = False
) -> dict[str, bool]:
    """torch's fused AdamW where every parameter is a plain floating tensor (one kernel
    over all of them instead of a Python loop per parameter), the foreach one for FSDP2's
    DTensors (torch picks it by itself on GPU only; on CPU it would loop per parameter,
    each op through DTensor's dispatch). Same update within fp32 rounding (tested). With a
    gradient scaler (`scaled`) foreach too: the fused kernel takes the scaler's overflow
    flag as a 0-d tensor, ShardedGradScaler's is [1]."""
    params = list(model.parameters()) if trained is None else trained
    floating = all(p.dtype in (torch.float32, torch.float16, torch.bfloat16) for p in params)
    if floating and all(type(p) is torch.nn.Parameter for p in params):
        return {"foreach": True} if scaled else {"fused": True}
    if floating and all(hasattr(p, "full_tensor") for p in params):
        return {"foreach": True}
    return {}


MEGATRON_SCHEDULE_KEYS = (
    "lr_warmup_init",
    "lr_decay_steps",
    "lr_wsd_decay_style",
    "weight_decay_incr_style",
    "use_checkpoint_opt_param_scheduler",
)


def _refuse_megatron_schedule_keys(optim: OptimConfig, section: str) -> None:
    """Schedule keys only the megatron engine reads: an error rather than silence."""
    default = OptimConfig()
    for key in MEGATRON_SCHEDULE_KEYS:
        if getattr(optim, key) != getattr(default, key):
            from rl.core.config import ConfigError

            raise ConfigError(
                f"{section}.optim.{key} = {getattr(optim, key)!r} is read by the megatron "
                f"engine only ({section}.strategy=megatron); the FSDP engine's schedule is "
                "lr_scheduler / lr_warmup_steps / min_lr_ratio / wsd_decay_ratio"
            )
