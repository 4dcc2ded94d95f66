"""A resumed run is the same run: config differences listed, training changes refused unless
allowed, recorded; an allowed learning rate is the one used."""

import json

import pytest
import torch
import yaml

from rl.core.config import dump_config, load_config
from rl.core.errors import ConfigChangeError
from rl.core.optim import make_lr_scheduler, resume_schedule
from rl.core.trainer.resume_config import changes_training, check_resumed_config, differences


def _checkpoint(tmp_path, *overrides):
    folder = tmp_path / "checkpoints" / "global_step_4"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(dump_config(load_config(None, list(overrides))))
    return folder


def test_differences_are_every_changed_leaf():
    before = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    after = {"a": {"b": 2, "c": (1, 2)}, "e": 3}
    assert differences(before, after) == {"a.b": (1, 2), "d": ("x", None), "e": (None, 3)}


@pytest.mark.parametrize(
    "key, trains",
    [
        ("actor.optim.lr", True),
        ("data.train_files", True),
        ("trainer.seed", True),
        ("model.dtype", True),
        ("algorithm.adv_estimator", True),
        ("rollout.n", True),
        ("rollout.temperature", True),
        ("trainer.save_freq", False),
        ("trainer.logger", False),
        ("data.val_files", False),
        ("actor.ppo_micro_batch_size_per_gpu", False),
        ("cluster.placement", False),
        ("cluster.placement.actor", False),  # under a free section
        ("rollout.val_kwargs.temperature", False),
        ("trainer.dropped_settings.verl:actor.foo", False),  # under a free mapping
        ("distillation.teacher_model.log_prob_micro_batch_size_per_gpu", False),
        ("trainer.partial_rollout", True),
        ("trainer.device_peak_tflops", True),
    ],
)
def test_what_changes_training(key, trains):
    assert changes_training(key, load_config(None, [])) is trains


def test_the_rules_are_the_fields_own_declarations():
    """A field declared `free` next to its default is free; the same field declared plainly
    is not (the declaration, not a list elsewhere, decides)."""
    from dataclasses import dataclass

    from rl.core.config.resume_rules import free, resume_rules, run_length

    @dataclass(frozen=True)
    class Inner:
        rows: int = free(4)
        lr: float = 0.1

    @dataclass(frozen=True)
    class Section:
        inner: Inner = Inner()
        steps: int = run_length(10)
        placement: dict = free(default_factory=dict)

    assert resume_rules(Section(), "s.") == {
        "s.inner.rows": "free",
        "s.steps": "length",
        "s.placement": "free",
        "s.placement.*": "free",
    }


def test_the_runs_length_changes_training_only_under_a_moving_schedule():
    constant = load_config(None, [])
    cosine = load_config(None, ["actor.optim.lr_scheduler=cosine"])
    assert not changes_training("trainer.total_training_steps", constant)
    assert changes_training("trainer.total_training_steps", cosine)
    # a decay over a fixed number of steps (megatron's lr_decay_steps) does not move
    fixed = load_config(None, ["actor.optim.lr_scheduler=cosine", "actor.optim.lr_decay_steps=50"])
    assert not changes_training("trainer.total_training_steps", fixed)
    warmup = load_config(None, ["actor.optim.lr_warmup_ratio=0.1"])
    assert changes_training("trainer.total_epochs", warmup)
    rising = load_config(None, ["actor.optim.weight_decay_incr_style=linear"])
    assert changes_training("trainer.total_training_steps", rising)


def test_a_training_change_is_refused_by_name_and_allowed_by_name(tmp_path):
    folder = _checkpoint(tmp_path, "actor.optim.lr=1e-5", "trainer.save_freq=2")
    changed = load_config(None, ["actor.optim.lr=3e-5", "rollout.n=8", "trainer.save_freq=1"])
    with pytest.raises(ConfigChangeError) as refused:
        check_resumed_config(folder, changed, tmp_path, 4)
    message = str(refused.value)
    assert "actor.optim.lr: 1e-05 -> 3e-05" in message and "rollout.n: " in message
    assert "trainer.save_freq" not in message  # free to change, listed in the log only
    assert "--allow-config-change actor.optim.lr,rollout.n" in message
    assert not (tmp_path / "config_changes.jsonl").exists()

    allowed = load_config(
        None,
        [
            "actor.optim.lr=3e-5",
            "rollout.n=8",
            "trainer.save_freq=1",
            "trainer.allow_config_change=[actor.optim.*,rollout.n]",
        ],
    )
    found = check_resumed_config(folder, allowed, tmp_path, 4)
    assert found["actor.optim.lr"] == (1e-5, 3e-5)
    rows = [
        json.loads(line) for line in (tmp_path / "config_changes.jsonl").read_text().splitlines()
    ]
    assert {"step": 4, "key": "actor.optim.lr", "from": 1e-5, "to": 3e-5} in rows
    assert {r["key"] for r in rows} >= {"rollout.n", "trainer.save_freq"}


def test_the_same_config_resumes_silently(tmp_path):
    folder = _checkpoint(tmp_path, "rollout.n=2")
    assert check_resumed_config(folder, load_config(None, ["rollout.n=2"]), tmp_path, 4) == {}
    before = yaml.safe_load((folder / "config.yaml").read_text())
    assert before["rollout"]["n"] == 2


def _optimizer(lr, schedule="cosine"):
    weights = torch.nn.Parameter(torch.ones(3))
    config = load_config(None, [f"actor.optim.lr={lr}", f"actor.optim.lr_scheduler={schedule}"])
    optimizer = torch.optim.AdamW([weights], lr=lr, weight_decay=0.01)
    return weights, optimizer, make_lr_scheduler(optimizer, config.actor.optim, total_steps=10)


def test_a_resumed_schedule_uses_the_configs_learning_rate_at_the_checkpoints_step():
    weights, optimizer, scheduler = _optimizer(1e-3)
    for _ in range(4):
        weights.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    saved_optimizer, saved_schedule = optimizer.state_dict(), scheduler.state_dict()
    at_step_4 = optimizer.param_groups[0]["lr"]

    same = _optimizer(1e-3)
    hyper = [{k: v for k, v in g.items() if k != "params"} for g in same[1].param_groups]
    same[1].load_state_dict(saved_optimizer)
    resume_schedule(same[1], same[2], saved_schedule, hyper)
    assert same[1].param_groups[0]["lr"] == pytest.approx(at_step_4, rel=1e-12)

    new = _optimizer(3e-3)
    hyper = [{k: v for k, v in g.items() if k != "params"} for g in new[1].param_groups]
    new[1].load_state_dict(saved_optimizer)  # brings the old lr back ...
    resume_schedule(new[1], new[2], saved_schedule, hyper)
    assert new[1].param_groups[0]["lr"] == pytest.approx(3 * at_step_4, rel=1e-12)  # ... not
    assert new[2].last_epoch == 4
    new[2].step()
    assert new[1].param_groups[0]["lr"] == pytest.approx(3 * _lr_after(5), rel=1e-12)


def _lr_after(steps):
    weights, optimizer, scheduler = _optimizer(1e-3)
    for _ in range(steps):
        weights.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    return optimizer.param_groups[0]["lr"]
