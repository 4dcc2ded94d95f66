"""`narrow_linear`: a decode step's linear layers on CPU as weight @ x^T, equal to
`F.linear` to float32 rounding, and only where it applies."""

import pytest
import torch
import torch.nn.functional as F

import rl.rollout.narrow_linear as narrow
from rl.rollout.narrow_linear import BLOCK_ROWS, NARROW_ROWS, narrow_linear, use_narrow_linears


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(32, 96), (4, 4, 96), (1, 96), (NARROW_ROWS, 96)])
def test_equals_f_linear_in_float64_to_float32_rounding(shape, bias):
    torch.manual_seed(0)
    layer = torch.nn.Linear(96, 2 * BLOCK_ROWS + 37, bias=bias)  # a partial last block
    x = torch.randn(*shape)
    with torch.inference_mode():
        got = narrow_linear(layer, x)
    want = F.linear(
        x.double(), layer.weight.double(), None if layer.bias is None else layer.bias.double()
    )
    assert got.shape == want.shape and got.dtype == torch.float32 and got.is_contiguous()
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)


def test_many_rows_and_autograd_keep_f_linear():
    layer = torch.nn.Linear(16, 8)
    many = torch.randn(NARROW_ROWS + 1, 16)
    with torch.inference_mode():
        assert torch.equal(narrow_linear(layer, many), F.linear(many, layer.weight, layer.bias))
    few = torch.randn(2, 16, requires_grad=True)
    out = narrow_linear(layer, few)  # grad mode: the autograd path, gradients flow
    out.sum().backward()
    assert torch.equal(out, F.linear(few, layer.weight, layer.bias)) and few.grad is not None


def test_a_model_keeps_its_parameters_names_and_ties(monkeypatch):
    from rl.core.config import load_config
    from rl.core.models import load_causal_lm, load_tokenizer

    config = load_config()
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer, seed=0).eval()
    before = {name: p for name, p in model.named_parameters(remove_duplicate=False)}
    ids = torch.tensor([tokenizer("12+7=").input_ids] * 6)
    with torch.inference_mode():
        want = model(input_ids=ids).logits[:, -1]
        assert use_narrow_linears(model) == 0  # the demo's layers are small: all kept
        monkeypatch.setattr(narrow, "NARROW_MIN_WEIGHTS", 0)
        assert use_narrow_linears(model) == sum(type(m) is torch.nn.Linear for m in model.modules())
        full = model(input_ids=ids).logits[:, -1]  # 6 x 5 rows: the narrow path
    after = {name: p for name, p in model.named_parameters(remove_duplicate=False)}
    assert before.keys() == after.keys() and all(before[k] is after[k] for k in before)
    assert torch.allclose(full, want, atol=1e-5)


def test_narrow_product_takes_tensors_with_or_without_a_bias():
    """`narrow_product(x, weight, bias)`, what vLLM's vocabulary heads call on CPU, is
    `F.linear` on plain tensors."""
    from rl.rollout.narrow_linear import narrow_product

    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(5000, 64, generator=generator)
    bias = torch.randn(5000, generator=generator)
    x = torch.randn(32, 64, generator=generator)
    with torch.no_grad():
        for b in (None, bias):
            torch.testing.assert_close(narrow_product(x, weight, b), F.linear(x, weight, b))


def test_the_head_benchmark_checks_and_times_each_way(capsys):
    from rl.rollout.bench.narrow_linear import main

    main(["--rows", "16", "--out", "3000", "--in", "64", "--rounds", "2", "--threads", "1"])
    printed = capsys.readouterr().out
    assert "F.linear" in printed and "narrow_product" in printed
    try:
        import vllm._custom_ops  # noqa: F401
    except ImportError:
        return
    assert "vllm_onednn_packed" in printed
