"""The train-step skeleton both train engines share (`rl.core.updates`)."""

import pytest
import torch

from rl.core.updates import TOKENS, mini_batch_updates, reduce_kind, step_metrics


def micro_values(tokens: torch.Tensor, splits: list[int], total: int) -> dict[str, list[float]]:
    """What a loss function reports per micro-batch of `tokens` (one value per token):
    a token mean, a share of the mini-batch loss (normalised by all `total` tokens), a max."""
    values: dict[str, list[float]] = {"entropy": [], "actor/pg_loss": [], "actor/ratio_max": []}
    for part in torch.split(tokens, splits):
        values["entropy"].append(float(part.mean()))
        values["actor/pg_loss"].append(float(part.sum() / total))
        values["actor/ratio_max"].append(float(part.max()))
    values[TOKENS] = [float(n) for n in splits]
    return values


def test_step_metrics_are_the_whole_mini_batchs_whatever_the_micro_batches_and_ranks():
    tokens = torch.rand(40, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    whole = {
        "actor/entropy": float(tokens.mean()),
        "actor/pg_loss": float(tokens.sum() / 40),
        "actor/ratio_max": float(tokens.max()),
    }
    one_rank = step_metrics(micro_values(tokens, [3, 17, 20], 40), "actor")
    assert one_rank == pytest.approx(whole, rel=1e-12)
    # two ranks, 25 and 15 tokens, in micro-batches of their own: each reports the whole
    shares = [micro_values(tokens[:25], [5, 20], 40), micro_values(tokens[25:], [15], 40)]
    sent: list[list[torch.Tensor]] = [[], []]
    for rank, values in enumerate(shares):  # what each rank puts into the all-reduce
        step_metrics(values, "actor", lambda t, op, rank=rank: sent[rank].append(t) or t)

    def all_reduce(rank):
        calls = iter(range(2))

        def reduce(tensor, op):
            other = sent[1 - rank][next(calls)]
            return tensor + other if op == "sum" else torch.maximum(tensor, other)

        return reduce

    for rank, values in enumerate(shares):
        assert step_metrics(values, "actor", all_reduce(rank)) == pytest.approx(whole, rel=1e-12)
    # a sequence-parallel pair holds one share twice: its loss share counts once
    twice = step_metrics(shares[0], "actor", lambda t, op: t * 2 if op == "sum" else t, 2)
    alone = step_metrics(shares[0], "actor")
    assert twice == pytest.approx(alone, rel=1e-12)
    assert step_metrics({}, "critic") == {}


def test_the_kl_loss_metric_is_the_mini_batchs_mean_kl_per_token_however_it_is_split():
    """`kl_loss` reports each micro-batch's mean KL per token: the step's metric is the whole
    mini-batch's however the micro-batches split it (it was summed as a loss share, so it
    grew with the micro-batches a rank ran: a 2-rank run reported another value)."""
    from rl.core.algorithms.kl import kl_loss

    generator = torch.Generator().manual_seed(1)
    logprobs = -torch.rand(8, 5, dtype=torch.float64, generator=generator)
    ref = -torch.rand(8, 5, dtype=torch.float64, generator=generator)
    mask = torch.rand(8, 5, generator=generator) > 0.3

    def split(rows):
        values: dict[str, list[float]] = {"actor/kl_loss": [], TOKENS: []}
        for part in torch.split(torch.arange(8), rows):
            _, metrics = kl_loss(logprobs[part], ref[part], mask[part], "low_var_kl")
            values["actor/kl_loss"].append(metrics["actor/kl_loss"])
            values[TOKENS].append(float(mask[part].sum()))
        return values

    (whole,) = split(8)["actor/kl_loss"]
    assert reduce_kind("actor/kl_loss") == "mean"  # over ranks too: the test above
    for rows in (2, [1, 3, 4]):
        assert step_metrics(split(rows), "actor")["actor/kl_loss"] == pytest.approx(whole)


def test_each_metric_combines_by_its_kind():
    assert [reduce_kind(k) for k in ("actor/pg_loss", "critic/vf_loss", "actor/ratio_min")] == [
        "sum",
        "sum",
        "min",
    ]
    assert reduce_kind("actor/entropy") == reduce_kind("actor/pg_clipfrac") == "mean"
    assert reduce_kind("actor/loss") == reduce_kind("critic/loss") == "sum"  # the whole loss
    values = {"vf_clipfrac": [0.5], "critic/vf_loss": [2.0], "ratio/min": [0.9], TOKENS: [4.0]}
    assert step_metrics(values, "critic") == {
        "critic/vf_clipfrac": 0.5,
        "critic/vf_loss": 2.0,
        "ratio/min": 0.9,
    }


def updates(skipped: list[float]):
    """Runs `mini_batch_updates` over one mini-batch per entry of `skipped`; the calls it
    made, in order, and its result."""
    calls: list[str] = []

    def step(mini: int) -> dict[str, float]:
        calls.append(f"step {mini}")
        return {
            "critic/loss": float(mini),
            "critic/skipped_steps": skipped[mini],
            "critic/grad_norm": 10.0 * mini,
        }

    def lr() -> float:
        calls.append("lr")
        return 0.1

    def weight_norm() -> float:
        calls.append("weight_norm")
        return 7.0

    result = mini_batch_updates(
        range(len(skipped)), step, "critic", lr, lambda: calls.append("schedule"), weight_norm
    )
    return calls, result


def test_steps_then_lr_then_the_schedule_then_the_weight_norm_metrics_averaged():
    calls, result = updates([0.0, 1.0, 0.0])
    assert calls == ["step 0", "step 1", "step 2", "lr", "schedule", "weight_norm"]
    assert result == {
        "critic/loss": 1.0,
        "critic/skipped_steps": pytest.approx(1 / 3),
        "critic/grad_norm": 10.0,
        "lr": 0.1,
        "critic/weight_norm": 7.0,
    }


def test_the_schedule_stays_when_every_step_was_skipped():
    calls, result = updates([1.0, 1.0])
    assert "schedule" not in calls
    assert result["critic/skipped_steps"] == 1.0
