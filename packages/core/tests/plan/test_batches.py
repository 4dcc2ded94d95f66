"""The batch arithmetic against hand-worked examples, and refusals naming the key."""

from __future__ import annotations

import pytest

from rl.core.config import ConfigError, load_config
from rl.core.plan import check_plan, make_plan

# verl's quickstart (docs/start/quickstart.rst: PPO on GSM8K, a critic) on 8 GPUs
VERL_QUICKSTART_8 = [
    "trainer.launcher=ray",
    "trainer.device=cuda",
    "cluster.n_gpus_per_node=8",
    "cluster.hybrid_engine=true",
    "algorithm.adv_estimator=gae",
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "actor.ppo_mini_batch_size=64",
    "actor.ppo_micro_batch_size_per_gpu=4",
    "critic.ppo_mini_batch_size=64",
    "critic.ppo_micro_batch_size_per_gpu=4",
    "rollout.n=1",
]


def test_verl_quickstart_on_8_gpus_by_hand():
    """256 prompts × 1 = 256 rows over 8 ranks: 32 each; 256 / 64 = 4 optimizer steps of
    64 rows = 8 per rank = 2 micro-batches of 4 rows × 1024 tokens; 8 rollout replicas
    draw 32 prompts each."""
    plan = make_plan(load_config(None, VERL_QUICKSTART_8), memory=False)
    for role in ("actor", "critic"):
        train = plan.train[role]
        assert (train.dp, train.rows_per_rank, train.optimizer_steps) == (8, 32, 4)
        assert (train.rows_per_mini_per_rank, train.micro_per_mini) == (8, 2)
        assert train.micro_tokens == 4 * 1024
    assert plan.rollout.replicas == 8
    assert (plan.rollout.prompts_per_replica, plan.rollout.samples_per_replica) == (32, 32)


def test_grpo_n5_by_hand():
    """examples/gsm8k_grpo.yaml's sizes on 8 ranks: 256 × 5 = 1280 rows, 160 per rank;
    mini 64 × 5 = 320 rows, 40 per rank = 3 micro-batches of 16 (16, 16, 8); 8 replicas
    of 32 prompts, 160 samples."""
    overrides = [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=8",
        "data.train_batch_size=256",
        "actor.ppo_mini_batch_size=64",
        "actor.ppo_micro_batch_size_per_gpu=16",
        "rollout.n=5",
    ]
    plan = make_plan(load_config(None, overrides), memory=False)
    actor = plan.train["actor"]
    assert (actor.rows, actor.rows_per_rank, actor.rows_per_mini_per_rank) == (1280, 160, 40)
    assert (actor.micro_rows, actor.micro_per_mini, actor.optimizer_steps) == (16, 3, 4)
    assert (plan.rollout.prompts_per_replica, plan.rollout.samples_per_replica) == (32, 160)


def test_disaggregated_rollout_draws_from_its_own_devices():
    """Actor on devices 0-1, rollout (TP 1) on 2-3: two train ranks, two replicas; 6
    prompts × 4 = 24 rows, 12 per rank; each replica 3 prompts, 12 samples."""
    overrides = [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=4",
        "cluster.placement={actor: '0-1', rollout: '2-3'}",
        "data.train_batch_size=6",
        "actor.ppo_mini_batch_size=6",
        "rollout.n=4",
    ]
    plan = make_plan(load_config(None, overrides), memory=False)
    assert plan.layout.train_ranks == 2 and plan.rollout.replicas == 2
    assert plan.train["actor"].rows_per_rank == 12
    assert (plan.rollout.prompts_per_replica, plan.rollout.samples_per_replica) == (3, 12)
    assert plan.layout.groups == (((0, 1), ("actor",)), ((2, 3), ("rollout",)))


def test_uneven_prompts_per_replica_round_up_and_rerank_spreads_samples():
    """5 prompts over 3 replicas: whole prompts, 2 each (the last 1), 8 samples; with
    data_rerank 6 × 4 = 24 single samples spread 8 per replica."""
    base = [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=3",
        "cluster.placement={actor: 0, rollout: '0-2'}",
        "rollout.n=4",
    ]
    five = ["data.train_batch_size=5", "actor.ppo_mini_batch_size=5"]
    whole = make_plan(load_config(None, base + five), memory=False)
    assert whole.rollout.replicas == 3
    assert (whole.rollout.prompts_per_replica, whole.rollout.samples_per_replica) == (2, 8)
    six = ["data.train_batch_size=6", "actor.ppo_mini_batch_size=6", "rollout.data_rerank=true"]
    rerank = make_plan(load_config(None, base + six), memory=False)
    assert rerank.rollout.samples_per_replica == 8


def test_rows_that_do_not_split_are_refused_naming_the_key():
    minis = ["actor.ppo_mini_batch_size=50", "critic.ppo_mini_batch_size=50"]
    config = load_config(None, [*VERL_QUICKSTART_8, "data.train_batch_size=100", *minis])
    with pytest.raises(ConfigError, match=r"data.train_batch_size = 100.*multiple of 8"):
        check_plan(config)


def test_rollout_tp_that_does_not_divide_its_devices_is_refused():
    overrides = [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=6",
        "cluster.placement={actor: '0-1', rollout: '2-5'}",
        "rollout.tensor_parallel_size=3",
    ]
    with pytest.raises(ConfigError, match="rollout.tensor_parallel_size = 3"):
        check_plan(load_config(None, overrides))


def test_token_budget_below_one_row_is_refused():
    overrides = ["actor.use_dynamic_bsz=true", "actor.ppo_max_token_len_per_gpu=16"]
    with pytest.raises(ConfigError, match="actor.ppo_max_token_len_per_gpu"):
        check_plan(load_config(None, overrides))


def test_dynamic_sampling_replicas_draw_gen_batch_size_prompts_per_generation():
    """DAPO's dynamic sampling generates data.gen_batch_size prompts at a time (32 over 4
    replicas: 8 each, × n = 4 samples), while the updates still train on train_batch_size."""
    overrides = [
        "trainer.launcher=ray",
        "cluster.n_gpus_per_node=4",
        "cluster.hybrid_engine=true",
        "data.train_batch_size=16",
        "data.gen_batch_size=32",
        "algorithm.filter_groups.enable=true",
        "algorithm.filter_groups.metric=acc",
        "actor.ppo_mini_batch_size=8",
        "actor.ppo_micro_batch_size_per_gpu=4",
    ]
    plan = make_plan(load_config(None, overrides), memory=False)
    assert (plan.rollout.prompts_per_replica, plan.rollout.samples_per_replica) == (8, 32)
    assert plan.train["actor"].rows == 16 * 4
    without = [o for o in overrides if "filter_groups" not in o and "gen_batch" not in o]
    off = make_plan(load_config(None, without), memory=False)
    assert off.rollout.prompts_per_replica == 4
