"""Tied weights: one parameter under two Hugging Face names, sent once.

Qwen2.5-0.5B, Qwen3-0.6B and Llama-3.2-1B set `tie_word_embeddings`: `lm_head.weight`
IS `model.embed_tokens.weight`. `named_parameters()` lists it once, `state_dict()`
under both names. Exporters yield it once, under the first name
(`model.embed_tokens.weight`), as `save_pretrained` writes it; vLLM's and SGLang's
loaders of a tied model skip `lm_head.weight` anyway.

Receivers check the tie with `TieCheck`, so that no sync leaves an output layer stale:
- a tied receiver given `lm_head.weight` too (an exporter that emits both) takes it only
  when it equals the embedding; a different value means the trainer's model is untied,
  and the one tensor cannot hold both;
- an untied receiver must get its own `lm_head.weight`: once the embedding arrived and
  the output layer never did (the trainer's model is tied), the sync fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

NamedTensor = tuple[str, torch.Tensor]


def tied_aliases(model: torch.nn.Module) -> dict[str, str]:
    """`{alias: name}` for every parameter the model holds under more than one name (by
    identity), each alias mapped to the parameter's first name in `named_parameters`
    order: a tied Hugging Face LM gives `{"lm_head.weight": "model.embed_tokens.weight"}`.
    Works on plain, meta-device and FSDP2-sharded models (their parameters stay shared)."""
    first: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first:
            aliases[name] = first[id(param)]
        else:
            first[id(param)] = name
    return aliases


def retie(model: torch.nn.Module, aliases: Mapping[str, str]) -> None:
    """Make each alias name the same parameter as its first name again (`tied_aliases`):
    `to_empty` on a plain module gives each name a tensor of its own."""
    for alias, name in aliases.items():
        owner, _, leaf = alias.rpartition(".")
        setattr(model.get_submodule(owner), leaf, model.get_parameter(name))


def without_aliases(
    named_tensors: Iterable[NamedTensor], aliases: Mapping[str, str]
) -> Iterator[NamedTensor]:
    """The pairs whose name is not a tied alias (each shared tensor once), lazily."""
    return ((name, tensor) for name, tensor in named_tensors if name not in aliases)


def with_aliases(tensors: dict[str, Any], aliases: Mapping[str, str]) -> dict[str, Any]:
    """`tensors` with each alias present again as its name's tensor (the same object), for
    APIs that want every state-dict name (`load_state_dict(strict=True)`)."""
    return {
        **tensors,
        **{alias: tensors[name] for alias, name in aliases.items() if name in tensors},
    }


def _weight_name(model: torch.nn.Module, module: torch.nn.Module | None) -> str | None:
    if module is None or not isinstance(getattr(module, "weight", None), torch.Tensor):
        return None
    for name, candidate in model.named_modules(remove_duplicate=False):
        if candidate is module:
            return f"{name}.weight" if name else "weight"
    return None


@dataclass(frozen=True)
class Ties:
    """How a model's word embedding and output layer relate, by Hugging Face name.

    `aliases`: tied names -> the name they are sent under (`tied_aliases`).
    `embedding`, `output`: the input embedding's and the output layer's weight names
    (None where the model has none, e.g. a critic's value head); when tied, `output` is
    an alias of `embedding`."""

    aliases: Mapping[str, str] = field(default_factory=dict)
    embedding: str | None = None
    output: str | None = None

    @classmethod
    def of(cls, model: torch.nn.Module) -> Ties:
        """Read them off a transformers model (plain, meta or sharded)."""
        embedding = output = None
        get_input, get_output = (
            getattr(model, "get_input_embeddings", None),
            getattr(model, "get_output_embeddings", None),
        )
        if callable(get_input) and callable(get_output):
            embedding = _weight_name(model, get_input())
            output = _weight_name(model, get_output())
        return cls(tied_aliases(model), embedding, output)

    @classmethod
    def from_hf_config(cls, hf_config: Any, trust_remote_code: bool = False) -> Ties:
        """Those of the model `hf_config` describes, built on the meta device (no memory)."""
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config, trust_remote_code=trust_remote_code)
        return cls.of(model)

    @property
    def output_tied(self) -> bool:
        """Whether the output layer is the word embedding (`tie_word_embeddings`)."""
        return self.output is not None and self.output in self.aliases


class TieCheck:
    """A receiver's guard over the weights of each sync (see the module docstring); keeps,
    across syncs, whether its embedding and output layer ever arrived."""

    def __init__(self, ties: Ties) -> None:
        self.ties = ties
        self._arrived: set[str] = set()  # of the embedding and (untied) output layer
        self.loaded: set[str] = set()  # names of the tied tensors the last sync loaded

    def stream(
        self,
        named_tensors: Iterable[NamedTensor],
        current: Callable[[str], torch.Tensor] | None = None,
    ) -> Iterator[NamedTensor]:
        """The pairs to load, lazily: a tied alias is held back and, once the stream ends,
        compared with what its name got in this sync (else with `current(name)`, the
        receiver's tensor, when it can read it); then the untied output layer is checked.
        Raises ValueError naming the weights when either check fails."""
        aliases = self.ties.aliases
        watched = {self.ties.embedding, self.ties.output} - {None}
        held: list[NamedTensor] = []
        sent: dict[str, torch.Tensor] = {}
        self.loaded = set()
        for name, tensor in named_tensors:
            if name in aliases:
                held.append((name, tensor))
                continue
            if name in aliases.values():
                sent[name] = tensor
                self.loaded.add(name)
            if name in watched:
                self._arrived.add(name)
            yield name, tensor
        for alias, tensor in held:
            self._check_alias(alias, tensor, sent.get(aliases[alias]), current)
        self._check_output()

    def _check_alias(
        self,
        alias: str,
        tensor: torch.Tensor,
        reference: torch.Tensor | None,
        current: Callable[[str], torch.Tensor] | None,
    ) -> None:
        name = self.ties.aliases[alias]
        if reference is None and current is not None:
            reference = current(name)
        if reference is None:
            raise ValueError(
                f"weight sync: {alias!r} arrived without {name!r}; this rollout model ties "
                f"them (one tensor), so send {name!r}{_PARTIAL}"
            )
        if not torch.equal(tensor.to(reference.device, reference.dtype), reference):
            raise ValueError(
                f"weight sync: {alias!r} differs from {name!r}, but this rollout model ties "
                "them (tie_word_embeddings: one tensor): the trainer's model is untied; load "
                f"actor and rollout from the same model.path{_PARTIAL}"
            )

    def _check_output(self) -> None:
        embedding, output = self.ties.embedding, self.ties.output
        if output is None or embedding is None or self.ties.output_tied:
            return
        if embedding in self._arrived and output not in self._arrived:
            raise ValueError(
                f"weight sync: {embedding!r} arrived but {output!r} never did; the trainer's "
                "model ties its output layer to the embedding (sends it once), this rollout "
                "model does not, and its output layer would stay stale: load actor and "
                f"rollout from the same model.path{_PARTIAL}"
            )


_PARTIAL = (
    ". Weights before it were loaded: the rollout engine is partly updated until the "
    "next successful sync"
)
