"""The sizes a layout table needs, read once from a Hugging Face config.

Shapes in the tables are written with these names (`("q", "hidden")` is the
shape of `q_proj.weight`), so one table serves every model size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def config_value(hf_config: Any, key: str, default: Any = None) -> Any:
    """`hf_config.key` for a `transformers.PretrainedConfig`, `hf_config[key]` for a dict."""
    if isinstance(hf_config, dict):
        value = hf_config.get(key, default)
    else:
        value = getattr(hf_config, key, default)
    return default if value is None else value


@dataclass(frozen=True)
class ModelDims:
    """Sizes of a decoder-only transformer, in the units the weights use.

    `heads`/`kv_heads` are attention heads and KV heads (= megatron's query
    groups); `q` and `kv` are their widths in features (heads × head_dim).
    """

    hidden: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    moe_ffn: int = 0
    experts: int = 0

    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        return self.kv_heads * self.head_dim

    @classmethod
    def from_hf_config(cls, hf_config: Any) -> ModelDims:
        """Read the sizes from a HF config (object or dict); absent keys use HF's defaults."""
        hidden = int(config_value(hf_config, "hidden_size"))
        heads = int(config_value(hf_config, "num_attention_heads"))
        return cls(
            hidden=hidden,
            vocab=int(config_value(hf_config, "vocab_size")),
            heads=heads,
            kv_heads=int(config_value(hf_config, "num_key_value_heads", heads)),
            head_dim=int(config_value(hf_config, "head_dim", hidden // heads)),
            ffn=int(config_value(hf_config, "intermediate_size", 0)),
            moe_ffn=int(config_value(hf_config, "moe_intermediate_size", 0)),
            experts=int(config_value(hf_config, "num_experts", 0)),
        )

    def resolve(self, shape: tuple[str | int, ...]) -> tuple[int, ...]:
        """Turn a symbolic shape such as `("q", "hidden")` into integers."""
        return tuple(getattr(self, d) if isinstance(d, str) else d for d in shape)
