"""No silent change of meaning: settings that change training and that rl cannot honour
refuse the conversion by name unless allowed, the allowed ones are recorded in the config;
rl's own keys may stand beside the upstream ones; the report is ranked by consequence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config
from rl.cli.dialects import convert, own_keys, refusal
from rl.cli.dialects.report import Entry, Report
from rl.core.config import ConfigError

HERE = Path(__file__).parent
ROLL = HERE / "roll" / "rlvr" / "rlvr_megatron.yaml"
CHATLEARN = HERE / "chatlearn" / "grpo_megatron.yaml"


def _report() -> Report:
    report = Report("roll", "f.yaml")
    report.entries = [
        Entry("reward_clip", "unsupported", None, 10, "reward clipping is not in rl"),
        Entry("advantage_clip", "unsupported", None, 2.0, "advantage clipping is not in rl"),
        Entry("logging_dir", "ignored", None, "./logs", "rl logs under trainer.output_dir"),
        Entry("seed", "mapped", "trainer.seed", 3),
    ]
    return report


def test_a_setting_that_changes_training_is_refused_by_name_with_its_value():
    with pytest.raises(ConfigError) as refused:
        refusal.settle(_report())
    message = str(refused.value)
    assert "\n" not in message
    assert "reward_clip = 10, advantage_clip = 2.0" in message
    assert "--allow-unsupported reward_clip,advantage_clip" in message


def test_allowed_settings_are_returned_for_the_config_and_listed_as_dropped():
    report = _report()
    with pytest.raises(ConfigError, match="advantage_clip = 2.0"):  # one left over
        refusal.settle(report, ["reward_clip"])
    dropped = refusal.settle(report, refusal.patterns(["reward_clip,advantage_*"]))
    assert dropped == {
        "roll:reward_clip": "10 (reward clipping is not in rl)",
        "roll:advantage_clip": "2.0 (advantage clipping is not in rl)",
    }
    assert "run WITHOUT 2 setting(s)" in report.render()
    assert refusal.settle(_report(), ["*"]).keys() == dropped.keys()


def test_an_allowance_that_matches_nothing_is_refused():
    with pytest.raises(ConfigError, match="--allow-unsupported reward_clp: no refused roll"):
        refusal.settle(_report(), ["reward_clip", "advantage_clip", "reward_clp"])


def test_the_report_ranks_by_consequence_and_fits_a_screen():
    short = _report().render().splitlines()
    assert short[1].startswith("  unsupported reward_clip")
    assert short[3] == "  ignored     1 key(s), rl logs under trainer.output_dir: logging_dir"
    assert short[4].startswith("  mapped      1 key(s)")
    assert "REFUSED     reward_clip" in _report().render(refusing=True)
    full = _report().render(full=True)
    assert "  mapped      seed -> trainer.seed = 3" in full


def test_own_keys_beside_upstream_ones_are_told_apart():
    from rl.cli.dialects.registry import find

    upstream, ours = own_keys.split(
        ["seed=3", "trainer.device=cpu", "+rewards.x=1", "data.prompt_key=q", "nope=1"],
        ["seed", "rewards.math_rule.world_size"],
        find("roll").table.rules,
        [],
    )
    assert ours == ["trainer.device=cpu", "data.prompt_key=q"]
    assert upstream == ["seed=3", "+rewards.x=1", "nope=1"]


def test_own_keys_apply_after_the_conversion(tmp_path):
    conversion = convert("chatlearn", CHATLEARN, ["data.prompt_key=question"])
    assert conversion.own == ("data.prompt_key=question",)
    config, report = convert_config(
        "chatlearn", CHATLEARN, ["data.prompt_key=question", "trainer.seed=7"]
    )
    assert config.data.prompt_key == "question" and config.trainer.seed == 7
    assert "rl's own keys, applied last" in report.render()


def test_a_converted_config_records_what_it_runs_without():
    # a bound that binds on grpo's normalised rewards (10 cannot: it is ignored)
    with pytest.raises(ConfigError, match="reward_clip = 0.5"):
        convert_config("roll", ROLL, ["reward_clip=0.5"])
    config, _ = convert_config("roll", ROLL, ["reward_clip=0.5"], allow=["*"])
    assert config.trainer.dropped_settings["roll:reward_clip"].startswith("0.5 (")
