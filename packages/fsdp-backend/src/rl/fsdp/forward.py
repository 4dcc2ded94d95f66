"""Per-token outputs of a causal LM over the response part of a batch.

A batch row is `[left-padded prompt | right-padded response]`; position t of the
response is predicted by the output at position P + t - 1. The forward pass runs on
the padded rows or, with `packed=True`, on the packed real tokens only (`packing.py`);
either way only the M real response tokens are taken from the output (in row-major
order of `response_mask`), and per-token results come back as [B, R] with zeros at
padding. `share_prompts` packs each distinct prompt once (`packing.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch

from rl.core.models.routing_replay import RoutingPass
from rl.core.models.token_logprobs import logprobs_and_entropy
from rl.fsdp.packing import pack
from rl.fsdp.ulysses import GatherSequence, SequenceParallel, ShareGradient, local_slice
from rl.fsdp.vision import model_dtype, vision_inputs
from rl.kernels.gather import take


def _run(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], **options: Any) -> Any:
    """One forward pass over the whole padded rows (prompt + response), without a KV cache;
    a vision-language model sees the rows' images at their multimodal positions."""
    vision = vision_inputs(model, batch)
    positions = batch["position_ids"] if vision is None else vision.positions
    if vision is not None:
        options |= vision.model_inputs(model_dtype(model))
    return model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=positions,
        use_cache=False,
        **options,
    )


def response_outputs(
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    packed: bool,
    hidden: bool = False,
    sp: SequenceParallel | None = None,
    share_prompts: bool = False,
    lm_head: bool = False,
    routing: RoutingPass | None = None,
) -> torch.Tensor:
    """The output (logits, or the final hidden states when `hidden`) that predicts each real
    response token: [M, V] or [M, H], in the model's dtype. With `sp` (Ulysses), this rank
    runs its slice of the packed row and the outputs are gathered along it.

    `lm_head`: the model is a transformers causal LM, whose `logits_to_keep` picks the
    positions its LM head runs on: only those that predict response tokens (packed, no
    Ulysses) or the response's columns (padded), not the prompt's.

    `routing`: the MoE routes to replay in this pass, or to record (`RoutingPass`)."""
    options: dict[str, Any] = {"output_hidden_states": True, "logits_to_keep": 1} if hidden else {}
    response_len = batch["responses"].shape[1]
    if packed:
        if share_prompts and sp is not None:
            raise ValueError("shared prompts do not run with Ulysses sequence parallelism")
        inputs = pack(batch, share_prompts)
        kwargs = inputs.model_kwargs() if sp is None else local_slice(inputs, sp)
        vision = vision_inputs(model, batch)
        if vision is not None:  # (share_prompts and Ulysses are refused with images)
            assert inputs.flat_to_packed is not None
            kwargs["position_ids"] = vision.packed_positions(
                inputs.position_ids, inputs.flat_to_packed
            )
            kwargs |= vision.model_inputs(model_dtype(model))
        picked = lm_head and not hidden and sp is None
        # a shared prompt's last position predicts each of its rows' first token; on CPU the
        # model's `logits[:, logits_to_keep]` would add that position's gradients up in
        # thread order (rl.kernels.gather), so the head gets each position once and `take`
        # repeats the logits (CUDA's indexing backward is deterministic already)
        distinct = inputs.distinct_predict if picked and inputs.input_ids.is_cpu else None
        if picked:
            options["logits_to_keep"] = inputs.predict_index if distinct is None else distinct
        with _routed(routing, model, batch, inputs.flat_to_packed):
            output = model(**kwargs, use_cache=False, **options)
        states = output.hidden_states[-1] if hidden else output.logits
        if picked:
            if distinct is None:
                return states[0]
            assert inputs.predict_rows is not None
            return take(states[0], 0, inputs.predict_rows)
        if sp is not None:  # every rank's slice of the row
            states = GatherSequence.apply(states, 1, sp)
        return take(states[0], 0, inputs.predict_index)
    if sp is not None:
        raise ValueError("Ulysses sequence parallelism runs on packed rows (use_remove_padding)")
    if lm_head and not hidden:
        options["logits_to_keep"] = response_len + 1
    with _routed(routing, model, batch, None):
        output = _run(model, batch, **options)
    states = output.hidden_states[-1] if hidden else output.logits
    return states[:, -response_len - 1 : -1][batch["response_mask"].bool()]


def _routed(
    routing: RoutingPass | None,
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    flat_to_packed: torch.Tensor | None,
) -> Any:
    """The routing pass around the model call (nothing without one)."""
    if routing is None:
        return nullcontext()
    return routing.around(model, batch["attention_mask"], flat_to_packed)


def scatter_to_rows(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """[M] values of the real response tokens -> [B, R] float32, zeros at padding."""
    out = torch.zeros(response_mask.shape, dtype=torch.float32, device=values.device)
    return out.masked_scatter(response_mask.bool().to(values.device), values.float())


def response_logprobs(
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    temperature: float,
    with_entropy: bool,
    packed: bool,
    sp: SequenceParallel | None = None,
    share_prompts: bool = False,
    routing: RoutingPass | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p and entropy [B, R] of the response tokens from full logits of the real tokens."""
    mask = batch["response_mask"]
    logits = response_outputs(
        model, batch, packed, sp=sp, share_prompts=share_prompts, lm_head=True, routing=routing
    )
    tokens = batch["responses"][mask.bool()]
    logprob, entropy = logprobs_and_entropy(logits, tokens, temperature, with_entropy)
    return scatter_to_rows(logprob, mask), (
        None if entropy is None else scatter_to_rows(entropy, mask)
    )


def response_values(
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    packed: bool = False,
    sp: SequenceParallel | None = None,
    share_prompts: bool = False,
) -> torch.Tensor:
    """Critic values V(s_t) of the state before each response token: [B, R] float32."""
    values = response_outputs(model, batch, packed, sp=sp, share_prompts=share_prompts)[:, 0]
    return scatter_to_rows(values, batch["response_mask"])


def _full(weight: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a (possibly FSDP-sharded DTensor) parameter, differentiably.

    Each rank's gradient of it comes from its own rows, so it is declared partial and
    averaged over the ranks in backward (reduce-scattered to the shards), as FSDP2 averages
    the gradients of the parameters it gathers itself; `full_tensor()`'s default would
    take them for replicated and keep each rank's own slice. A tied output layer is the
    embedding: its gradient then adds up from both uses, each averaged over the ranks."""
    if not hasattr(weight, "full_tensor"):
        return weight
    from torch.distributed.tensor import Partial

    return weight.full_tensor(grad_placements=[Partial("avg")] * weight.device_mesh.ndim)


def fused_logprobs_and_entropy(
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    temperature: float,
    with_entropy: bool,
    packed: bool = False,
    sp: SequenceParallel | None = None,
    share_prompts: bool = False,
    routing: RoutingPass | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Like `response_logprobs` without [M, V] logits: the model returns its final hidden
    states (logits only for the last position), and `rl.kernels.fused_logprob_entropy`
    takes them with the LM head's weight."""
    from rl.kernels import fused_logprob_entropy

    mask = batch["response_mask"]
    hidden = response_outputs(
        model, batch, packed, hidden=True, sp=sp, share_prompts=share_prompts, routing=routing
    )
    weight = _full(model.get_output_embeddings().weight)
    if sp is not None:  # every rank of the group applies it to the whole row
        weight = ShareGradient.apply(weight, sp)
    logprob, entropy = fused_logprob_entropy(
        hidden,
        weight,
        batch["responses"][mask.bool()],
        temperature if temperature > 0 else 1.0,
        entropy=with_entropy,
    )
    return scatter_to_rows(logprob, mask), (
        None if entropy is None else scatter_to_rows(entropy, mask)
    )
