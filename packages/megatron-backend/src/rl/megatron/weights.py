"""Hugging Face weights into this rank's megatron-core shards, and back out, streamed.

Names: the layout converter (`rl.megatron.layouts`) speaks whole-model megatron names
(`decoder.layers.{global layer}.…`, `local_experts.{global expert}.…`); a rank's model
has its pipeline stage's layers numbered from 0 and its expert-parallel rank's experts
numbered from 0. `Placement` translates between the two.

Load (`load_hf`, from tensors in memory; a safetensors folder is read slice by slice by
`rl.megatron.slices` instead): HF tensors stream through the converter one at a time;
each rank keeps the TP (or expert-TP) shard of the tensors its stage and expert rank
hold and drops the rest, so memory stays at about one fused tensor beyond the model. Export: for each tensor, the
ranks holding it gather their TP shards, and when not every rank holds it (pipeline
stages, expert ranks) the first holder broadcasts the full tensor; every rank yields
every HF tensor in the same order (each feeds its own rollout replica).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rl.megatron.layouts import LayoutConverter, TPKind

# the critic's head: megatron name -> Hugging Face (token classification) name
VALUE_HEAD = {"output_layer.weight": "score.weight", "output_layer.bias": "score.bias"}
LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")
EXPERT = re.compile(r"(local_experts\.|linear_fc\d\.weight)(\d+)")


@dataclass(frozen=True)
class Placement:
    """Where this rank sits: its stage's first global layer and layer count, its experts."""

    layer_offset: int
    num_layers: int
    expert_offset: int
    num_local_experts: int
    tp_rank: int
    tp_size: int
    etp_rank: int
    etp_size: int

    @classmethod
    def of(cls, model: Any) -> Placement:
        from megatron.core import parallel_state as ps
        from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

        config = model.config
        experts = config.num_moe_experts or 0
        ep = ps.get_expert_model_parallel_world_size()
        return cls(
            layer_offset=get_transformer_layer_offset(config, getattr(model, "vp_stage", None)),
            num_layers=len(model.decoder.layers),
            expert_offset=ps.get_expert_model_parallel_rank() * (experts // ep),
            num_local_experts=experts // ep,
            tp_rank=ps.get_tensor_model_parallel_rank(),
            tp_size=ps.get_tensor_model_parallel_world_size(),
            etp_rank=ps.get_expert_tensor_parallel_rank(),
            etp_size=ps.get_expert_tensor_parallel_world_size(),
        )

    def to_local(self, name: str) -> str | None:
        """This rank's name for the whole-model `name`, or None if another rank holds it."""
        layer = LAYER.match(name)
        if layer:
            index = int(layer.group(1)) - self.layer_offset
            if not 0 <= index < self.num_layers:
                return None
            name = f"decoder.layers.{index}." + name[layer.end() :]
        expert = EXPERT.search(name) if ".experts." in name else None
        if expert:
            index = int(expert.group(2)) - self.expert_offset
            if not 0 <= index < self.num_local_experts:
                return None
            name = name[: expert.start(2)] + str(index) + name[expert.end(2) :]
        return name

    def to_global(self, name: str) -> str:
        layer = LAYER.match(name)
        if layer:
            name = (
                f"decoder.layers.{int(layer.group(1)) + self.layer_offset}." + name[layer.end() :]
            )
        expert = EXPERT.search(name) if ".experts." in name else None
        if expert:
            index = int(expert.group(2)) + self.expert_offset
            name = name[: expert.start(2)] + str(index) + name[expert.end(2) :]
        return name

    def shard_of(self, name: str) -> tuple[int, int]:
        """(rank, size) of the tensor-parallel split that `name` follows."""
        if ".experts." in name:
            return self.etp_rank, self.etp_size
        return self.tp_rank, self.tp_size


def checkpoint_tensors(folder: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors of a Hugging Face folder's safetensors files, one at a time (no whole
    model in memory)."""
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors files")
    for file in files:
        with safe_open(str(file), framework="pt") as reader:
            for name in reader.keys():  # noqa: SIM118 (safe_open has no __iter__)
                yield name, reader.get_tensor(name)


def _tp_group(name: str) -> Any:
    from megatron.core import parallel_state as ps

    if ".experts." in name:
        return ps.get_expert_tensor_parallel_group()
    return ps.get_tensor_model_parallel_group()


def _parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters())


def initial_value_head(hf_config: Any, seed: int) -> dict[str, torch.Tensor]:
    """A new critic head as Hugging Face initialises a token-classification `score`:
    weight ~ N(0, initializer_range) (drawn from `seed` + 1, the same on every rank),
    bias 0."""
    generator = torch.Generator().manual_seed(seed + 1)
    std = getattr(hf_config, "initializer_range", 0.02)
    weight = torch.randn(1, hf_config.hidden_size, generator=generator) * std
    return {"score.weight": weight, "score.bias": torch.zeros(1)}


def _without_value_head(
    hf_tensors: Iterable[tuple[str, torch.Tensor]], head: dict[str, torch.Tensor]
) -> Iterator[tuple[str, torch.Tensor]]:
    """The backbone's tensors; the critic head's go into `head`, an LM head is dropped."""
    for name, tensor in hf_tensors:
        if name in VALUE_HEAD.values():
            head[name] = tensor
        elif name != "lm_head.weight":
            yield name, tensor


@torch.no_grad()
def load_hf(
    model: torch.nn.Module,
    converter: LayoutConverter,
    hf_tensors: Iterable[tuple[str, torch.Tensor]],
    critic: bool = False,
    initial_head: Callable[[], dict[str, torch.Tensor]] | None = None,
) -> None:
    """Copy this rank's shards of the streamed HF tensors into `model`'s parameters;
    an error names every parameter the stream did not cover. A `critic` (on the last
    stage: a `ValueHead`) takes its head from the stream's `score.*` or, when absent (an
    LM checkpoint), from `initial_head()`; an LM head in the stream is ignored."""
    placement = Placement.of(model)
    params = _parameters(model)
    missing = set(params)
    head: dict[str, torch.Tensor] = {}
    if critic:
        hf_tensors = _without_value_head(hf_tensors, head)
    tied_head = "output_layer.weight" in params and converter.tie_word_embeddings and not critic
    for name, full in converter.from_hf(hf_tensors):
        targets = [placement.to_local(name)]
        if tied_head and name == "embedding.word_embeddings.weight":
            targets.append("output_layer.weight")  # the last stage's copy of a tied head
        for local in targets:
            if local is None or local not in params:
                continue
            rank, size = placement.shard_of(name)
            shard = converter.split_tp(name, full, size)[rank] if size > 1 else full
            param = params[local]
            if tuple(shard.shape) != tuple(param.shape):
                raise ValueError(
                    f"{name}: this rank's shard is {tuple(shard.shape)}, the model's "
                    f"{local} is {tuple(param.shape)}"
                )
            param.copy_(shard)
            missing.discard(local)
    if critic:
        if not head and initial_head is not None:
            head = initial_head()
        missing -= set_value_head(params, head)
    if missing:
        raise ValueError(f"the weights did not cover these megatron parameters: {sorted(missing)}")


@torch.no_grad()
def set_value_head(params: dict[str, torch.Tensor], head: dict[str, torch.Tensor]) -> set[str]:
    """Copy a critic head's HF tensors (`score.*`) into the parameters this rank holds
    (the last stage's; other stages have none); the names it set."""
    done = set()
    for local, hf_name in VALUE_HEAD.items():
        if hf_name in head and local in params:
            params[local].copy_(head[hf_name].reshape(params[local].shape))
            done.add(local)
    return done


def export_plan(model: torch.nn.Module) -> list[tuple[str, int]]:
    """Every whole-model tensor name, in one order all ranks share, with the first rank
    holding it (a collective; the layout does not change, so compute it once)."""
    placement = Placement.of(model)
    mine = [placement.to_global(name) for name in _parameters(model)]
    everyone: list[list[str] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    first: dict[str, int] = {}
    for rank, names in enumerate(everyone):
        for name in names or []:
            first.setdefault(name, rank)
    return sorted(first.items(), key=lambda item: _order_key(item[0]))


def _order_key(name: str) -> tuple[int, int, str]:
    """Embedding first, layers in order, then the final norm and output layer."""
    layer = LAYER.match(name)
    if layer:
        return (1, int(layer.group(1)), name)
    return (0 if name.startswith("embedding") else 2, 0, name)


@torch.no_grad()
def export_hf(
    model: torch.nn.Module,
    converter: LayoutConverter,
    device: torch.device,
    plan: list[tuple[str, int]],
    value_head: bool = False,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Full HF tensors, one whole-model tensor at a time, on every rank in the order of
    `plan` (`export_plan(model)`); a critic's (`value_head`) head as `score.*`."""
    placement = Placement.of(model)
    params = _parameters(model)
    everywhere = _every_rank_holds_everything()
    for name, owner in plan:
        head = value_head and name in VALUE_HEAD
        local = placement.to_local(name)
        held = local is not None and local in params
        full: torch.Tensor | None = None
        if held and head:
            full = params[local].detach()  # type: ignore[index]  (replicated over TP)
        elif held:
            full = _gather_tp(name, params[local], converter, placement)  # type: ignore[index]
        if not everywhere or not held:
            if head:
                hidden = model.config.hidden_size
                shape: tuple[int, ...] = (1, hidden) if name.endswith("weight") else (1,)
            else:
                shape = converter.mcore_shape(name)
            if full is None:
                dtype = next(iter(params.values())).dtype
                full = torch.empty(shape, dtype=dtype, device=device)
            full = full.to(device).contiguous()
            dist.broadcast(full, src=owner)
        assert full is not None
        if head:
            yield VALUE_HEAD[name], full
        else:
            yield from converter.to_hf([(name, full)])


def _every_rank_holds_everything() -> bool:
    """One pipeline stage and one expert rank: each rank has every tensor (its TP shard)."""
    from megatron.core import parallel_state as ps

    return (
        ps.get_pipeline_model_parallel_world_size() == 1
        and ps.get_expert_model_parallel_world_size() == 1
    )


def _gather_tp(
    name: str, shard: torch.Tensor, converter: LayoutConverter, placement: Placement
) -> torch.Tensor:
    _, size = placement.shard_of(name)
    if size == 1 or converter.table.match_mcore(name)[0].tp is TPKind.REPLICATED:
        return shard.detach()
    shards = [torch.empty_like(shard) for _ in range(size)]
    dist.all_gather(shards, shard.detach().contiguous(), group=_tp_group(name))
    return converter.merge_tp(name, shards)
