"""A config field declares the rule its value meets beside it (`rules.setting`); `Checked`
sections enforce every declared rule, in field order, naming the field."""

from dataclasses import dataclass, fields

import pytest

from rl.core.config import load_config
from rl.core.config.errors import FieldError
from rl.core.config.resume_rules import free
from rl.core.config.rules import POSITIVE_INT, RULE, Checked, setting
from rl.core.config.schema import ActorConfig, CriticConfig


@dataclass(frozen=True)
class Section(Checked):
    first: int = setting(1, POSITIVE_INT)
    plain: int = -5  # no rule: anything
    second: int = free(2, POSITIVE_INT)


def test_a_declared_rule_is_enforced_and_the_first_failing_field_named():
    Section()
    Section(plain=-100)
    with pytest.raises(FieldError, match=r"second = 0 is not allowed: >= 1"):
        Section(second=0)
    with pytest.raises(FieldError, match=r"first = 0"):
        Section(first=0, second=0)


def test_the_ppo_keys_of_both_trained_roles_declare_their_rules():
    for cls in (ActorConfig, CriticConfig):
        ruled = {item.name for item in fields(cls) if RULE in item.metadata}
        assert {"ppo_mini_batch_size", "ppo_micro_batch_size_per_gpu", "ppo_epochs"} <= ruled
    with pytest.raises(FieldError, match=r"critic.ppo_epochs = 0"):
        load_config(overrides=["critic.ppo_epochs=0"])
