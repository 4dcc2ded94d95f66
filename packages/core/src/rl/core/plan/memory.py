"""An estimate of each role's peak memory on one device, in bytes. Pure: shapes in, bytes out.

The formulas (b = bytes of the dtype; P = parameters; T = tokens of the largest
micro-batch on the device; L layers, h hidden, i intermediate, kv = kv_heads × head_dim):

    parameters   FSDP: b × P ÷ shards + b × (embedding + LM head + 2 layers), the root unit
                 and two layers gathered at a time (the sharded copy keeps model.dtype);
                 megatron: b × P ÷ (TP × PP)
    gradients    FSDP: as the shards (b × P ÷ shards); megatron: fp32 main gradients,
                 4 × P ÷ (TP × PP)
    optimizer    AdamW's two moments: FSDP keeps them in the parameters' dtype (torch's
                 AdamW), 2 × b × P ÷ shards; megatron keeps fp32 moments and, when b < 4,
                 an fp32 master copy: (8 + 4) × P ÷ (TP × PP), ÷ data-parallel ranks too
                 with use_distributed_optimizer
    activations  per layer and token, what backward keeps of a Llama-style layer
                 (counted from the tensors a transformers forward saves, tested):
                 b × (4h + 3q + 2kv + 4i), q = heads × head_dim: the two RMS norms' input
                 and output, the rotated queries and keys, the values, the attention output
                 and its copy into o_proj, the MLP's gate, activation, up and product;
                 Qwen3's q/k norms add 2(q + kv). × L, plus the final norm's 2h, without
                 gradient checkpointing; with it b × h × L (the layers' inputs) + 2h + one
                 layer's while it is recomputed. Not counted: attention probabilities
                 (flash attention keeps none; CPU's math path keeps heads × seq² per row).
                 A forward-only pass (old / reference log-probs) keeps nothing for backward:
                 its peak is one layer's live set, the hidden state in and out and the MLP's
                 gate, up and product, b × (2h + 3i)
    logits       the log-prob pass's [response tokens, vocab] in fp32, its log-softmax and
                 (training) its gradient: 12 bytes per entry training, 8 forward-only; 0 on
                 the fused kernel path (rl.kernels' fused log-prob never builds them:
                 actor.use_fused_kernels, on by default on GPU and on CPU from a 16K
                 vocabulary, always in megatron)
    rollout      weights b × P ÷ TP plus the KV cache of the tokens in flight:
                 2 × L × kv ÷ TP × b × tokens (vLLM / SGLang preallocate instead:
                 gpu_memory_utilization × the device; on CPU VLLM_CPU_KVCACHE_SPACE GiB,
                 else room for one generation's full-length rows, prompts × rollout.n up
                 to rollout.max_num_seqs, as rl.rollout asks)

Not counted: the CUDA context and allocator fragmentation (leave ~10 %), temporary
buffers of collectives, and the HF rollout's own activations (a forward of one step).
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class RoleMemory:
    """Bytes of one role on one of its devices while it runs (its phase), and what it keeps
    there while another role of its colocation group runs (`resident`)."""

    role: str
    parameters: int = 0
    gradients: int = 0
    optimizer: int = 0
    activations: int = 0
    logits: int = 0
    kv_cache: int = 0
    resident: int = 0

    @property
    def peak(self) -> int:
        return (
            self.parameters
            + self.gradients
            + self.optimizer
            + self.activations
            + self.logits
            + self.kv_cache
        )


@dataclass(frozen=True)
class Layer:
    """What the activation formula needs of the model."""

    layers: int
    hidden: int
    intermediate: int
    kv_dim: int
    vocab: int
    q_dim: int = 0  # heads × head_dim; 0: the hidden size
    qk_norm: bool = False  # Qwen3's RMS norms of the queries and keys

    @property
    def per_token(self) -> int:
        """Elements backward keeps of one layer per token (see the module docstring)."""
        q, kv = self.q_dim or self.hidden, self.kv_dim
        return (
            4 * self.hidden + 3 * q + 2 * kv + 4 * self.intermediate + 2 * (q + kv) * self.qk_norm
        )


def activation_bytes(layer: Layer, tokens: int, dtype_bytes: int, checkpointing: bool) -> int:
    """What a forward with gradients keeps for backward over `tokens` tokens."""
    final_norm = 2 * layer.hidden
    if checkpointing:
        return dtype_bytes * tokens * (layer.hidden * layer.layers + final_norm + layer.per_token)
    return dtype_bytes * tokens * (layer.per_token * layer.layers + final_norm)


def forward_only_bytes(layer: Layer, tokens: int, dtype_bytes: int) -> int:
    """A pass without gradients: one layer's live set, b × (2h + 3i) a token."""
    return dtype_bytes * tokens * (2 * layer.hidden + 3 * layer.intermediate)


def logits_bytes(vocab: int, response_tokens: int, *, fused: bool, training: bool) -> int:
    """The [response tokens, vocab] fp32 logits, log-softmax (and gradient when training)."""
    if fused:
        return 0
    return (12 if training else 8) * response_tokens * vocab


@dataclass(frozen=True)
class Sharding:
    """How a train engine splits the model state over its ranks."""

    kind: str  # "fsdp" | "megatron" | "replicated"
    shards: int = 1  # FSDP: ranks a model is sharded over; megatron: TP × PP
    dp: int = 1  # data-parallel ranks (megatron's distributed optimizer shards over them)
    distributed_optimizer: bool = False
    gathered: int = 0  # FSDP: parameters gathered whole at a time (root unit + 2 layers)


def state_bytes(
    parameters: int, dtype_bytes: int, sharding: Sharding, *, with_optimizer: bool
) -> tuple[int, int, int]:
    """(parameters, gradients, optimizer) bytes per device of a train role."""
    per_shard = parameters // sharding.shards
    if sharding.kind == "megatron":
        optim = (8 + (4 if dtype_bytes < 4 else 0)) * per_shard
        if sharding.distributed_optimizer:
            optim //= sharding.dp
        weights = dtype_bytes * per_shard
        return (weights, 4 * per_shard, optim) if with_optimizer else (weights, 0, 0)
    weights = dtype_bytes * (per_shard + sharding.gathered)
    if not with_optimizer:
        return weights, 0, 0
    return weights, dtype_bytes * per_shard, 2 * dtype_bytes * per_shard


def kv_cache_bytes(layer: Layer, tokens: int, dtype_bytes: int, tensor_parallel_size: int) -> int:
    """Keys and values of `tokens` tokens on one TP rank: 2 × L × kv ÷ TP × b × tokens."""
    kv = max(1, layer.kv_dim // tensor_parallel_size)
    return 2 * layer.layers * kv * dtype_bytes * tokens


def device_peak(phases: dict[str, RoleMemory]) -> tuple[int, str]:
    """(peak bytes, the role running then) of a device whose roles take turns: the max over
    the phases of the running role's peak plus what the others keep resident."""
    best, who = 0, ""
    for role, memory in phases.items():
        total = memory.peak + sum(m.resident for r, m in phases.items() if r != role)
        if total > best:
            best, who = total, role
    return best, who
