"""Which weights a rollout engine loads together, so that a delta sync sends them together.

vLLM and SGLang fuse q/k/v into one `qkv_proj` and gate/up into one `gate_up_proj`,
and hold all experts of a MoE block in one module. vLLM's in-place reload rebuilds
a module from the tensors it receives in that sync: a module sent in part (q changed,
k and v skipped) comes back wrong (measured: log-probs off by 0.45). So a delta sync
decides per group — the whole module's tensors go when any of them changed.
"""

from __future__ import annotations

from collections.abc import Callable

WeightGroup = Callable[[str], str]

FUSED_PARTS = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
}


def each_tensor(name: str) -> str:
    """Every tensor on its own (engines that copy tensor by tensor, e.g. the HF engine)."""
    return name


def fused_module(name: str) -> str:
    """The fused module a Hugging Face weight loads into in vLLM / SGLang.

    `model.layers.3.self_attn.k_proj.bias` -> `model.layers.3.self_attn.qkv_proj`;
    `model.layers.3.mlp.experts.7.up_proj.weight` -> `model.layers.3.mlp.experts`;
    `model.norm.weight` -> `model.norm`.
    """
    parts = name.split(".")[:-1] or [name]
    if "experts" in parts:
        return ".".join(parts[: parts.index("experts") + 1])
    parts[-1] = FUSED_PARTS.get(parts[-1], parts[-1])
    return ".".join(parts)
