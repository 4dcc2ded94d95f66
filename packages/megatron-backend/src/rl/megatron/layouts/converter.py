"""The one driver that applies a layout table in both directions, streaming.

`from_hf` buffers only the parts of fused tensors that have not all arrived
yet (HF checkpoints store a layer's tensors together, so memory stays bounded
by about one layer) and emits each megatron-core tensor as soon as it is
complete; `to_hf` emits each HF tensor as soon as its mcore tensor is read.
Output order follows input order: a tensor comes out when its last part goes in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cache

import torch
from torch import Tensor

from .dims import ModelDims
from .errors import LayoutError
from .fuse import VOCAB
from .table import Fields, LayoutTable, Rule
from .tp import (
    TPKind,
    check_replicated,
    merge_parts,
    merge_vocab,
    split_parts,
    split_vocab,
)

NamedTensors = Iterable[tuple[str, Tensor]]


class LayoutConverter:
    """Hugging Face <-> megatron-core names and layouts for one model.

    Tied embeddings (`tie_word_embeddings` in the HF config): megatron keeps
    one tensor, `embedding.word_embeddings.weight`. On import `lm_head.weight`
    is dropped if present (it is the same tensor); on export an
    `output_layer.weight` (the copy a last pipeline stage holds) is dropped and
    `lm_head.weight` is emitted only when `emit_tied_lm_head` — vLLM, SGLang
    and `from_pretrained` tie the head to the embedding themselves and skip
    it, while a strict `load_state_dict` on a HF model wants it.
    """

    def __init__(
        self,
        table: LayoutTable,
        dims: ModelDims,
        *,
        tie_word_embeddings: bool = False,
        emit_tied_lm_head: bool = False,
    ) -> None:
        self.table = table
        self.dims = dims
        self.tie_word_embeddings = tie_word_embeddings
        self.emit_tied_lm_head = emit_tied_lm_head
        self._mcore_shape = cache(self._mcore_shape_uncached)

    @property
    def arch(self) -> str:
        return self.table.arch

    def _dropped(self, rule: Rule) -> bool:
        return self.tie_word_embeddings and rule.tied_to is not None

    def _check_shape(self, name: str, tensor: Tensor, expected: tuple[int, ...]) -> None:
        if tuple(tensor.shape) != expected:
            raise LayoutError(
                f"{name!r} ({self.arch}): expected shape {expected}, got {tuple(tensor.shape)}"
            )

    def from_hf(self, named_tensors: NamedTensors) -> Iterator[tuple[str, Tensor]]:
        """(HF name, tensor) pairs -> (mcore name, full unsharded tensor) pairs, streamed.

        Shapes are checked against the HF config; dtypes pass through. Raises
        `LayoutError` for an unknown name, a bad shape, a duplicate, and, when
        the stream ends, for every fused tensor still missing parts.
        """
        pending: dict[tuple[str, Fields], list[Tensor | None]] = {}
        for name, tensor in named_tensors:
            rule, index, fields = self.table.match_hf(name)
            self._check_shape(name, tensor, self.dims.resolve(rule.shapes[index]))
            if self._dropped(rule):
                continue
            if len(rule.hf) == 1:
                yield rule.mcore.format(**dict(fields)), rule.fuse.merge([tensor], self.dims)
                continue
            parts = pending.setdefault((rule.mcore, fields), [None] * len(rule.hf))
            if parts[index] is not None:
                raise LayoutError(f"{name!r} ({self.arch}) appears twice in the stream")
            parts[index] = tensor
            if all(p is not None for p in parts):
                del pending[(rule.mcore, fields)]
                merged = rule.fuse.merge([p for p in parts if p is not None], self.dims)
                yield rule.mcore.format(**dict(fields)), merged
        if pending:
            raise self._incomplete(pending)

    def _incomplete(self, pending: dict[tuple[str, Fields], list[Tensor | None]]) -> LayoutError:
        lines = []
        for (template, fields), parts in pending.items():
            rule, _ = self.table.match_mcore(template.format(**dict(fields)))
            missing = [
                hf.format(**dict(fields))
                for hf, part in zip(rule.hf, parts, strict=True)
                if part is None
            ]
            lines.append(f"{template.format(**dict(fields))} is missing {missing}")
        return LayoutError(
            f"incomplete fused tensors at the end of the stream ({self.arch}): " + "; ".join(lines)
        )

    def to_hf(self, named_tensors: NamedTensors) -> Iterator[tuple[str, Tensor]]:
        """(mcore name, full unsharded tensor) pairs -> (HF name, tensor) pairs, streamed.

        HF tensors may be views of the mcore ones (no copy where the layout
        allows); vocabulary padding rows are dropped. Raises `LayoutError` for
        an unknown name or a shape that does not fit the HF config.
        """
        for name, tensor in named_tensors:
            rule, fields = self.table.match_mcore(name)
            self._check_mcore_shape(name, rule, tensor)
            if self._dropped(rule):
                continue
            parts = rule.fuse.split(tensor, self.dims)
            for hf, part in zip(rule.hf, parts, strict=True):
                yield hf.format(**dict(fields)), part
            if self.tie_word_embeddings and self.emit_tied_lm_head:
                for tied in self.table.rules:
                    if tied.tied_to == rule.mcore:
                        yield from zip(
                            (t.format(**dict(fields)) for t in tied.hf), parts, strict=True
                        )

    def _mcore_shape_uncached(self, rule: Rule) -> tuple[int, ...]:
        metas = [torch.empty(self.dims.resolve(s), device="meta") for s in rule.shapes]
        return tuple(rule.fuse.merge(metas, self.dims).shape)

    def _check_mcore_shape(self, name: str, rule: Rule, tensor: Tensor) -> None:
        expected = self._mcore_shape(rule)
        got = tuple(tensor.shape)
        if rule.fuse is VOCAB and got[1:] == expected[1:] and got[0] >= expected[0]:
            return  # padded vocabulary rows, dropped by the split
        if got != expected:
            raise LayoutError(f"{name!r} ({self.arch}): expected shape {expected}, got {got}")

    def mcore_shape(self, name: str) -> tuple[int, ...]:
        """The full (unsharded, unpadded) shape of the mcore tensor `name`."""
        rule, _ = self.table.match_mcore(name)
        return self._mcore_shape(rule)

    def split_tp(
        self, name: str, full: Tensor, tp_size: int, *, make_vocab_size_divisible_by: int = 1
    ) -> list[Tensor]:
        """Full mcore tensor -> the `tp_size` shards megatron's TP ranks hold, rank order.

        The vocabulary (embedding, output layer) is zero-padded to a multiple
        of `make_vocab_size_divisible_by * tp_size` rows first, as megatron does.
        Replicated tensors come back as the same object `tp_size` times.
        """
        kind = self.table.match_mcore(name)[0].tp
        if kind is TPKind.REPLICATED:
            return [full] * tp_size
        if kind is TPKind.VOCAB:
            return split_vocab(name, full, tp_size, make_vocab_size_divisible_by)
        if kind is TPKind.QKV and self.dims.kv_heads % tp_size:
            raise LayoutError(
                f"cannot shard {name!r} over TP {tp_size}: its num_key_value_heads "
                f"({self.dims.kv_heads}) is not divisible by {tp_size}"
            )
        parts = 2 if kind is TPKind.GATE_UP else 1
        return split_parts(name, full, tp_size, parts=parts, dim=1 if kind is TPKind.ROW else 0)

    def merge_tp(self, name: str, shards: Sequence[Tensor]) -> Tensor:
        """The shards of TP ranks 0..n-1 -> the full mcore tensor (vocab padding dropped)."""
        kind = self.table.match_mcore(name)[0].tp
        if kind is TPKind.REPLICATED:
            return check_replicated(name, shards)
        if kind is TPKind.VOCAB:
            return merge_vocab(name, shards, self.dims.vocab)
        parts = 2 if kind is TPKind.GATE_UP else 1
        return merge_parts(name, shards, parts=parts, dim=1 if kind is TPKind.ROW else 0)
