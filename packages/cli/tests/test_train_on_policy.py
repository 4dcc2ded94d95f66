"""On-policy steps: the old log-probs come from the update's forward (no separate pass),
and every log-prob pass takes one path, so against a frozen copy of the actor the PPO
ratio is exactly 1 and the KL loss exactly 0 (equal bits, not a tolerance)."""

import pytest
import torch

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.trainer import run_training
from rl.core.trainer.old_logprobs import from_update


@pytest.mark.parametrize("old_log_prob_pass", ["auto", "always"])
def test_an_on_policy_step_has_ratio_one_and_zero_kl_to_a_frozen_reference(
    tmp_path, tiny_run, metrics_rows, old_log_prob_pass
):
    config = load_config(
        DEMO_CONFIG,
        [
            *tiny_run,
            "actor.ppo_mini_batch_size=8",  # = data.train_batch_size: one optimizer step
            "actor.use_kl_loss=true",
            "actor.kl_loss_type=low_var_kl",
            f"actor.old_log_prob_pass={old_log_prob_pass}",
            "trainer.total_training_steps=2",
            f"trainer.output_dir={tmp_path}",
        ],
    )
    run_training(config)
    steps = [row for row in metrics_rows(tmp_path) if "timing/update_actor" in row]
    assert len(steps) == 2
    first = steps[0]  # the reference is the (SFT-warmed) actor as it is now
    assert first["actor/kl_loss"] == 0.0
    for step in steps:
        assert step["actor/ratio_max"] == step["actor/ratio_min"] == 1.0
        assert step["actor/approx_kl"] == 0.0 and step["actor/pg_clipfrac"] == 0.0
        assert step["mismatch/abs_logprob_diff"] < 1e-3  # reported either way
    reused = old_log_prob_pass == "auto"
    assert first["actor/old_logprobs_from_update"] == float(reused)
    assert ("timing/old_logprob" in first) is not reused
    if first["actor/grad_norm"] > 0:  # (a batch of equal rewards has no gradient)
        assert steps[1]["actor/kl_loss"] > 0  # the actor moved away from its reference


@pytest.mark.parametrize(
    ("overrides", "reused"),
    [
        ([], True),
        (["actor.ppo_mini_batch_size=4"], False),  # two optimizer steps per batch
        (["actor.ppo_epochs=2"], False),
        (["algorithm.use_kl_in_reward=true"], False),  # read before the update
        (["actor.tis_cap=2.0"], False),  # the rollout correction's normaliser needs them
        (["algorithm.rollout_correction.rollout_is=token"], False),
        (["actor.old_log_prob_pass=always"], False),
    ],
)
def test_the_old_log_prob_pass_is_skipped_only_where_provably_redundant(
    tiny_run, overrides, reused
):
    config = load_config(DEMO_CONFIG, [*tiny_run, "actor.ppo_mini_batch_size=8", *overrides])
    rows = config.data.train_batch_size * config.rollout.n
    assert from_update(config, rows) is reused
    assert from_update(config, rows + 1) is False  # a larger batch: two mini-batches


def test_an_unknown_old_log_prob_pass_is_refused_with_the_choices(tiny_run):
    with pytest.raises(Exception, match="old_log_prob_pass"):
        load_config(DEMO_CONFIG, [*tiny_run, "actor.old_log_prob_pass=never"])


def build_worker(tiny_run, tmp_path, *overrides):
    from rl.core.workers.worker import RoleWorker

    config = load_config(DEMO_CONFIG, [*tiny_run, f"trainer.output_dir={tmp_path}", *overrides])
    worker = RoleWorker()
    worker.build(config, ["actor", "rollout"], total_steps=3)
    worker.sync_weights(0)  # as the trainer does before anything is generated
    return worker


def rollout_batch(worker):
    from rl.core.engines import SamplingParams
    from rl.core.trainer.rollout_batch import build_batch

    tokenizer = worker.engines["rollout"].tokenizer
    prompts = [tokenizer(p).input_ids for p in ("3+4=", "9-2=", "5*5=")]
    rollouts = worker.run("rollout", "generate", prompts, SamplingParams(n=2, max_new_tokens=4))
    return build_batch(rollouts, tokenizer.pad_token_id, 4)


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def test_in_sync_mode_the_hf_rollout_shares_the_actors_weights_and_samples_the_update(
    tiny_run, tmp_path
):
    worker = build_worker(tiny_run, tmp_path, "actor.optim.lr=1e-2")
    actor, rollout = worker.engines["actor"], worker.engines["rollout"]
    first = worker.sync_weights(0)
    assert first["weight_sync/shared_tensors"] > 0 and first["weight_sync/sent_bytes"] == 0
    before = {n: p.detach().clone() for n, p in actor.model.named_parameters()}
    worker.run("actor", "train_step", rollout_batch(worker), nll)
    assert not all(torch.equal(p, before[n]) for n, p in actor.model.named_parameters())
    again = worker.sync_weights(0)
    assert again["weight_sync/sent_bytes"] == 0
    for (name, a), (_, r) in zip(
        actor.model.named_parameters(), rollout.model.named_parameters(), strict=True
    ):
        assert a.data_ptr() == r.data_ptr(), name  # one storage: the update is the rollout's
    batch = rollout_batch(worker)  # sampled by the updated weights
    trainer = actor.compute_logprobs(batch).logprobs
    mask = batch["response_mask"].bool()
    assert torch.allclose(batch["rollout_logprobs"][mask], trainer[mask], atol=1e-5)


@pytest.mark.parametrize("overrides", [["trainer.mode=one_step_off"], ["rollout.dtype=bfloat16"]])
def test_the_rollout_keeps_its_own_copy_where_it_may_not_share(tiny_run, tmp_path, overrides):
    worker = build_worker(tiny_run, tmp_path, *overrides)
    metrics = worker.sync_weights(0)
    assert "weight_sync/shared_tensors" not in metrics and metrics["weight_sync/sent_bytes"] > 0
    actor, rollout = worker.engines["actor"], worker.engines["rollout"]
    pointers = {p.data_ptr() for p in actor.model.parameters()}
    assert not pointers & {p.data_ptr() for p in rollout.model.parameters()}
