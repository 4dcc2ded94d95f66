"""On-policy distillation's math: the per-token reverse-KL terms against a float64
reference written from their definitions and against verl 0.9.1's own `kl_penalty`
(the function its distillation losses call; loaded from .upstream/verl-0.9.1's source
by path, never imported by rl), the loss term in both of verl's modes, ROLL's advantage."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch

from rl.core.algorithms import agg_loss
from rl.core.algorithms.distillation import (
    ESTIMATOR_LOSS_MODES,
    DistillationLossConfig,
    check_loss_mode,
    distillation_advantages,
    distillation_term,
    reverse_kl_metrics,
    token_reverse_kl,
    token_rewards,
)

VERL = Path(__file__).resolve().parents[4] / ".upstream" / "verl-0.9.1"
CORE_ALGOS = VERL / "verl" / "trainer" / "ppo" / "core_algos.py"

FORMULAS = {  # KL(p || q) estimators of the sampled token, a = log p, b = log q
    "kl": lambda a, b: a - b,
    "k1": lambda a, b: a - b,
    "abs": lambda a, b: abs(a - b),
    "mse": lambda a, b: 0.5 * (a - b) ** 2,
    "k2": lambda a, b: 0.5 * (a - b) ** 2,
    "low_var_kl": lambda a, b: min(max(math.exp(b - a) - (b - a) - 1, -10), 10),
    "k3": lambda a, b: min(max(math.exp(b - a) - (b - a) - 1, -10), 10),
}


@pytest.fixture(scope="module")
def verl_kl_penalty():
    """verl 0.9.1's `kl_penalty` (and the `kl_penalty_forward` it calls), executed from
    its source text with torch alone."""
    if not CORE_ALGOS.is_file():
        pytest.fail(f"{VERL} is missing: run scripts/fetch-upstream.sh (install-dev.sh does)")
    tree = ast.parse(CORE_ALGOS.read_text())
    wanted = {"kl_penalty", "kl_penalty_forward"}
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {f.name for f in functions} == wanted
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=functions, type_ignores=[]), str(CORE_ALGOS), "exec"), namespace)
    return namespace["kl_penalty"]


def case(seed, shape=(4, 6)):
    g = torch.Generator().manual_seed(seed)
    student = -torch.rand(*shape, generator=g) * 4
    teacher = student + torch.randn(*shape, generator=g)
    mask = (torch.rand(*shape, generator=g) > 0.25).double()
    mask[:, 0] = 1
    return student, teacher, mask


@pytest.mark.parametrize("mode", ESTIMATOR_LOSS_MODES)
def test_token_terms_match_the_formula_and_verl(mode, verl_kl_penalty):
    student, teacher, _ = case(0)
    student[0, 0], teacher[0, 0] = -0.1, -40.0  # k3's clamp binds
    got = token_reverse_kl(student, teacher, mode)
    expected = torch.tensor(
        [
            [FORMULAS[mode](a, b) for a, b in zip(r, q, strict=True)]
            for r, q in zip(student.tolist(), teacher.tolist(), strict=True)
        ]
    )
    assert torch.allclose(got, expected, atol=1e-12)
    assert torch.equal(got, verl_kl_penalty(student, teacher, mode))


def test_clamp_bounds_both_sides():
    student = torch.tensor([-0.1, -30.0, -1.0])
    teacher = torch.tensor([-30.0, -0.1, -1.5])
    got = token_reverse_kl(student, teacher, "k1", loss_max_clamp=5.0)
    assert got.tolist() == [5.0, -5.0, pytest.approx(0.5)]


def test_token_rewards_are_minus_k1_on_the_response():
    student, teacher, mask = case(1)
    r = token_rewards(student, teacher, mask)
    assert torch.equal(r, -(student - teacher) * mask)
    assert torch.all(r[mask == 0] == 0)


def test_supervised_term_is_the_aggregated_estimate_and_pulls_toward_the_teacher():
    student, teacher, mask = case(2)
    logp = student.clone().requires_grad_(True)
    config = DistillationLossConfig(loss_mode="k3", use_policy_gradient=False)
    term, metrics = distillation_term(logp, student, teacher, mask, config, "token-mean")
    k3 = [
        FORMULAS["k3"](a, b) * m
        for a, b, m in zip(
            student.flatten().tolist(),
            teacher.flatten().tolist(),
            mask.flatten().tolist(),
            strict=True,
        )
    ]
    assert term.item() == pytest.approx(sum(k3) / mask.sum().item(), rel=1e-12)
    term.backward()
    # d k3 / d log p = 1 - q/p: zero where p = q, pushing log p toward log q
    expected = (1 - (teacher - student).exp()) * mask / mask.sum()
    assert torch.allclose(logp.grad, expected, atol=1e-12)
    assert metrics["distillation/loss_max"] >= metrics["distillation/loss_min"] >= 0


def test_policy_gradient_term_is_ppo_with_minus_the_estimate_as_advantage():
    student, teacher, mask = case(3)
    old = student + 0.05 * torch.randn(student.shape, generator=torch.Generator().manual_seed(9))
    logp = student.clone().requires_grad_(True)
    config = DistillationLossConfig(loss_mode="k1", use_policy_gradient=True, loss_max_clamp=1.0)
    term, metrics = distillation_term(logp, old, teacher, mask, config, "seq-mean-token-mean")
    # float64 reference: A = -clamp(log p - log q, ±1); PPO clip 0.2, dual clip 3
    total, rows = 0.0, 0
    for lp, lo, lq, m in zip(
        student.tolist(), old.tolist(), teacher.tolist(), mask.tolist(), strict=True
    ):
        losses = []
        for a, o, b, keep in zip(lp, lo, lq, m, strict=True):
            if not keep:
                continue
            adv = -min(max(a - b, -1.0), 1.0)
            ratio = math.exp(a - o)
            loss = max(-adv * ratio, -adv * min(max(ratio, 0.8), 1.2))
            if adv < 0:
                loss = min(loss, -adv * 3.0)
            losses.append(loss)
        total += sum(losses) / len(losses)
        rows += 1
    assert term.item() == pytest.approx(total / rows, rel=1e-10)
    assert "distillation/pg_clipfrac" in metrics
    term.backward()
    assert logp.grad.abs().sum() > 0


def test_advantages_add_minus_coef_estimate_to_the_task_advantage():
    student, teacher, mask = case(4)
    task = torch.randn(student.shape, generator=torch.Generator().manual_seed(5)) * mask
    pure = distillation_advantages(student, teacher, mask, coef=0.5)
    assert torch.allclose(pure, -0.5 * (student - teacher) * mask, atol=1e-12)
    mixed = distillation_advantages(student, teacher, mask, coef=0.5, task_advantages=task)
    assert torch.allclose(mixed, task + pure, atol=1e-12)
    k3 = distillation_advantages(student, teacher, mask, loss_mode="k3")
    assert torch.all(k3 <= 0)  # k3 >= 0: never a positive advantage


@pytest.mark.parametrize(
    ("mode", "pg", "needle"),
    [
        ("forward_kl_topk", False, "top-k"),
        ("k1", False, "use_policy_gradient = false"),
        ("kl", False, "use_policy_gradient = false"),
        ("full", True, "allowed"),
        ("k3+", True, "allowed"),
    ],
)
def test_unsupported_modes_are_refused_by_name(mode, pg, needle):
    with pytest.raises(ValueError, match="distillation.distillation_loss.loss_mode") as error:
        check_loss_mode(mode, pg)
    assert needle in str(error.value)


def test_policy_loss_mode_other_than_vanilla_is_refused():
    with pytest.raises(ValueError, match="policy_loss_mode"):
        DistillationLossConfig(policy_loss_mode="gspo")


def test_reverse_kl_metrics():
    student, teacher, mask = case(6)
    metrics = reverse_kl_metrics(student, teacher, mask)
    expected = float(((student - teacher) * mask).sum() / mask.sum())
    assert metrics["distillation/reverse_kl"] == pytest.approx(expected, rel=1e-12)
    assert metrics["distillation/reverse_kl_k3"] >= 0


def test_same_model_gives_zero_everything():
    student, _, mask = case(7)
    assert reverse_kl_metrics(student, student, mask)["distillation/reverse_kl"] == 0
    config = DistillationLossConfig()
    term, _ = distillation_term(student, student, student, mask, config)
    assert term.item() == 0
    assert agg_loss(token_reverse_kl(student, student), mask, "token-mean").item() == 0
