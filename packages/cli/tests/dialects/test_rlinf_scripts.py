"""RLinf's launch scripts as they are (`rlinf/upstream/examples/...sh`), read as bash runs
them: `CONFIG_PATH` from `$( cd "$( dirname "${BASH_SOURCE[0]}" )" && pwd )`, the config
name from `$1` or the default under `if [ -z "$1" ]`, `tabs 4` and exports passed over,
and the config file found as RLinf's `@hydra.main(version_base="1.1")` entry does."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert, detect, scripts
from rl.cli.dialects.rlinf.launch import LAUNCH
from rl.core.config import ConfigError, config_from_mapping

UPSTREAM = Path(__file__).parent / "rlinf" / "upstream" / "examples"
MATH_SCRIPT = UPSTREAM / "reasoning" / "run_main_grpo_math.sh"
RSTAR2_SCRIPT = UPSTREAM / "agent" / "rstar2" / "run_rstar2.sh"
MATH = UPSTREAM / "reasoning" / "config" / "math"


def test_the_scripts_are_detected_as_rlinf():
    assert detect(MATH_SCRIPT) == "rlinf" and detect(RSTAR2_SCRIPT) == "rlinf"


def test_without_an_argument_the_script_runs_its_default_config():
    launch = LAUNCH.read(MATH_SCRIPT, [], environ={}, cwd=Path("/"))
    assert launch.config_file.resolve() == (MATH / "qwen2.5-1.5b-grpo-megatron.yaml").resolve()
    assert launch.overrides == []


def test_the_first_argument_names_the_config_and_overrides_follow():
    launch = LAUNCH.read(MATH_SCRIPT, ["qwen2.5-1.5b-grpo-fsdp", "runner.max_steps=2"], environ={})
    assert launch.config_file.resolve() == (MATH / "qwen2.5-1.5b-grpo-fsdp.yaml").resolve()
    assert launch.overrides == ["runner.max_steps=2"]


def test_converting_through_the_script_is_converting_the_file():
    overrides = ["qwen2.5-1.5b-grpo-fsdp", "runner.max_steps=2", "data.rollout_batch_size=8"]
    through_script = convert("rlinf", MATH_SCRIPT, overrides)
    direct = convert("rlinf", MATH / "qwen2.5-1.5b-grpo-fsdp.yaml", overrides[1:])
    assert through_script.config == direct.config
    config = config_from_mapping(through_script.config, "converted")
    assert config.trainer.total_training_steps == 2 and config.data.train_batch_size == 8


def test_an_unknown_config_name_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="no nonexistent.yaml there") as error:
        LAUNCH.read(MATH_SCRIPT, ["nonexistent"], environ={})
    assert "\n" not in str(error.value)


def test_the_rstar2_script_reaches_its_config_which_is_refused_as_agentic():
    launch = LAUNCH.read(RSTAR2_SCRIPT, [], environ={})
    assert launch.config_file.name == "rstar2-qwen2.5-1.5b-megatron.yaml"
    with pytest.raises(ConfigError, match="agentloop / tools: RLinf's agent loop"):
        convert("rlinf", RSTAR2_SCRIPT, [])


def test_an_empty_test_of_an_argument_not_given_is_decided(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        'if [ -z "$1" ]; then\n  NAME=default\nelse\n  NAME=$1\nfi\n'
        'if [ -n "$2" ]; then\n  EXTRA=yes\nfi\n'
        "python main_grpo.py --config-name $NAME ${EXTRA:-no}\n"
    )

    def is_launch(words):
        return any(w.text == "main_grpo.py" for w in words)

    for arguments, expected in (([], ["default", "no"]), (["mine", "x"], ["mine", "yes"])):
        found, _ = scripts.locate(script, arguments, is_launch, "x", environ={}, cwd=tmp_path)
        assert [w.text for w in found.words[-2:]] == expected
        assert found.under is None
