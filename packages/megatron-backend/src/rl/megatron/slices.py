"""Load a Hugging Face safetensors folder reading only this rank's part of each tensor.

For every parameter this rank holds (its pipeline stage's layers, its expert rank's
experts), the layout table names the HF tensors it is made of; each is read through
safetensors' lazy slices, only the rows (column-parallel, fused QKV / gate-up parts, the
vocabulary) or columns (row-parallel) of this rank's TP (or expert-TP) shard, and the
parts are fused with the table's merge at the shard's sizes (a QKV shard holds whole
query groups, so it is the fusion of the q, k and v row blocks of those groups). Bytes
read per rank: about the model's size / (TP × PP × EP) instead of all of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch

from rl.megatron.layouts import LayoutConverter, LayoutError, TPKind
from rl.megatron.weights import VALUE_HEAD, Placement

ROWS = (TPKind.COLUMN, TPKind.GATE_UP, TPKind.QKV, TPKind.VOCAB)


def _tensor_files(folder: Path) -> dict[str, Path]:
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors files")
    index: dict[str, Path] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as reader:
            index.update(dict.fromkeys(reader.keys(), file))
    return index


def _read(lazy: Any, kind: TPKind, rank: int, size: int) -> torch.Tensor:
    """This rank's block of one HF tensor (`lazy`: a safetensors slice)."""
    shape = lazy.get_shape()
    if size == 1 or kind is TPKind.REPLICATED:
        return lazy[:]
    if kind is TPKind.ROW:
        width = shape[1] // size
        return lazy[:, rank * width : (rank + 1) * width]
    assert kind in ROWS, kind
    height = shape[0] // size
    return lazy[rank * height : (rank + 1) * height]


@torch.no_grad()
def load_hf_slices(
    model: torch.nn.Module,
    converter: LayoutConverter,
    folder: Path,
    critic: bool = False,
    initial_head: Callable[[], dict[str, torch.Tensor]] | None = None,
) -> list[tuple[str, tuple[int, ...]]]:
    """Fill `model`'s parameters from `folder`, reading only this rank's slices; returns
    what was read (HF name, shape of the block). Errors name the tensor at fault."""
    from safetensors import safe_open

    placement = Placement.of(model)
    index = _tensor_files(folder)
    tied = converter.tie_word_embeddings and not critic
    read: list[tuple[str, tuple[int, ...]]] = []
    with ExitStack() as stack:
        readers: dict[Path, Any] = {}

        def lazy(name: str) -> Any:
            if name not in index:
                raise LayoutError(f"{folder} has no tensor {name!r}")
            file = index[name]
            if file not in readers:
                readers[file] = stack.enter_context(safe_open(str(file), framework="pt"))
            return readers[file].get_slice(name)

        for local, param in model.named_parameters():
            whole = placement.to_global(local)
            if critic and whole in VALUE_HEAD:
                head = VALUE_HEAD[whole]
                if head in index:
                    tensor = lazy(head)[:]
                    read.append((head, tuple(tensor.shape)))
                elif initial_head is not None:
                    tensor = initial_head()[head]
                else:
                    raise LayoutError(f"{folder} has no {head!r} (the critic's value head)")
                param.copy_(tensor.reshape(param.shape))
                continue
            if tied and whole == "output_layer.weight":
                whole = "embedding.word_embeddings.weight"  # the last stage's tied copy
            rule, fields = converter.table.match_mcore(whole)
            rank, size = placement.shard_of(whole)
            parts = []
            for template, shape in zip(rule.hf, rule.shapes, strict=True):
                name = template.format(**dict(fields))
                block = lazy(name)
                expected = converter.dims.resolve(shape)
                if tuple(block.get_shape()) != expected:
                    raise LayoutError(
                        f"{name!r} ({converter.arch}): expected shape {expected}, got "
                        f"{tuple(block.get_shape())}"
                    )
                parts.append(_read(block, rule.tp, rank, size))
                read.append((name, tuple(parts[-1].shape)))
            dims = converter.dims
            if rule.tp is TPKind.QKV:  # this rank's query groups
                dims = dataclasses.replace(
                    dims, heads=dims.heads // size, kv_heads=dims.kv_heads // size
                )
            shard = rule.fuse.merge(parts, dims)
            if tuple(shard.shape) != tuple(param.shape):
                raise ValueError(
                    f"{whole}: this rank's shard is {tuple(shard.shape)}, the model's {local} "
                    f"is {tuple(param.shape)}"
                )
            param.copy_(shard)
    return read
