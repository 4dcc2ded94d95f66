"""`FSDPTrainEngine`: actor, reference or critic on FSDP2, implementing `rl.core.engines.TrainEngine`.

Mini-batches (one optimizer step each) are split into micro-batches whose
gradients accumulate; the loss function normalises by the whole mini-batch, so
the update does not depend on the micro-batch size.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from rl.core.batch import batch_size, select, to_device
from rl.core.checkpoint_io import load_state, load_weights, save_state, save_weights
from rl.core.config import Config, OptimConfig
from rl.core.engines import LogprobOutput, LossFn
from rl.core.models import load_causal_lm, load_value_model
from rl.core.optim import make_lr_scheduler
from rl.fsdp.distributed import data_parallel_mesh
from rl.fsdp.forward import fused_logprobs_and_entropy, response_logprobs, response_values
from rl.fsdp.micro_batches import MicroBatching, micro_batch_rows
from rl.fsdp.wrap import shard_model
from rl.kernels.varlen_attention import register as register_varlen_attention

Role = Literal["actor", "ref", "critic"]
FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


class FSDPTrainEngine:
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
        train_batching: MicroBatching | None = None,
        forward_batching: MicroBatching | None = None,
    ) -> None:
        self.role, self.device = role, torch.device(device)
        if use_remove_padding:  # attention within each packed sequence, no [N, N] mask
            model.set_attn_implementation(register_varlen_attention())
        self.model = shard_model(model.to(self.device), data_parallel_mesh(self.device.type))
        self.mini_batch_size = mini_batch_size
        # micro-batches of updates and of forward-only passes: rows, or a token budget
        self.train_batching = train_batching or MicroBatching(rows=micro_batch_size)
        self.forward_batching = forward_batching or self.train_batching
        self.packed = use_remove_padding
        self.ppo_epochs, self.shuffle, self.temperature = ppo_epochs, shuffle, temperature
        self.generator = torch.Generator().manual_seed(seed)
        # None = auto: fused for no-grad passes everywhere (faster and leaner on CPU too),
        # and for training on GPU, where memory is what it saves.
        self.use_fused_kernels = use_fused_kernels
        self.optim_config = optim
        self.optimizer: torch.optim.Optimizer | None = None
        self.lr_scheduler: torch.optim.lr_scheduler.LambdaLR | None = None
        if role == "ref":
            self.model.requires_grad_(False)
        else:
            assert optim is not None, f"the {role} engine needs an optimizer config"
            self.optimizer = torch.optim.AdamW(
                self.model.parameters(),
                lr=optim.lr,
                betas=tuple(optim.betas),  # type: ignore[arg-type]
                weight_decay=optim.weight_decay,
            )
            self.lr_scheduler = make_lr_scheduler(self.optimizer, optim, total_steps)

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
        load = load_value_model if role == "critic" else load_causal_lm
        model = load(config.model, tokenizer, seed=config.trainer.seed)
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
            train_batching=train,
            forward_batching=forward,
        )

    # --- forward ------------------------------------------------------------------

    def _fused(self) -> bool:
        if self.use_fused_kernels is not None:
            return self.use_fused_kernels
        return self.device.type == "cuda" or not torch.is_grad_enabled()

    def _forward(self, micro: Mapping[str, torch.Tensor], with_entropy: bool) -> Any:
        if self.role == "critic":
            return response_values(self.model, micro, self.packed)
        compute = fused_logprobs_and_entropy if self._fused() else response_logprobs
        return LogprobOutput(
            *compute(self.model, micro, self.temperature, with_entropy, packed=self.packed)
        )

    def _forward_rows(self, batch: Mapping[str, torch.Tensor], with_entropy: bool) -> list[Any]:
        """Forward-only over `forward_batching` micro-batches; each result with its rows."""
        self.model.eval()
        results = []
        for rows in micro_batch_rows(batch["attention_mask"], self.forward_batching):
            if rows.numel():
                micro = to_device(select(batch, rows), self.device)
                results.append((rows, self._forward(micro, with_entropy)))
        return results

    @torch.no_grad()
    def compute_logprobs(self, batch: Mapping[str, torch.Tensor]) -> LogprobOutput:
        """Log-probs and entropy of the response tokens: float32 [B, R] each, in the
        caller's row order whatever the micro-batching did."""
        shape = batch["response_mask"].shape
        logprobs, entropy = torch.zeros(shape), torch.zeros(shape)
        for rows, output in self._forward_rows(batch, True):
            logprobs[rows] = output.logprobs.cpu()
            entropy[rows] = output.entropy.cpu()
        return LogprobOutput(logprobs, entropy)

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
        """
        assert self.optimizer is not None and self.lr_scheduler is not None
        self.model.train()
        metrics: dict[str, list[float]] = defaultdict(list)
        rows = batch_size(batch)
        for _ in range(self.ppo_epochs):
            order = (
                torch.randperm(rows, generator=self.generator)
                if self.shuffle
                else torch.arange(rows)
            )
            for start in range(0, rows, self.mini_batch_size):
                mini = to_device(
                    select(batch, order[start : start + self.mini_batch_size]), self.device
                )
                for key, value in self._optimizer_step(mini, loss_fn).items():
                    metrics[key].append(value)
        prefix = "critic" if self.role == "critic" else "actor"
        metrics["lr"].append(self.lr_scheduler.get_last_lr()[0])
        if min(metrics[f"{prefix}/skipped_steps"]) < 1.0:  # the schedule follows real updates
            self.lr_scheduler.step()
        metrics[f"{prefix}/weight_norm"].append(self._weight_norm())
        return {key: sum(values) / len(values) for key, values in metrics.items()}

    @torch.no_grad()
    def _weight_norm(self) -> float:
        norm = torch.nn.utils.get_total_norm(list(self.model.parameters()))
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def _optimizer_step(
        self, mini: Mapping[str, torch.Tensor], loss_fn: LossFn
    ) -> dict[str, float]:
        assert self.optimizer is not None and self.optim_config is not None
        self.optimizer.zero_grad(set_to_none=True)
        step_metrics: dict[str, list[float]] = defaultdict(list)
        for rows in micro_batch_rows(mini["attention_mask"], self.train_batching):
            if not rows.numel():
                continue
            micro = select(mini, rows.to(self.device))
            loss, metrics = loss_fn(self._forward(micro, True), micro, mini)
            loss.backward()
            for key, value in metrics.items():
                step_metrics[key].append(float(value))
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.optim_config.grad_clip
        )
        grad_norm = float(
            grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        )
        if math.isfinite(grad_norm):
            self.optimizer.step()
        prefix = "critic" if self.role == "critic" else "actor"
        # Loss functions may already name their metrics ("actor/pg_loss"); others get the role.
        averaged = {
            (k if "/" in k else f"{prefix}/{k}"): sum(v) / len(v) for k, v in step_metrics.items()
        }
        averaged[f"{prefix}/grad_norm"] = grad_norm
        averaged[f"{prefix}/skipped_steps"] = float(not math.isfinite(grad_norm))
        return averaged

    # --- weights and checkpoints --------------------------------------------------

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full (unsharded) tensors under their Hugging Face names, on CPU."""
        yield from get_model_state_dict(self.model, options=FULL).items()

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the weights (e.g. the reference from the warm-started actor)."""
        set_model_state_dict(self.model, dict(named_tensors), options=FULL)

    def save(self, path: str) -> None:
        """Weights to `path`/model.safetensors; optimizer, LR-schedule and sampling-generator
        state to `path`/state.pt (tensors and plain values only: it loads with
        `weights_only=True`, so a crafted checkpoint cannot run code)."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        weights = get_model_state_dict(self.model, options=FULL)
        save_weights(weights, folder / "model.safetensors")
        state: dict[str, Any] = {"generator": self.generator.get_state()}
        if self.optimizer is not None and self.lr_scheduler is not None:
            state["optimizer"] = get_optimizer_state_dict(self.model, self.optimizer, options=FULL)
            state["lr_scheduler"] = self.lr_scheduler.state_dict()
        save_state(state, folder / "state.pt")

    def load(self, path: str) -> None:
        folder = Path(path)
        set_model_state_dict(self.model, load_weights(folder / "model.safetensors"), options=FULL)
        state = load_state(folder / "state.pt")
        self.generator.set_state(state["generator"])
        if self.optimizer is not None and self.lr_scheduler is not None:
            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"], options=FULL)
            self.lr_scheduler.load_state_dict(state["lr_scheduler"])

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A Hugging Face folder loadable with `AutoModelForCausalLM.from_pretrained`."""
        state = get_model_state_dict(self.model, options=FULL)
        self.model.save_pretrained(path, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)

    def offload(self) -> None:
        """Move weights (and optimizer state) to CPU while another role uses the device."""
        self._move(torch.device("cpu"))

    def onload(self) -> None:
        self._move(self.device)

    def _move(self, device: torch.device) -> None:
        if self.device.type == "cpu":
            return
        self.model.to(device)
        if self.optimizer is not None:
            for state in self.optimizer.state.values():
                for key, value in state.items():
                    if isinstance(value, torch.Tensor):
                        state[key] = value.to(device, non_blocking=True)


def micro_batching(config: Config, role: Role, section: Any) -> tuple[MicroBatching, MicroBatching]:
    """(updates, forward-only passes) micro-batching of `role` from its config keys (verl's
    names: `ppo_max_token_len_per_gpu`, `log_prob_max_token_len_per_gpu`, ...)."""
    if role == "critic":
        critic = config.critic
        rows = critic.ppo_micro_batch_size_per_gpu
        if not critic.use_dynamic_bsz:
            return MicroBatching(rows), MicroBatching(rows)
        return (
            MicroBatching(
                rows, critic.ppo_max_token_len_per_gpu, "critic.ppo_max_token_len_per_gpu"
            ),
            MicroBatching(
                rows, critic.forward_max_token_len_per_gpu, "critic.forward_max_token_len_per_gpu"
            ),
        )
    log_prob = config.ref if role == "ref" else config.rollout
    prefix = "ref" if role == "ref" else "rollout"
    forward = MicroBatching(
        log_prob.log_prob_micro_batch_size_per_gpu,
        log_prob.log_prob_max_token_len_per_gpu if log_prob.log_prob_use_dynamic_bsz else None,
        f"{prefix}.log_prob_max_token_len_per_gpu",
    )
    budget = section.ppo_max_token_len_per_gpu if section.use_dynamic_bsz else None
    train = MicroBatching(
        section.ppo_micro_batch_size_per_gpu, budget, "actor.ppo_max_token_len_per_gpu"
    )
    return train, forward
