"""DAPO's dynamic sampling (`algorithm.filter_groups`, `data.gen_batch_size`) on the tiny
model, with the real rollout engine, reward and sampler: groups whose metric is the same
for all samples are dropped, generation goes on until the batch is full, the cap stops
the run as verl's does, and a resumed run draws the prompts an unbroken one draws."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from rl.core.algorithms import informative_groups
from rl.core.config import load_config
from rl.core.config.dapo import FilterGroupsConfig
from rl.core.data import PromptSampler
from rl.core.demo import DEMO_CONFIG
from rl.core.errors import ConfigError, TrainingError
from rl.core.trainer import run_training
from rl.core.trainer.build import build_context
from rl.core.trainer.dynamic_sampling import collect

N, BATCH = 2, 4
TINY = [
    "data.builtin_train_size=24",
    "data.builtin_val_size=4",
    f"data.train_batch_size={BATCH}",
    "data.max_response_length=3",
    "actor.ppo_mini_batch_size=4",
    "actor.optim.lr_scheduler=constant",  # a run's length may change on resume
    f"rollout.n={N}",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.progress_bar=false",
    "sft.steps=0",
]
FILTER = ["algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=score"]

# Even answers score 1 whatever the response: their groups teach nothing and are dropped.
SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if int(str(ground_truth).strip()) % 2 == 0:
        return 1.0
    return float(sum(map(ord, solution_str)) % 5)
"""


def _config(tmp_path, name, *overrides):
    scorer = tmp_path / "scorer.py"
    scorer.write_text(SCORER)
    return load_config(
        DEMO_CONFIG,
        [
            *TINY,
            f"reward.custom_reward_function.path={scorer}",
            f"trainer.output_dir={tmp_path / name}",
            *overrides,
        ],
    )


def _rows(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_informative_groups_as_verls_filter():
    values = [1, 1, 0, 1, 0.5, 0.5, 0, 0]
    assert informative_groups(values, 2) == [False, True, False, False]
    assert informative_groups([3.0, 3.0], 1) == [True, True]  # one sample: always kept
    # numpy's std, as verl's trainer: three equal 0.1s have a std of ~1e-17, kept there too
    assert informative_groups([0.1] * 3, 3) == [bool(np.std([0.1] * 3) > 0)]
    with pytest.raises(ValueError, match="groups of 3"):
        informative_groups([1.0, 2.0], 3)


def test_collect_fills_the_batch_with_informative_groups_only(tmp_path):
    config = _config(tmp_path, "collect", *FILTER, "trainer.total_training_steps=1")
    ctx = build_context(config, tmp_path / "collect")
    try:
        ctx.sync_weights(0)  # as the trainer does before anything is generated
        collected = collect(ctx, 0)
        metrics = collected.metrics
        drawn = int(metrics["train/num_gen_batches"])
        assert drawn >= 2 and metrics["dynamic_sampling/dropped_groups"] > 0
        assert metrics["dynamic_sampling/kept_groups"] >= BATCH
        # exactly train_batch_size groups of n, each with differing scores, none even
        assert collected.batch["responses"].shape[0] == BATCH * N == len(collected.uids)
        scores = collected.batch["token_level_scores"].sum(1).view(BATCH, N)
        assert bool((scores.std(1) > 0).all())
        assert all(int(item.ground_truth) % 2 == 1 for item in collected.items)
        assert len(set(collected.uids)) == BATCH
        # the kept prompts are the first informative ones in the sampler's order
        sampler = PromptSampler(len(ctx.train_data), BATCH, seed=config.data.seed)
        order = [i for _ in range(drawn) for i in sampler.next_batch()]
        kept = [item.index for item in collected.items]
        positions = [order.index(i) for i in kept]
        assert positions == sorted(positions)
        assert ctx.sampler.state_dict()["position"] == drawn  # every draw counted
        # the cap: verl's error when max_num_gen_batches batches did not fill the step
        capped = replace(
            config.algorithm, filter_groups=FilterGroupsConfig(True, "score", max_num_gen_batches=1)
        )
        ctx.config = replace(config, algorithm=capped)
        ctx.sync_weights(1)  # step k generates with the weights of k updates
        with pytest.raises(TrainingError, match="max_num_gen_batches = 1"):
            collect(ctx, 1)
        ctx.config = replace(
            config, algorithm=replace(capped, filter_groups=FilterGroupsConfig(True, "acc"))
        )
        ctx.sync_weights(2)
        with pytest.raises(TrainingError, match="filter_groups.metric = acc"):
            collect(ctx, 2)  # a plain-number reward under the naive manager records no acc
    finally:
        ctx.launched.shutdown()


@pytest.mark.slow
def test_resumed_run_draws_what_an_unbroken_one_draws(tmp_path):
    whole = _config(tmp_path, "whole", *FILTER, "trainer.total_training_steps=2")
    run_training(whole)
    first = _config(
        tmp_path, "split", *FILTER, "trainer.total_training_steps=1", "trainer.save_freq=1"
    )
    run_training(first)
    resumed = _config(
        tmp_path, "split", *FILTER, "trainer.total_training_steps=2", "trainer.save_freq=1"
    )
    run_training(resumed)
    keys = (
        "train/num_gen_batches",
        "dynamic_sampling/kept_groups",
        "dynamic_sampling/dropped_groups",
        "reward/mean",
        "reward/score_mean",
    )
    unbroken, split = _rows(tmp_path / "whole")[-1], _rows(tmp_path / "split")[-1]
    assert unbroken["step"] == split["step"] == 2
    assert {k: unbroken[k] for k in keys} == pytest.approx({k: split[k] for k in keys})
    state = torch.load(
        tmp_path / "split" / "checkpoints" / "global_step_2" / "trainer_state.pt",
        weights_only=True,
    )
    drawn = sum(int(row["train/num_gen_batches"]) for row in _rows(tmp_path / "whole"))
    assert state["sampler"]["position"] + 6 * state["sampler"]["epoch"] == drawn

    # flipping filter_groups.enable changes the run: one batch of 4 prompts, nothing dropped
    plain = _config(tmp_path, "plain", "trainer.total_training_steps=1")
    run_training(plain)
    row = _rows(tmp_path / "plain")[-1]
    assert "train/num_gen_batches" not in row
    assert row["reward/mean"] != pytest.approx(_rows(tmp_path / "whole")[0]["reward/mean"])


def test_settings_it_cannot_honour_are_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="trainer.mode"):
        _config(tmp_path, "x", *FILTER, "trainer.mode=one_step_off")
    with pytest.raises(ConfigError, match="data.gen_batch_size"):
        _config(tmp_path, "x", "data.gen_batch_size=8")
    with pytest.raises(ConfigError, match="filter_groups.metric"):
        _config(tmp_path, "x", "algorithm.filter_groups.enable=true")
    with pytest.raises(ConfigError, match="data.builtin_train_size"):
        _config(tmp_path, "x", *FILTER, "data.gen_batch_size=32")


def test_the_dapo_example_has_all_four_changes_on():
    from pathlib import Path

    example = Path(__file__).resolve().parents[4] / "examples" / "dapo.yaml"
    config = load_config(example, [])
    assert config.algorithm.filter_groups.enable and config.data.gen_batch_size == 48
    assert config.reward.reward_manager == "dapo" and config.reward.overlong_buffer.enable
    assert config.actor.clip_ratio_high > config.actor.clip_ratio_low
    assert config.actor.loss_agg_mode == "token-mean"


def test_merged_draws_keep_every_rollouts_field():
    """The kept rows of several draws are one `Rollouts` with every per-row field the
    engines filled (routing replay's routed_experts, weight versions, ...) in row order."""
    from dataclasses import fields
    from types import SimpleNamespace

    from rl.core.engines import Rollouts
    from rl.core.trainer.dynamic_sampling import _select_rollouts
    from rl.core.vision.inputs import ImageInputs

    def draw(tag):
        return Rollouts(
            prompt_ids=[[tag, 0], [tag, 1]],
            response_ids=[[tag], [tag]],
            logprobs=[[-1.0], [-2.0]],
            finish_reasons=["stop", "length"],
            loss_masks=[[1], [1]],
            policy_versions=[[tag], [tag]],
            returns=[0.5, 1.5],
            weight_versions=[tag, tag],
            routed_experts=[torch.full((3, 1, 2), tag), torch.full((3, 1, 2), tag + 1)],
            answers=[str(tag), None],
            answer_rewards=[None, float(tag)],
            images=[ImageInputs(torch.full((4, 6), float(tag)), torch.tensor([[1, 2, 2]])), None],
        )

    first, second = SimpleNamespace(rollouts=draw(1)), SimpleNamespace(rollouts=draw(2))
    merged = _select_rollouts([(first, 1), (second, 0)])
    for field in fields(Rollouts):
        picked = getattr(merged, field.name)
        assert len(picked) == 2, field.name
        assert picked[0] is getattr(first.rollouts, field.name)[1], field.name
        assert picked[1] is getattr(second.rollouts, field.name)[0], field.name


def test_a_draw_without_images_keeps_the_other_draws_images():
    from types import SimpleNamespace

    from rl.core.engines import Rollouts
    from rl.core.trainer.dynamic_sampling import _select_rollouts
    from rl.core.vision.inputs import ImageInputs

    image = ImageInputs(torch.zeros(4, 6), torch.tensor([[1, 2, 2]]))
    seen = Rollouts([[1]], [[2]], [[-1.0]], images=[image])
    text = Rollouts([[3]], [[4]], [[-1.0]])
    merged = _select_rollouts(
        [(SimpleNamespace(rollouts=text), 0), (SimpleNamespace(rollouts=seen), 0)]
    )
    assert merged.images == [None, image]
