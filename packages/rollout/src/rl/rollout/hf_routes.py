"""The MoE routes of `hf_sampling.sample`'s forward passes, per sampled row.

`sample` runs one prefill over the left-padded prompts [U, L] (each prompt once for its n
rows), then one decode pass per step over the rows [U * n, 1]: decode pass t runs response
token t. The recorder (`rl.core.models.routing_replay.recording`) holds one int16
[tokens, moe_layers, top_k] per pass; a row's routes are its prompt's (padding dropped)
then its response tokens', and -1 for a token no pass ran (the last one sampled).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl.core.models.routing_replay import NO_ROUTE


def row_routes(
    calls: Sequence[torch.Tensor],
    prompts: Sequence[Sequence[int]],
    n: int,
    response_lengths: Sequence[int],
) -> list[torch.Tensor]:
    """Routes [len(prompt) + response length, L, K] of each of the U * n rows (rows i*n ..
    i*n+n-1 answer `prompts[i]`), from the prefill's and the decode passes' recordings."""
    prefill, decodes = calls[0], calls[1:]
    width = max(len(p) for p in prompts)
    prefill = prefill.reshape(len(prompts), width, *prefill.shape[1:])
    rows = []
    for row, length in enumerate(response_lengths):
        prompt = len(prompts[row // n])
        response = torch.full((length, *prefill.shape[2:]), NO_ROUTE, dtype=torch.int16)
        ran = min(length, len(decodes))
        if ran:
            response[:ran] = torch.stack([decodes[t][row] for t in range(ran)])
        rows.append(torch.cat([prefill[row // n, width - prompt :], response]))
    return rows
