"""Table-driven weight layouts: Hugging Face checkpoints <-> megatron-core, and TP sharding.

```python
from rl.megatron.layouts import converter_for

conv = converter_for(hf_config)                       # by model_type
mcore = dict(conv.from_hf(hf_state_dict.items()))     # HF names -> mcore names, fused
shards = conv.split_tp(name, mcore[name], tp_size=2)  # full -> per-rank shards
hf = conv.to_hf(mcore.items())                        # back, streamed
```
"""

from __future__ import annotations

from .converter import LayoutConverter
from .dims import ModelDims
from .errors import LayoutError
from .fuse import GATE_UP, IDENTITY, QKV, VOCAB, Fuse
from .registry import ARCHITECTURES, converter_for, supported_model_types
from .table import LayoutTable, Pattern, Rule
from .tp import TPKind, merge_parts, merge_vocab, padded_vocab_size, split_parts, split_vocab

__all__ = [
    "ARCHITECTURES",
    "GATE_UP",
    "IDENTITY",
    "QKV",
    "VOCAB",
    "Fuse",
    "LayoutConverter",
    "LayoutError",
    "LayoutTable",
    "ModelDims",
    "Pattern",
    "Rule",
    "TPKind",
    "converter_for",
    "merge_parts",
    "merge_vocab",
    "padded_vocab_size",
    "split_parts",
    "split_vocab",
    "supported_model_types",
]
