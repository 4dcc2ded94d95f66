"""`take`: a gather whose gradient over repeated positions is bit-identical run to run.

Two CPU threads are what made the demo drift (issue 34): indexing's backward
(`index_put_(accumulate=True)`) then adds the gradients of a repeated position with atomic
float adds in whatever order the threads reach it."""

import pytest
import torch

from rl.kernels.gather import take


@pytest.fixture
def two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def shared_prompt_positions(generator, prompts=8, rows_per_prompt=16, prompt=12, response=4):
    """[rows, prompt + response] packed positions: each row its prompt's positions, then
    its own response's, rows shuffled (as length buckets mix the prompts' rows)."""
    rows = []
    for p in range(prompts):
        base = p * (prompt + rows_per_prompt * response)
        for r in range(rows_per_prompt):
            own = base + prompt + r * response + torch.arange(response)
            rows.append(torch.cat([base + torch.arange(prompt), own]))
    order = torch.randperm(len(rows), generator=generator)
    return torch.stack(rows)[order], prompts * (prompt + rows_per_prompt * response)


def test_take_is_index_select_and_its_gradient_adds_the_repeats():
    generator = torch.Generator().manual_seed(0)
    index, n = shared_prompt_positions(generator, prompts=2, rows_per_prompt=3)
    source = torch.randn(2, n, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    taken = take(source, 1, index.reshape(-1))
    assert torch.equal(taken, source[:, index.reshape(-1)])
    grad = torch.randn(taken.shape, dtype=torch.float64, generator=generator)
    taken.backward(grad)
    expected = torch.zeros_like(source).index_add_(1, index.reshape(-1), grad)
    torch.testing.assert_close(source.grad, expected)
    assert torch.equal(take(source, -2, index.reshape(-1)), taken)


def test_take_gradient_is_bit_identical_run_to_run_with_two_threads(two_threads):
    generator = torch.Generator().manual_seed(1)
    index, n = shared_prompt_positions(generator)
    source = torch.randn(1, n, 64, generator=generator, requires_grad=True)
    grad = torch.randn(1, index.numel(), 64, generator=generator)
    grads = []
    for _ in range(20):
        source.grad = None
        take(source, 1, index.reshape(-1)).backward(grad)
        grads.append(source.grad.clone())
    assert all(torch.equal(g, grads[0]) for g in grads)
