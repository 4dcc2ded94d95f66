"""The varlen benchmark compares like with like: its padded and packed steps compute the
same loss and gradients on the same rows."""

import pytest
import torch

pytest.importorskip("transformers")

from rl.kernels.bench.varlen import build_model, make_rows, packed_step, padded_step


def test_padded_and_packed_steps_agree():
    shape = {"vocab": 256, "hidden": 128, "layers": 2}
    model = build_model(shape, torch.device("cpu"))
    rows = make_rows([1, 9, 3, 30], prompt_len=8, vocab=256)
    losses, grads = [], []
    for step in (padded_step, packed_step):
        model.zero_grad()
        loss = step(model, rows, 8, torch.device("cpu"))
        loss.backward()
        losses.append(loss.detach())
        grads.append(model.model.layers[0].self_attn.q_proj.weight.grad.clone())
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)
