"""Per-token outputs of a megatron-core GPTModel over the response tokens of a micro-batch.

The model runs up to its final norm (`final_hidden_states`: the last stage's output
layer is skipped), and the log-probs and entropy come from `rl.kernels.
fused_logprob_entropy` in vocab-parallel mode: each TP rank holds a slice of the output
layer's rows, the op merges the softmax statistics over the TP group and, in backward,
sums the hidden-state gradient over it (what megatron's column-parallel output layer
does). [M, V] logits are never built. Under sequence parallelism the final hidden states
are split along the sequence: they are gathered first (backward: each rank keeps its
slice of the gradient, which the op has already summed). A critic's values come from
its `ValueHead` on the same states.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from rl.megatron.inputs import ModelInputs


def unwrap(model: torch.nn.Module) -> Any:
    """The GPTModel inside megatron's DDP / Float16Module wrappers."""
    while hasattr(model, "module"):
        model = model.module
    return model


@contextmanager
def final_hidden_states(model: torch.nn.Module) -> Iterator[None]:
    """Within: the (last-stage) model returns its final-norm output, not logits."""
    gpt = unwrap(model)
    post_process = gpt.post_process
    gpt.post_process = False
    try:
        yield
    finally:
        gpt.post_process = post_process


def run_model(model: torch.nn.Module, inputs: ModelInputs) -> torch.Tensor:
    """[S, B, H] hidden states of this stage (the final norm's output on the last)."""
    with final_hidden_states(model):
        return model(
            inputs.input_ids,
            inputs.position_ids,
            None,
            packed_seq_params=inputs.packed_seq_params,
        )


def predicting_states(
    hidden: torch.Tensor, inputs: ModelInputs, sequence_parallel: bool
) -> torch.Tensor:
    """[M, H]: the final hidden state that predicts each real response token."""
    from megatron.core.tensor_parallel import gather_from_sequence_parallel_region

    if sequence_parallel:
        hidden = gather_from_sequence_parallel_region(hidden, tensor_parallel_output_grad=False)
    flat = hidden.transpose(0, 1).reshape(-1, hidden.shape[-1])  # [B * S, H]
    return flat[inputs.predict_index]


def output_weight(model: torch.nn.Module) -> torch.Tensor:
    """This TP rank's rows of the output layer (the embedding's when tied)."""
    gpt = unwrap(model)
    if gpt.share_embeddings_and_output_weights:
        return gpt.shared_embedding_or_output_weight()
    return gpt.output_layer.weight


def response_logprobs(
    model: torch.nn.Module,
    hidden: torch.Tensor,
    inputs: ModelInputs,
    micro: Mapping[str, torch.Tensor],
    temperature: float,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p and entropy [B, R] (float32, zeros at padding) from the last stage's output."""
    from megatron.core import parallel_state as ps
    from rl.kernels import fused_logprob_entropy

    mask = micro["response_mask"].bool()
    tp = ps.get_tensor_model_parallel_world_size()
    logprob, entropy = fused_logprob_entropy(
        predicting_states(hidden, inputs, unwrap(model).config.sequence_parallel),
        output_weight(model),
        micro["responses"][mask],
        temperature if temperature > 0 else 1.0,
        entropy=with_entropy,
        tp_group=ps.get_tensor_model_parallel_group() if tp > 1 else None,
    )
    return _rows(logprob, mask), None if entropy is None else _rows(entropy, mask)


def response_values(
    model: torch.nn.Module,
    hidden: torch.Tensor,
    inputs: ModelInputs,
    micro: Mapping[str, torch.Tensor],
) -> torch.Tensor:
    """A critic's V(s) [B, R] (float32, zeros at padding) of the state before each
    response token, from the last stage's output through its `ValueHead`."""
    states = predicting_states(hidden, inputs, unwrap(model).config.sequence_parallel)
    values = unwrap(model).output_layer(states).squeeze(-1)
    return _rows(values, micro["response_mask"].bool())


def _rows(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(mask.shape, dtype=torch.float32, device=values.device)
    return out.masked_scatter(mask.to(values.device), values.float())
