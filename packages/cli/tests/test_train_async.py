"""`trainer.mode: async`: rollouts run ahead of learning by up to `max_staleness` weight
versions, the weights are pushed every `sync_every` steps. With `max_staleness: 0` nothing
overlaps and the run is the sync run, weight for weight."""

from __future__ import annotations

import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from rl.cli.main import app

RUN = [
    "trainer.total_training_steps=4",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "sft.steps=0",
    "actor.entropy_coeff=0.01",  # every step updates, whatever the rewards
]


def _train(path, tiny_run, *extra):
    result = CliRunner().invoke(
        app, ["train", *tiny_run, *RUN, f"trainer.output_dir={path}", *extra]
    )
    assert result.exit_code == 0, result.output


def test_async_with_no_staleness_is_the_sync_run(tmp_path, tiny_run):
    _train(tmp_path / "sync", tiny_run)
    _train(tmp_path / "async", tiny_run, "trainer.mode=async", "trainer.max_staleness=0")
    sync = load_file(tmp_path / "sync" / "hf" / "model.safetensors")
    overlapped = load_file(tmp_path / "async" / "hf" / "model.safetensors")
    assert sync.keys() == overlapped.keys()
    assert all(torch.equal(sync[name], overlapped[name]) for name in sync)


def test_rollouts_run_ahead_by_at_most_max_staleness(tmp_path, tiny_run, metrics_rows):
    _train(tmp_path, tiny_run, "trainer.mode=async", "trainer.max_staleness=2")
    rows = [r for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    staleness = [r["rollout/staleness"] for r in rows]
    assert staleness[0] == 0.0 and max(staleness) <= 2.0 and max(staleness) >= 1.0


def test_weights_are_pushed_every_sync_every_steps(tmp_path, tiny_run, metrics_rows):
    _train(
        tmp_path, tiny_run, "trainer.mode=async", "trainer.max_staleness=1", "trainer.sync_every=2"
    )
    rows = [r for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert ["weight_sync/bytes" in r for r in rows] == [False, True, False, True]
    assert max(r["rollout/staleness"] for r in rows) <= 1.0


def test_staleness_must_cover_the_push_interval(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            "trainer.mode=async",
            "trainer.max_staleness=0",
            "trainer.sync_every=2",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    assert result.exit_code == 2 and "raise max_staleness or lower sync_every" in result.output


ROWS = 16  # data.train_batch_size (8) × rollout.n (2) responses per step


def test_partial_rollouts_train_and_record_token_staleness(tmp_path, tiny_run, metrics_rows):
    """Generated in pieces of 2 tokens, a push can land inside a step's generation (whether
    it does after step 1 depends on timing; the rollout engine's test forces it); every
    token's weights lag by at most max_staleness updates. Step 1's generation ends before
    the first push, so none of its responses is partial; afterwards the rate is a count of
    responses, and a partial one holds a token at least one update old."""
    rows = _partial_rollout_steps(tmp_path, tiny_run, metrics_rows, chunk=2)
    assert rows[0]["rollout/partial_rate"] == 0.0
    assert rows[0]["rollout/token_staleness_max"] == 0.0
    for row in rows:
        partial = row["rollout/partial_rate"] * ROWS
        assert partial == round(partial) and 0 <= partial <= ROWS, row
        if partial:
            assert row["rollout/token_staleness_max"] >= 1.0, row
        assert row["rollout/token_staleness_max"] <= 2.0
        assert row["rollout/token_staleness_mean"] <= row["rollout/staleness"]


def test_responses_generated_in_one_piece_are_never_partial(tmp_path, tiny_run, metrics_rows):
    """A piece as long as the response: weights are pushed while the rollouts run ahead
    (staleness > 0), yet no response can span two policy versions."""
    rows = _partial_rollout_steps(tmp_path, tiny_run, metrics_rows, chunk=6)
    assert [r["rollout/partial_rate"] for r in rows] == [0.0] * 4
    assert max(r["rollout/staleness"] for r in rows) >= 1.0  # pushes did land meanwhile
    for row in rows:  # one version per response: its tokens' staleness is the response's
        assert row["rollout/token_staleness_max"] <= 2.0


def _partial_rollout_steps(tmp_path, tiny_run, metrics_rows, chunk):
    """The 4 training steps' metrics of an async run (max staleness 2) generating responses
    of up to 6 tokens in pieces of `chunk`."""
    _train(
        tmp_path,
        tiny_run,
        "trainer.mode=async",
        "trainer.max_staleness=2",
        "trainer.partial_rollout=true",
        f"trainer.partial_rollout_chunk={chunk}",
        "data.max_response_length=6",
    )
    rows = [r for r in metrics_rows(tmp_path) if "actor/grad_norm" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    return rows


def test_partial_rollouts_need_an_overlapping_mode(tmp_path):
    result = CliRunner().invoke(
        app, ["train", "trainer.partial_rollout=true", f"trainer.output_dir={tmp_path}"]
    )
    assert result.exit_code == 2
    assert "trainer.partial_rollout needs trainer.mode: one_step_off or async" in result.output
