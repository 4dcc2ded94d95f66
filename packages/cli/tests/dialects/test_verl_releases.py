"""verl's own trainer config (`ppo_trainer.yaml` of the released packages 0.6.1, 0.7.1 and
0.9.1, as pip installs them) read the way verl reads it: a section whose switch is off is
neither validated nor mapped (its `???` keys are no error, its paths need not exist), and
flipping the switch is the only way such a section changes the run."""

from __future__ import annotations

import pytest

from rl.cli.dialects import convert
from rl.cli.dialects.report import Entry, Report
from rl.core.config import ConfigError, config_from_mapping

RELEASES = ("0.6.1", "0.7.1", "0.9.1")


@pytest.fixture(params=RELEASES)
def ppo_trainer(request, verl_release):
    return verl_release(request.param) / "verl" / "trainer" / "config" / "ppo_trainer.yaml"


@pytest.fixture(scope="module")
def quickstart(verl_quickstart):
    """verl's quickstart overrides with local paths (the root conftest's list)."""
    return verl_quickstart("/models/qwen", "/data/gsm8k/train.parquet", "/data/gsm8k/test.parquet")


@pytest.fixture
def converted(quickstart):
    """`converted(path, *overrides)`: verl's file `path` with the quickstart, then these."""
    return lambda path, *overrides: convert("verl", path, [*quickstart, *overrides])


def test_the_quickstart_converts_with_nothing_unsupported(ppo_trainer, converted):
    """reward_model.rollout.name is `???` in 0.7+ and the reward model's default path
    (~/models/FsfairX-LLaMA3-RM-v0.1) does not exist: verl reads neither while the reward
    model is off, so neither matters here."""
    conversion = converted(ppo_trainer)
    report = conversion.report
    unsupported = [e.source for e in report.entries if e.status == "unsupported"]
    assert unsupported == []
    unread = ("reward_model.model.", "reward_model.rollout.", "reward.reward_model.model")
    assert not any(e.source.startswith(unread) for e in report.entries)
    assert not any(e.source.startswith("reward.reward_model.rollout.") for e in report.entries)
    assert any("reward" in note and "enable" in note for note in report.notes)
    config = config_from_mapping(conversion.config, "converted")
    assert config.reward.reward_model.path is None  # rule-based, as in verl
    assert config.data.answer_key == "reward_model.ground_truth"  # verl's layout
    assert config.algorithm.adv_estimator == "gae" and config.uses_critic
    assert config.actor.optim.lr == 1e-6 and config.critic.optim.lr == 1e-5


def _reward_model(release: str, enable: bool, path: str) -> list[str]:
    if release == "0.6.1":
        return [f"reward_model.enable={enable}", f"reward_model.model.path={path}"]
    # verl 0.7+: the reward section, whose engine needs a name once enabled
    return [
        f"reward.reward_model.enable={enable}",
        f"reward.reward_model.model_path={path}",
        "reward.reward_model.rollout.name=vllm",
    ]


@pytest.mark.parametrize("release", RELEASES)
def test_flipping_the_reward_model_switch_is_what_changes_the_reward(
    release, verl_release, converted
):
    path = verl_release(release) / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    baseline = converted(path).config
    off = converted(path, *_reward_model(release, False, "/models/my-rm")).config
    on = converted(path, *_reward_model(release, True, "/models/my-rm")).config
    assert off == baseline  # a disabled reward model's path changes nothing
    assert on["reward"]["reward_model"]["path"] == "/models/my-rm"
    assert {k: v for k, v in on.items() if k != "reward"} == baseline


def test_legacy_reward_keys_move_into_the_reward_section_of_new_releases(verl_release, converted):
    """verl 0.7 moves the old top-level reward keys into reward.* (0.9 stopped doing so and
    ignores them; rl keeps honouring them and says so)."""
    for release in ("0.7.1", "0.9.1"):
        path = verl_release(release) / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
        conversion = converted(
            path,
            "custom_reward_function.path=/rewards/mine.py",
            "custom_reward_function.name=score",
            "reward_model.enable=true",
            "reward_model.model.path=/models/rm",
            "reward.reward_model.rollout.name=vllm",
        )
        reward = conversion.config["reward"]
        assert reward["custom_reward_function"] == {"path": "/rewards/mine.py", "name": "score"}
        assert reward["reward_model"]["path"] == "/models/rm"
        assert any("legacy reward keys moved" in note for note in conversion.report.notes)


def test_custom_reward_options_reach_the_function(ppo_trainer, converted):
    """verl merges custom_reward_function.reward_kwargs into every call of the function."""
    conversion = converted(
        ppo_trainer,
        "custom_reward_function.path=/rewards/mine.py",
        "+custom_reward_function.reward_kwargs.scale=2.0",
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.reward.custom_reward_function.reward_kwargs == {"scale": 2.0}


# (a key inside a section, the overrides that turn its switch on); the key's new value must
# change nothing while the switch is off, and change the run once it is on
SWITCHED = [
    ("critic.optim.lr=0.5", ["algorithm.adv_estimator=gae"], ["algorithm.adv_estimator=grpo"]),
    (
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=3",
        ["actor_rollout_ref.actor.use_kl_loss=true"],
        ["actor_rollout_ref.actor.use_kl_loss=false"],
    ),
    (
        "algorithm.kl_ctrl.kl_coef=0.5",
        ["algorithm.use_kl_in_reward=true"],
        ["algorithm.use_kl_in_reward=false"],
    ),
    (
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=7",
        ["actor_rollout_ref.rollout.multi_turn.enable=true"],
        ["actor_rollout_ref.rollout.multi_turn.enable=false"],
    ),
]


@pytest.mark.parametrize(("inside", "on", "off"), SWITCHED)
def test_a_section_changes_the_run_only_while_its_switch_is_on(
    ppo_trainer, converted, inside, on, off
):
    assert converted(ppo_trainer, *off, inside).config == converted(ppo_trainer, *off).config
    assert converted(ppo_trainer, *on, inside).config != converted(ppo_trainer, *on).config


def test_a_mandatory_key_in_a_section_that_is_read_is_still_refused(ppo_trainer, quickstart):
    with pytest.raises(ConfigError, match=r"actor_rollout_ref.rollout.name is '\?\?\?'"):
        convert("verl", ppo_trainer, [o for o in quickstart if ".rollout.name=" not in o])


def test_a_critic_from_another_model_is_refused_by_name(ppo_trainer, converted):
    with pytest.raises(ConfigError, match=r"critic.model.path = '/models/other' is not"):
        converted(ppo_trainer, "critic.model.path=/models/other")
    # GRPO builds no critic: verl never reads critic.model.path (its default names a
    # deepseek model), so neither does rl
    converted(ppo_trainer, "algorithm.adv_estimator=grpo", "critic.model.path=/models/other")


@pytest.mark.parametrize(
    ("mode", "ours"), [("vanilla", None), ("gspo", "gspo"), ("cispo", "cispo")]
)
def test_verls_policy_loss_modes_map_and_the_rest_are_refused(verl_release, converted, mode, ours):
    path = verl_release("0.9.1") / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    conversion = converted(path, f"actor_rollout_ref.actor.policy_loss.loss_mode={mode}")
    assert conversion.config["actor"].get("policy_loss") == ours
    sapo = converted(path, "actor_rollout_ref.actor.policy_loss.loss_mode=sapo").report
    (entry,) = [e for e in sapo.entries if e.source.endswith("loss_mode")]
    assert entry.status == "unsupported" and "sapo" in entry.reason
    # sapo's own parameters are read only for sapo
    assert any(e.source.endswith("tau_pos") for e in sapo.entries)
    assert not any(e.source.endswith("tau_pos") for e in conversion.report.entries)


def test_a_refusal_names_the_upstream_key_beside_ours():
    report = Report("verl", "f.yaml")
    report.entries += [
        Entry(
            "actor_rollout_ref.rollout.tensor_model_parallel_size",
            "mapped",
            "rollout.tensor_parallel_size",
            2,
        ),
        Entry("data.max_prompt_length", "mapped", "data.max_prompt_length", 9),
    ]
    message = "rollout.tensor_parallel_size = 2 is bad; data.max_prompt_length too"
    assert report.name_upstream(message) == (
        "rollout.tensor_parallel_size [verl: actor_rollout_ref.rollout."
        "tensor_model_parallel_size] = 2 is bad; data.max_prompt_length too"
    )
    # a key met first in an override a refusal proposes: named after the override
    message = "pass rollout.tensor_parallel_size=1 'rollout.tensor_parallel_size=2' (or ...)"
    assert report.name_upstream(message) == (
        "pass rollout.tensor_parallel_size=1 [verl: actor_rollout_ref.rollout."
        "tensor_model_parallel_size] 'rollout.tensor_parallel_size=2' (or ...)"
    )
    quoted = "pass 'rollout.tensor_parallel_size=1 2' now"
    assert report.name_upstream(quoted) == (
        "pass 'rollout.tensor_parallel_size=1 2' [verl: actor_rollout_ref.rollout."
        "tensor_model_parallel_size] now"
    )


def test_the_quickstart_as_a_launch_script_is_the_same_job(
    tmp_path, monkeypatch, verl_release, quickstart
):
    """verl's quickstart command in a script, as its docs write it ($HOME paths, verl's
    built-in config found in the installed verl, a pipe to tee), with rl's own overrides
    after the script: the same config as the file with the same overrides."""
    release = verl_release("0.9.1")
    monkeypatch.syspath_prepend(str(release))  # verl "installed": its configs can be read
    monkeypatch.setenv("HOME", str(tmp_path))
    words = [o.replace("/data/", "$HOME/data/") for o in quickstart]
    script = tmp_path / "quickstart.sh"
    script.write_text(
        "PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \\\n"
        + "".join(f"  {word} \\\n" for word in words)
        + "  2>&1 | tee verl_demo.log\n"
    )
    ours = ["trainer.total_training_steps=3"]
    from_script = convert("verl", script, ours)
    expanded = [o.replace("/data/", f"{tmp_path}/data/") for o in quickstart]
    direct = convert("verl", release / "verl/trainer/config/ppo_trainer.yaml", [*expanded, *ours])
    assert from_script.config == direct.config
    assert from_script.config["data"]["train_files"] == [f"{tmp_path}/data/gsm8k/train.parquet"]
