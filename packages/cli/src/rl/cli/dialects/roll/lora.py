"""ROLL's LoRA keys (`<role>.model_args.lora_*`, `adapter_name_or_path`) as ours.

In ROLL a role trains LoRA when its `model_args.lora_target` is set (its `lora_rank` is 8
by default whether or not LoRA is on, and `lora_alpha` defaults to 2 × rank). The actor's
keys map to `model.*`; the inference role's copy is what it loads the same adapter with
(rl syncs merged weights); a LoRA critic is not in rl.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, ignore, ignored_for
from rl.cli.dialects.vocabulary import LORA_MERGED_SYNC

_ACTOR = "actor_train.model_args."
_REGEX = ("*", "$", "|", "(")


def _on(flat: Mapping[str, Any]) -> bool:
    return flat.get(_ACTOR + "lora_target") is not None


def target(value: Any) -> Any:
    """ "all-linear", or ROLL's comma-separated module names as a list."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    if any(c in name for name in names for c in _REGEX):
        return Unsupported(f"lora_target {value!r}: a regular expression (rl takes module names)")
    if any(name in ("all-embedding", "all-router") for name in names):
        return Unsupported(f"lora_target {value!r}: LoRA on embeddings or MoE routers")
    if "all-linear" in names or "all" in names:
        return "all-linear"
    return names


def rank(flat: Mapping[str, Any]) -> Any:
    return flat.get(_ACTOR + "lora_rank", 8) if _on(flat) else None


def alpha(flat: Mapping[str, Any]) -> Any:
    if not _on(flat):
        return None
    return flat.get(_ACTOR + "lora_alpha") or 2 * (flat.get(_ACTOR + "lora_rank") or 8)


RULES = [
    # the target switches LoRA on: rank and alpha take ROLL's defaults when not given
    Rule(
        _ACTOR + "lora_target",
        "model.target_modules",
        convert=target,
        also=(("model.lora_rank", rank), ("model.lora_alpha", alpha)),
    ),
    Rule(_ACTOR + "lora_rank", "model.lora_rank", derive=rank),
    Rule(_ACTOR + "lora_alpha", "model.lora_alpha", derive=alpha),
    Rule(
        _ACTOR + "lora_dropout",
        reason="rl's LoRA has no dropout",
        convert=lambda v: v or None,
    ),
    Rule(_ACTOR + "adapter_name_or_path", "model.lora_adapter_path"),
    Rule(
        _ACTOR + "additional_target",
        reason="modules trained beside the LoRA layers are not in rl",
    ),
    ignore(_ACTOR + "autocast_adapter_dtype", "rl keeps adapters in the model's dtype"),
    *ignored_for(
        LORA_MERGED_SYNC,
        "actor_infer.model_args.lora_*",
        "actor_infer.model_args.adapter_name_or_path",
    ),
    Rule(
        "critic.model_args.lora_target",
        reason="a LoRA critic is not in rl (LoRA is the actor's)",
        convert=lambda v: v,
    ),
]
