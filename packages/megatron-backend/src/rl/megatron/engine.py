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
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

from rl.core.batch import select, to_device
from rl.core.checkpoint_io import load_state, save_state
from rl.core.config import Config, ConfigError, OptimConfig
from rl.core.config.megatron import MegatronConfig
from rl.core.distributed import ensure_process_group
from rl.core.engines import LogprobOutput, LossFn
from rl.core.errors import CheckpointError
from rl.core.micro_batches import (
    MicroBatching,
    micro_batch_rows,
    micro_batching,
    mini_batches,
)
from rl.core.optim import warmup_steps
from rl.core.workers.dispatch import data_parallel_rows
from rl.megatron.convert import load_dist_model
from rl.megatron.inputs import model_inputs
from rl.megatron.layouts import converter_for
from rl.megatron.logprobs import response_logprobs, response_values, run_model, unwrap
from rl.megatron.model import build_gpt_model, resolve_spec, transformer_config
from rl.megatron.parallel import check_layout, init_model_parallel
from rl.megatron.slices import load_hf_slices
from rl.megatron.weights import (
    export_hf,
    export_plan,
    initial_value_head,
    load_hf,
    set_value_head,
)

Role = Literal["actor", "ref", "critic"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PADDING = "_padding"  # marks the results of a micro-batch the schedule ran only to fill it
DECAY_STYLES = {"constant": "constant", "cosine": "cosine", "linear": "linear", "wsd": "WSD"}


def _known(cls: type, values: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`values` if every key is a field of the megatron dataclass `cls`, else ConfigError."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(
            f"{key}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
            f"{cls.__name__} field(s) of megatron-core"
        )
    return dict(values)


class MegatronTrainEngine:
    """One model on megatron-core with (for the actor and critic) its optimizer and LR
    schedule. It starts from `hf_folder` (a Hugging Face safetensors folder, of which each
    rank reads only its slices) or, without one, from the tensors `hf_weights()` streams
    (a built-in model); `megatron.use_dist_checkpointing` overrides both."""

    def __init__(
        self,
        hf_config: Any,
        hf_weights: Callable[[], Iterable[tuple[str, torch.Tensor]]],
        role: Role,
        megatron: MegatronConfig | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        optim: OptimConfig | None = None,
        total_steps: int = 1,
        mini_batch_size: int = 8,
        ppo_epochs: int = 1,
        shuffle: bool = False,
        temperature: float = 1.0,
        seed: int = 0,
        use_remove_padding: bool = True,
        train_batching: MicroBatching | None = None,
        forward_batching: MicroBatching | None = None,
        section: str = "actor",
        hf_folder: Path | None = None,
    ) -> None:
        self.role, self.section = role, section
        self.device = torch.device(device)
        self.m = megatron or MegatronConfig()
        ensure_process_group(self.device.type)
        check_layout(hf_config, self.m, dist.get_world_size(), section, use_remove_padding)
        init_model_parallel(self.m)
        from megatron.core import parallel_state as ps

        self.ps = ps
        self.packed = use_remove_padding
        self.dtype = DTYPES[self.m.dtype or dtype]
        self.spec = resolve_spec("auto")
        self.hf_config = hf_config
        self.converter = converter_for(hf_config, spec=self.spec)
        with torch.random.fork_rng(devices=[]):  # the random init is overwritten below;
            self.chunks = self._build(hf_config)  # the run's random stream stays untouched
        self._export_plans: list[list[tuple[str, int]]] | None = None
        self._offloaded: list[Any] = []  # what `offload` released, in order
        self.weights_read: list[tuple[str, tuple[int, ...]]] = []  # HF blocks read (slices)
        critic, head = role == "critic", partial(initial_value_head, hf_config, seed)
        for chunk in self.chunks:  # each virtual stage takes its own layers
            model = unwrap(chunk)
            if self.m.use_dist_checkpointing:  # resharded to this layout as it loads
                path = str(self.m.dist_checkpointing_path)
                if not load_dist_model(model, path, critic=critic):
                    set_value_head(dict(model.named_parameters()), head())
            elif hf_folder is not None:
                self.weights_read += load_hf_slices(model, self.converter, hf_folder, critic, head)
            else:
                load_hf(model, self.converter, hf_weights(), critic, head)
        self.dp_size = ps.get_data_parallel_world_size()
        self.dp_rank = ps.get_data_parallel_rank()
        self.mini_batch_size, self.ppo_epochs, self.shuffle = mini_batch_size, ppo_epochs, shuffle
        self.temperature = temperature
        self.train_batching = train_batching or MicroBatching(rows=8)
        self.forward_batching = forward_batching or self.train_batching
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer: Any = None
        self.lr_scheduler: Any = None
        if role == "ref":
            for chunk in self.chunks:
                chunk.requires_grad_(False)
        else:
            assert optim is not None, f"the {role} engine needs an optimizer config"
            self._make_optimizer(optim, total_steps)

    # --- building -------------------------------------------------------------------

    def _transformer_overrides(self) -> dict[str, Any]:
        from megatron.core.transformer import TransformerConfig

        m, tp = self.m, self.m.tensor_model_parallel_size
        options: dict[str, Any] = dict(
            tensor_model_parallel_size=tp,
            pipeline_model_parallel_size=m.pipeline_model_parallel_size,
            virtual_pipeline_model_parallel_size=m.virtual_pipeline_model_parallel_size,
            context_parallel_size=m.context_parallel_size,
            sequence_parallel=m.sequence_parallel and tp > 1,
            expert_model_parallel_size=m.expert_model_parallel_size,
            expert_tensor_parallel_size=m.expert_tensor_parallel_size or tp,
            # packed micro-batches differ in length: pipeline stages send shapes first
            variable_seq_lengths=m.pipeline_model_parallel_size > 1,
            pipeline_dtype=self.dtype,
            bf16=self.dtype == torch.bfloat16,
            fp16=self.dtype == torch.float16,
            use_cpu_initialization=self.device.type != "cuda",
        )
        # ranks' micro-batches differ in tokens; megatron's (default) allgather dispatcher
        # assumes they do not (dense models ignore the setting)
        options["moe_token_dispatcher_type"] = "alltoall"
        key = f"{self.section}.megatron.override_transformer_config"
        options.update(_known(TransformerConfig, m.override_transformer_config, key))
        dispatcher = options.get("moe_token_dispatcher_type")
        if dispatcher == "allgather" and m.expert_model_parallel_size > 1:
            raise ConfigError(
                f"{key}.moe_token_dispatcher_type = 'allgather' gathers equal token counts from "
                "every expert-parallel rank, but RL micro-batches differ in length: use alltoall"
            )
        return options

    def _build(self, hf_config: Any) -> list[torch.nn.Module]:
        """This rank's model chunks (one per virtual pipeline stage), wrapped for training."""
        ps = self.ps
        vpp = self.m.virtual_pipeline_model_parallel_size
        overrides = self._transformer_overrides()
        self.tf_config = transformer_config(hf_config, self.dtype, **overrides)
        chunks = []
        for stage in range(vpp or 1):
            vp_stage = stage if vpp else None
            model = build_gpt_model(
                hf_config,
                spec=self.spec,
                params_dtype=self.dtype,
                pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
                post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
                vp_stage=vp_stage,
                value_head=self.role == "critic",
                **overrides,
            ).to(self.device)
            if self.dtype != torch.float32:
                from megatron.core.transformer.module import Float16Module

                model = Float16Module(model.config, model)
            chunks.append(model)
        return chunks

    def _make_optimizer(self, optim: OptimConfig, total_steps: int) -> None:
        from megatron.core.distributed import (
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
        from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

        m = self.m
        key = f"{self.section}.megatron.override_ddp_config"
        ddp_config = DistributedDataParallelConfig(
            **{
                "grad_reduce_in_fp32": True,
                "use_distributed_optimizer": m.use_distributed_optimizer,
                **_known(DistributedDataParallelConfig, m.override_ddp_config, key),
            }
        )
        self.chunks = [
            DistributedDataParallel(self.tf_config, ddp_config, chunk, disable_bucketing=i > 0)
            for i, chunk in enumerate(self.chunks)
        ]
        beta1, beta2 = optim.betas
        self.optimizer = get_megatron_optimizer(
            OptimizerConfig(
                optimizer="adam",
                lr=optim.lr,
                min_lr=optim.min_lr_ratio * optim.lr,
                weight_decay=optim.weight_decay,
                adam_beta1=beta1,
                adam_beta2=beta2,
                clip_grad=optim.grad_clip,
                bf16=self.dtype == torch.bfloat16,
                fp16=self.dtype == torch.float16,
                params_dtype=self.dtype,
                use_distributed_optimizer=m.use_distributed_optimizer,
            ),
            self.chunks,
        )
        config = self.tf_config
        config.finalize_model_grads_func = finalize_model_grads
        config.grad_scale_func = self.optimizer.scale_loss
        no_sync = [chunk.no_sync for chunk in self.chunks]
        config.no_sync_func = no_sync[0] if len(no_sync) == 1 else no_sync
        if ddp_config.overlap_param_gather and m.use_distributed_optimizer:
            syncs = [chunk.start_param_sync for chunk in self.chunks]
            config.param_sync_func = syncs[0] if len(syncs) == 1 else syncs
        warmup = warmup_steps(optim, total_steps)
        decay_steps = optim.lr_decay_steps or max(total_steps, warmup + 1)
        self.lr_scheduler = OptimizerParamScheduler(
            self.optimizer,
            init_lr=optim.lr_warmup_init,
            max_lr=optim.lr,
            min_lr=optim.min_lr_ratio * optim.lr,
            lr_warmup_steps=warmup,
            lr_decay_steps=decay_steps,
            lr_decay_style=DECAY_STYLES[optim.lr_scheduler],
            start_wd=optim.weight_decay,
            end_wd=optim.weight_decay,
            wd_incr_steps=max(total_steps, 1),
            wd_incr_style=optim.weight_decay_incr_style,
            use_checkpoint_opt_param_scheduler=optim.use_checkpoint_opt_param_scheduler,
            override_opt_param_scheduler=not optim.use_checkpoint_opt_param_scheduler,
            wsd_decay_steps=int(optim.wsd_decay_ratio * decay_steps)
            if optim.lr_scheduler == "wsd"
            else None,
            lr_wsd_decay_style=optim.lr_wsd_decay_style,
        )

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
    ) -> MegatronTrainEngine:
        """Build the `role` engine from config (`actor.*`, or `section`); the reference
        uses the actor's `megatron` layout."""
        from rl.core.models import load_model_config

        name = "critic" if role == "critic" else "actor"
        if section is None:
            section = config.critic if role == "critic" else config.actor
        _refuse_prefix_grouper(section, name)
        train, forward = micro_batching(config, role, section)
        return cls(
            load_model_config(config.model, tokenizer),
            partial(hf_weights, config, tokenizer, role == "critic"),
            role,
            megatron=(config.critic if role == "critic" else config.actor).megatron,
            device=config.trainer.device,
            dtype=config.model.dtype,
            optim=None if role == "ref" else section.optim,
            total_steps=total_steps,
            mini_batch_size=section.ppo_mini_batch_size * responses_per_prompt,
            ppo_epochs=section.ppo_epochs,
            shuffle=getattr(section, "shuffle", False),
            temperature=config.rollout.temperature if temperature is None else temperature,
            seed=config.trainer.seed,
            use_remove_padding=section.use_remove_padding,
            train_batching=train,
            forward_batching=forward,
            section=name,
            hf_folder=hf_folder(config),
        )

    @classmethod
    def preflight(cls, config: Config, role: str) -> None:
        """The layout against the model's shapes and the world, before any process starts."""
        from rl.core.models import load_model_config, load_tokenizer

        world = 1
        if config.trainer.launcher == "ray":
            from rl.core.workers.launch import ray_world

            world = ray_world(config)[0]
        hf_config = load_model_config(config.model, load_tokenizer(config.model))
        section = getattr(config, role)
        _refuse_prefix_grouper(section, role)
        check_layout(hf_config, section.megatron, world, role, section.use_remove_padding)

    @classmethod
    def replica_size(cls, config: Config, role: str) -> int:
        """Consecutive ranks that hold one model copy between them and share its rows."""
        return (config.critic if role == "critic" else config.actor).megatron.model_parallel_size

    # --- forward ----------------------------------------------------------------------

    @property
    def _align(self) -> int:
        """Packed sequences' lengths are padded to a multiple of this (megatron's THD rule)."""
        tp, cp = self.m.tensor_model_parallel_size, self.m.context_parallel_size
        sp = self.tf_config.sequence_parallel
        return (tp if sp else 1) * (2 * cp if cp > 1 else 1)

    def _schedule(
        self,
        micros: list[Mapping[str, torch.Tensor]],
        forward_only: bool,
        last_stage: Callable[[Mapping[str, torch.Tensor], Any], tuple[Any, dict]],
        with_entropy: bool = True,
    ) -> list[dict[str, Any]]:
        """Run `micros` through megatron's pipeline schedule; `last_stage(micro, output)`
        turns the last stage's output (`LogprobOutput`, with entropy if `with_entropy`, or a
        critic's values [B, R]) into (loss, results). Returns the last stage's results per
        micro-batch (empty on other stages).

        The interleaved schedule needs at least PP micro-batches: fewer are padded with
        copies of the last, whose loss is multiplied by 0 and whose results are dropped
        (megatron divides each loss by `scheduled(len(micros))`, the padded count)."""
        from megatron.core.pipeline_parallel import get_forward_backward_func

        pairs = [(micro, True) for micro in micros]
        if micros:
            pairs += [(micros[-1], False)] * (self.scheduled(len(micros)) - len(micros))
        if len(self.chunks) > 1:
            group = interleaving_group(len(pairs), self.m.pipeline_model_parallel_size)
            for chunk in self.chunks:  # the schedule reads the first chunk's config
                chunk.config.microbatch_group_size_per_vp_stage = group

        def forward_step(data_iterator: Any, model: torch.nn.Module) -> Any:
            micro, real = next(data_iterator)
            inputs = model_inputs(micro, self.packed, self._align)
            hidden = run_model(model, inputs)

            def finish(output_tensor: torch.Tensor) -> Any:
                if self.role == "critic":
                    output: Any = response_values(model, output_tensor, inputs, micro)
                else:
                    output = LogprobOutput(
                        *response_logprobs(
                            model, output_tensor, inputs, micro, self.temperature, with_entropy
                        )
                    )
                loss, results = last_stage(micro, output)
                return (loss, results) if real else (loss * 0, {PADDING: True})

            return hidden, finish

        # interleaved schedules pull micro-batches per model chunk: each gets all of them
        iterators: Any = (
            iter(pairs) if len(self.chunks) == 1 else [iter(pairs) for _ in self.chunks]
        )
        results = get_forward_backward_func()(
            forward_step_func=forward_step,
            data_iterator=iterators,
            model=self.chunks if len(self.chunks) > 1 else self.chunks[0],
            num_microbatches=len(pairs),
            seq_length=1,  # variable_seq_lengths: shapes travel with the tensors
            micro_batch_size=1,
            forward_only=forward_only,
        )
        return [result for result in results if PADDING not in result]

    def scheduled(self, micro_batches: int) -> int:
        """How many micro-batches the schedule runs for `micro_batches` (see `_schedule`)."""
        if len(self.chunks) > 1:
            return max(micro_batches, self.m.pipeline_model_parallel_size)
        return micro_batches

    def _micro_batches(
        self, batch: Mapping[str, torch.Tensor], spec: MicroBatching
    ) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
        group = self.ps.get_data_parallel_group()
        parts = micro_batch_rows(batch["attention_mask"], spec, group=group)
        return [(rows, to_device(select(batch, rows), self.device)) for rows in parts]

    @torch.no_grad()
    def compute_logprobs(
        self, batch: Mapping[str, torch.Tensor], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs and (if `calculate_entropy`, else None) entropy of the response
        tokens: float32 [B, R] each, in the caller's order (every rank of a model copy
        returns them)."""
        names = ("logprobs", "entropy") if calculate_entropy else ("logprobs",)
        out = self._forward_only(
            batch, lambda o: {name: getattr(o, name) for name in names}, calculate_entropy
        )
        return LogprobOutput(out["logprobs"], out.get("entropy"))

    def _forward_only(
        self,
        batch: Mapping[str, torch.Tensor],
        pick: Callable[[Any], dict[str, torch.Tensor]],
        with_entropy: bool = True,
    ) -> dict[str, torch.Tensor]:
        """The last stage's outputs, `pick`ed by name, as float32 [B, R] each in the
        caller's row order, on every rank (forward-only, `forward_batching`)."""
        for chunk in self.chunks:
            chunk.eval()
        micros = [
            (rows, micro)
            for rows, micro in self._micro_batches(batch, self.forward_batching)
            if rows.numel()
        ]
        results = self._schedule(
            [micro for _, micro in micros],
            True,
            lambda micro, output: (torch.zeros((), device=self.device), pick(output)),
            with_entropy,
        )
        names = ["values"] if self.role == "critic" else ["logprobs", "entropy"]
        names = names if with_entropy else names[:1]
        out = {name: torch.zeros(batch["response_mask"].shape) for name in names}
        if self.ps.is_pipeline_last_stage(ignore_virtual=True):
            for (rows, _), result in zip(micros, results, strict=True):
                for name in names:
                    out[name][rows] = result[name].float().cpu()
        self._from_last_stage(*out.values())
        return out

    def _from_last_stage(self, *tensors: torch.Tensor) -> None:
        """Every pipeline stage gets the last stage's results (in place)."""
        if self.ps.get_pipeline_model_parallel_world_size() == 1:
            return
        group = self.ps.get_pipeline_model_parallel_group()
        last = self.ps.get_pipeline_model_parallel_last_rank()
        for tensor in tensors:
            on_device = tensor.to(self.device)
            dist.broadcast(on_device, src=last, group=group)
            tensor.copy_(on_device.cpu())

    def compute_values(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """A critic's values of the response positions: float32 [B, R], in the caller's
        order (every rank of a model copy returns them)."""
        assert self.role == "critic", f"compute_values on the {self.role} engine"
        with torch.no_grad():
            return self._forward_only(batch, lambda values: {"values": values})["values"]

    # --- update -------------------------------------------------------------------------

    def train_step(self, batch: Mapping[str, torch.Tensor], loss_fn: LossFn) -> dict[str, float]:
        """`ppo_epochs` passes of mini-batch updates; metrics averaged over them (see
        `FSDPTrainEngine.train_step`: the same contract, rank by rank)."""
        assert self.optimizer is not None and self.lr_scheduler is not None
        for chunk in self.chunks:
            chunk.train()
        metrics: dict[str, list[float]] = defaultdict(list)
        for mini in mini_batches(
            batch, self.mini_batch_size, self.ppo_epochs, self.shuffle, self.generator
        ):
            for key, value in self._optimizer_step(mini, loss_fn).items():
                metrics[key].append(value)
        metrics["lr"].append(self.optimizer.param_groups[0]["lr"])
        if min(metrics[f"{self.section}/skipped_steps"]) < 1.0:
            self.lr_scheduler.step(increment=1)
        metrics[f"{self.section}/weight_norm"].append(self._weight_norm())
        return {key: sum(values) / len(values) for key, values in metrics.items()}

    def _optimizer_step(
        self, mini: Mapping[str, torch.Tensor], loss_fn: LossFn
    ) -> dict[str, float]:
        for chunk in self.chunks:
            chunk.zero_grad_buffer()
        self.optimizer.zero_grad()
        mine = data_parallel_rows(mini["attention_mask"].cpu(), self.dp_size)[self.dp_rank]
        local = select(mini, mine)
        micros = [m for rows, m in self._micro_batches(local, self.train_batching) if rows.numel()]
        whole = to_device(mini, self.device)
        # megatron divides each micro-batch loss by their count and DDP averages over the
        # data-parallel ranks; loss_fn's shares already add up to the mini-batch loss
        scale = self.scheduled(len(micros)) * self.dp_size

        def last_stage(micro: Mapping[str, torch.Tensor], output: LogprobOutput) -> Any:
            loss, step_metrics = loss_fn(output, micro, whole)
            reported = {k: float(v) for k, v in step_metrics.items()}
            reported["_loss"] = float(loss.detach())
            return loss * scale, reported

        results = self._schedule(micros, False, last_stage)
        success, grad_norm, _ = self.optimizer.step()
        grad_norm = float("nan") if grad_norm is None else float(grad_norm)
        skipped = not success or not math.isfinite(grad_norm)
        averaged = self._metrics(results)
        averaged[f"{self.section}/grad_norm"] = grad_norm
        averaged[f"{self.section}/skipped_steps"] = float(skipped)
        return averaged

    def _metrics(self, results: list[dict[str, float]]) -> dict[str, float]:
        """The last stage's micro-batch metrics, averaged, on every rank; the loss summed
        over micro-batches and data-parallel ranks (the mini-batch loss)."""
        gathered: list[Any] = [results]
        if self.ps.get_pipeline_model_parallel_world_size() > 1:
            dist.broadcast_object_list(
                gathered,
                src=self.ps.get_pipeline_model_parallel_last_rank(),
                group=self.ps.get_pipeline_model_parallel_group(),
            )
        values: dict[str, list[float]] = defaultdict(list)
        for result in gathered[0]:
            for key, value in result.items():
                values[key].append(value)
        loss = torch.tensor(sum(values.pop("_loss", [])), dtype=torch.float64)
        if self.dp_size > 1:
            on_device = loss.to(self.device)
            dist.all_reduce(on_device, group=self.ps.get_data_parallel_group())
            loss = on_device.cpu()
        out = {
            (k if "/" in k else f"{self.section}/{k}"): sum(v) / len(v) for k, v in values.items()
        }
        out[f"{self.section}/loss"] = float(loss)
        return out

    @torch.no_grad()
    def _weight_norm(self) -> float:
        """The L2 norm of the whole model: each TP shard, pipeline stage and expert once."""
        from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate
        from megatron.core.transformer.module import param_is_not_shared

        dense = torch.zeros((), dtype=torch.float64, device=self.device)
        experts = torch.zeros((), dtype=torch.float64, device=self.device)
        for chunk in self.chunks:
            for param in chunk.parameters():
                if param_is_not_shared(param) and param_is_not_tensor_parallel_duplicate(param):
                    total = experts if not getattr(param, "allreduce", True) else dense
                    total += param.detach().double().pow(2).sum()
        dist.all_reduce(dense, group=self.ps.get_model_parallel_group())
        dist.all_reduce(experts, group=self.ps.get_expert_tensor_model_pipeline_parallel_group())
        return float((dense + experts).sqrt())

    # --- weights ----------------------------------------------------------------------

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors under their Hugging Face names, one at a time, on every rank in the
        same order (each rank feeds its rollout replica): TP shards gathered, pipeline
        stages' and expert ranks' tensors broadcast from their holder."""
        if self._export_plans is None:  # a collective: every rank exports together
            self._export_plans = [export_plan(unwrap(chunk)) for chunk in self.chunks]
        critic = self.role == "critic"
        for chunk, plan in zip(self.chunks, self._export_plans, strict=True):
            yield from export_hf(unwrap(chunk), self.converter, self.device, plan, critic)

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights with full HF-named tensors (the reference from the actor)."""
        tensors = list(named_tensors)
        for chunk in self.chunks:
            load_hf(unwrap(chunk), self.converter, tensors, critic=self.role == "critic")

    # --- checkpoints ----------------------------------------------------------------

    def _sharded_state(self, is_loading: bool = False) -> dict[str, Any]:
        """What megatron's dist-checkpointing saves: each chunk's sharded model state and
        (actor) the optimizer's, sharded as the distributed optimizer holds it."""
        state: dict[str, Any] = {}
        for i, chunk in enumerate(self.chunks):
            state[f"model{i}"] = unwrap(chunk).sharded_state_dict()
        if self.optimizer is not None:
            merged: dict[str, Any] = {}
            for value in state.values():
                merged.update(value)
            # per-bucket optimizer shards: parallel writes, reshardable over DP only (the
            # per-parameter formats fail without TE/Apex in megatron-core 0.16)
            state["optimizer"] = self.optimizer.sharded_state_dict(
                merged,
                is_loading=is_loading,
                metadata={"distrib_optim_sharding_type": "dp_reshardable"},
            )
        return state

    def save(self, path: str) -> None:
        """megatron-core dist-checkpointing into `path`/dist (every rank writes its shards;
        the model loads at another TP/PP layout, the optimizer state at another DP size),
        the rest (LR schedule, Adam step, sampling generator) by rank 0 into
        `path`/state.pt, and the HF config.json (so `rl convert-ckpt --to hf` and
        `use_dist_checkpointing` read the folder). A failed write is an OSError."""
        from megatron.core import dist_checkpointing
        from rl.megatron.compat import adam_step

        folder = Path(path)
        (folder / "dist").mkdir(parents=True, exist_ok=True)
        try:
            dist_checkpointing.save(self._sharded_state(), str(folder / "dist"))
        except Exception as error:  # CheckpointingException wraps the OS's error
            if isinstance(error, OSError):
                raise
            raise OSError(f"megatron checkpoint write to {folder} failed: {error}") from error
        if dist.get_rank() == 0:
            self.hf_config.save_pretrained(folder)  # `rl convert-ckpt --to hf` reads it
            state: dict[str, Any] = {"generator": self.generator.get_state()}
            if self.lr_scheduler is not None:
                state["lr_scheduler"] = self.lr_scheduler.state_dict()
                state["adam_step"] = adam_step(self.optimizer)
            save_state(state, folder / "state.pt")
        dist.barrier()

    def load(self, path: str) -> None:
        from megatron.core import dist_checkpointing
        from rl.megatron.compat import fresh_adam_state, set_adam_steps

        folder = Path(path)
        with fresh_adam_state(self.optimizer):
            sharded = self._sharded_state(is_loading=True)
        from torch.distributed.checkpoint.api import CheckpointException  # a BaseException

        try:
            loaded = dist_checkpointing.load(sharded, str(folder / "dist"))
        except (Exception, CheckpointException) as error:  # megatron's, DCP's or the OS's
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CheckpointError(
                f"{folder / 'dist'} is not a readable megatron checkpoint of this model and "
                f"layout ({type(error).__name__}: {reason[:300]}); resume from an earlier one"
            ) from error
        for i, chunk in enumerate(self.chunks):
            unwrap(chunk).load_state_dict(loaded[f"model{i}"])
        state = load_state(folder / "state.pt")
        if self.optimizer is not None:
            with torch.no_grad():
                self.optimizer.load_state_dict(loaded["optimizer"])
            set_adam_steps(self.optimizer, state.get("adam_step"))
        self.generator.set_state(state["generator"])
        if self.lr_scheduler is not None:
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder (safetensors, the model's config) from the exported
        weights; a critic's loads with `AutoModelForTokenClassification` (`num_labels` 1)."""
        tensors = {name: t.cpu().contiguous() for name, t in self.export_weights()}
        if dist.get_rank() == 0:
            from safetensors.torch import save_file

            folder = Path(path)
            folder.mkdir(parents=True, exist_ok=True)
            hf_config = self.hf_config
            if self.role == "critic":
                hf_config = copy.deepcopy(hf_config)
                hf_config.num_labels = 1
                hf_config.architectures = [_token_classification_class(hf_config)]
            hf_config.save_pretrained(folder)
            save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)
        dist.barrier()

    @property
    def offloads(self) -> bool:
        """Whether this engine steps aside for colocated roles (`megatron.*_offload`)."""
        m = self.m
        return m.param_offload or (
            self.optimizer is not None and (m.grad_offload or m.optimizer_offload)
        )

    def offload(self) -> None:
        """Release the device memory `megatron.param_offload` / `grad_offload` /
        `optimizer_offload` name (see `rl.megatron.offload`; weights and optimizer state
        wait on the host, gradients are dropped)."""
        from rl.megatron.offload import (
            Offloaded,
            gradient_storages,
            optimizer_storages,
            parameter_storages,
        )

        if self._offloaded:
            return
        params = parameter_storages(self.chunks)
        grads = gradient_storages(self.chunks)
        if self.optimizer is not None and self.m.optimizer_offload:
            owned = optimizer_storages(self.optimizer, exclude=[*params, *grads])
            self._offloaded.append(Offloaded.release(owned.values()))
        if self.m.grad_offload:
            self._offloaded.append(Offloaded.release(grads.values(), keep_contents=False))
        if self.m.param_offload:
            self._offloaded.append(Offloaded.release(params.values()))
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def onload(self) -> None:
        """Bring back what `offload` released."""
        while self._offloaded:
            self._offloaded.pop().restore()


def _refuse_prefix_grouper(section: Any, name: str) -> None:
    """Shared prompts are rl-fsdp's (megatron packs each row whole)."""
    if getattr(section, "use_prefix_grouper", None):
        raise ConfigError(
            f"{name}.use_prefix_grouper = true is not supported with {name}.strategy=megatron "
            "(rl-fsdp shares prompts; megatron packs each row whole): set it to null or false"
        )


def interleaving_group(micro_batches: int, pp: int) -> int:
    """The number of consecutive micro-batches each virtual stage runs before the next
    (megatron's `microbatch_group_size_per_vp_stage`): the smallest in [PP, M] whose
    remainder megatron accepts (0, or at least PP)."""
    for group in range(pp, micro_batches + 1):
        remainder = micro_batches % group
        if remainder == 0 or remainder >= pp:
            return group
    raise ValueError(f"{micro_batches} micro-batches < PP {pp}")


def hf_folder(config: Config) -> Path | None:
    """`model.path` when it is a folder of safetensors files (read slice by slice)."""
    from rl.core.models import model_source

    source = model_source(config.model)
    if source is not None and any(Path(source).glob("*.safetensors")):
        return Path(source)
    return None


def hf_weights(
    config: Config, tokenizer: Any, critic: bool = False
) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors of `model.path` loaded whole (the built-in model, or a checkpoint
    without safetensors; `hf_folder` covers the rest), one at a time; for the `critic`
    the FSDP engine's value model, so both engines start from the same weights. A tied
    tensor comes once, under its first name (as `save_pretrained` writes it)."""
    from rl.core.models import load_causal_lm, load_value_model
    from rl.core.weight_sync.ties import tied_aliases, without_aliases

    load = load_value_model if critic else load_causal_lm
    model = load(config.model, tokenizer, seed=config.trainer.seed)
    yield from without_aliases(model.state_dict().items(), tied_aliases(model))


def _token_classification_class(hf_config: Any) -> str:
    """`Qwen2ForCausalLM` -> `Qwen2ForTokenClassification` (what a critic folder loads as)."""
    causal = (hf_config.architectures or [f"{hf_config.model_type.title()}ForCausalLM"])[0]
    return causal.replace("ForCausalLM", "ForTokenClassification")
