"""`pkg://a.module` names an installed module's file wherever it is installed: a converted
config's scorer holds on another machine; a module that is not installed is a path that
does not exist, refused by name."""

from __future__ import annotations

import pytest

from rl.core.config.paths import python_file
from rl.core.errors import ConfigError
from rl.core.rewards.registry import load_custom_reward


def test_a_package_path_is_the_modules_file():
    import rl.core.rewards.gsm8k_rule as module

    assert python_file("pkg://rl.core.rewards.gsm8k_rule") == __import__("pathlib").Path(
        module.__file__
    )
    assert not python_file("pkg://rl.no_such_module").exists()
    assert str(python_file("~/x.py")).endswith("/x.py")


def test_a_reward_function_loads_from_a_package_path():
    score = load_custom_reward("pkg://rl.core.rewards.chatlearn_rule")
    assert callable(score)
    with pytest.raises(ConfigError, match="pkg://rl.nope.*does not exist"):
        load_custom_reward("pkg://rl.nope")
