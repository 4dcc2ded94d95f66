"""`reward.stream_chunks` (rl's own): the step generates its prompts in chunks of whole
groups and scores each chunk in the background while the next one generates, and trains
exactly what the in-order step trains (the same samples: per-prompt seeds; the same
scores, shaped once over the batch; the same per-domain figures)."""

from __future__ import annotations

import json

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.engines import Rollouts
from rl.core.trainer import run_training
from rl.core.trainer.streaming import chunk_bounds, concat_rollouts, merge_raw

CALLS = """
import os, time

def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.02)
    with open(os.environ["RL_TEST_CALLS"], "a") as log:
        log.write(f"{os.getpid()} {time.monotonic()}\\n")
    return float(len(solution_str) % 3)
"""
TIMES = ("timing/", "perf/", "time", "reward/stream_chunks")


def _run(tiny, tmp_path, name, monkeypatch, *overrides):
    scorer = tmp_path / "calls.py"
    scorer.write_text(CALLS)
    monkeypatch.setenv("RL_TEST_CALLS", str(tmp_path / f"{name}.calls"))
    out = tmp_path / name
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny,
            f"reward.custom_reward_function.path={scorer}",
            "reward.num_workers=1",
            "trainer.total_training_steps=2",
            f"trainer.output_dir={out}",
            *overrides,
        ],
    )
    run_training(config)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_streamed_scoring_trains_what_in_order_scoring_trains(one_tiny_step, tmp_path, monkeypatch):
    in_order = _run(one_tiny_step, tmp_path, "in_order", monkeypatch)
    streamed = _run(one_tiny_step, tmp_path, "streamed", monkeypatch, "reward.stream_chunks=3")
    for plain, chunked in zip(in_order, streamed, strict=True):
        compared = [key for key in plain if not key.startswith(TIMES)]
        assert compared and set(compared) <= set(chunked)
        for key in compared:
            # the rollout's own log-probs round as its batch does (a chunk is smaller): the
            # samples are the same, their log-probs within float32 rounding
            close = 1e-6 if key.startswith(("mismatch/", "rollout_corr/")) else 1e-9
            assert chunked[key] == pytest.approx(plain[key], rel=1e-6, abs=close), key
    trained = [row for row in streamed if "actor/pg_loss" in row]
    assert trained and all(row["reward/stream_chunks"] == 3.0 for row in trained)
    assert all(row["timing/reward_background"] > 0 for row in trained)
    calls = (tmp_path / "streamed.calls").read_text().splitlines()
    assert len(calls) == len((tmp_path / "in_order.calls").read_text().splitlines())


def test_chunks_are_whole_groups_as_even_as_they_come():
    assert chunk_bounds(8, 3) == [(0, 3), (3, 6), (6, 8)]
    assert chunk_bounds(2, 5) == [(0, 1), (1, 2)]  # never an empty chunk
    assert chunk_bounds(4, 0) == [(0, 4)]


def test_chunk_rollouts_and_scores_join_in_order_with_their_metrics_merged():
    first = Rollouts([[1]], [[2, 3]], [[-0.1, -0.2]], ["stop"])
    second = Rollouts([[4], [5]], [[6], [7]], [[-0.3], [-0.4]], ["length", "stop"])
    joined = concat_rollouts([first, second])
    assert joined.prompt_ids == [[1], [4], [5]] and joined.finish_reasons == [
        "stop",
        "length",
        "stop",
    ]
    merged = merge_raw(
        [
            (
                [1.0],
                [{"acc": 1.0}],
                {"reward/errors": 1.0, "reward/error_rate": 0.5, "reward/mean": 1.0},
            ),
            (
                [0.0, 0.5],
                [],
                {
                    "reward/errors": 2.0,
                    "reward/error_rate": 0.2,
                    "reward/mean": 0.25,
                    "reward/j/judge_unparsed": 0.5,
                    "reward/j/count": 2.0,
                },
            ),
        ],
        [1, 2],
    )
    scores, extras, metrics = merged
    assert scores == [1.0, 0.0, 0.5] and extras == [{"acc": 1.0}, {}, {}]
    assert metrics["reward/errors"] == 3.0 and metrics["reward/error_rate"] == 0.5
    assert metrics["reward/mean"] == pytest.approx((1.0 + 2 * 0.25) / 3)
    assert metrics["reward/j/judge_unparsed"] == 0.5  # weighted by the domain's own rows


def test_what_it_cannot_stream_is_refused_by_name():
    with pytest.raises(
        ConfigError, match=r"reward.num_workers = 0 is not allowed: >= 1 with reward.stream_chunks"
    ):
        load_config(None, ["reward.stream_chunks=2"])
    with pytest.raises(ConfigError, match=r"reward.stream_chunks = 2 .*trainer.mode one_step_off"):
        load_config(
            None, ["reward.stream_chunks=2", "reward.num_workers=1", "trainer.mode=one_step_off"]
        )
    load_config(None, ["reward.stream_chunks=1"])  # one chunk: generate, then score
