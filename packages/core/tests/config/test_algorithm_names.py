"""Algorithm names are checked against the registries before any model loads; each error is a
ConfigError naming the key that holds the name (actor and critic share the aggregation
registry, actor.kl_loss_type and algorithm.kl_penalty the KL one)."""

import pytest

from rl.core.algorithms import LOSS_AGG_MODES, Registry, check_loss_scale_factor
from rl.core.config import ConfigError, load_config
from rl.core.trainer.algorithm_setup import validate_algorithm_names

UNKNOWN_NAMES = [
    (["algorithm.adv_estimator=ppo2"], "algorithm.adv_estimator = 'ppo2' is not a known"),
    (["actor.policy_loss=trpo"], "actor.policy_loss = 'trpo' is not a known policy loss"),
    (["actor.loss_agg_mode=sum"], "actor.loss_agg_mode = 'sum' is not a known loss aggregation"),
    (["critic.loss_agg_mode=sum"], "critic.loss_agg_mode = 'sum' is not a known loss aggregation"),
    (["actor.kl_loss_type=k4+"], "actor.kl_loss_type = 'k4+' is not a known KL estimator"),
    (["algorithm.kl_penalty=k9"], "algorithm.kl_penalty = 'k9' is not a known KL estimator"),
    (
        ["critic.loss_scale_factor=4"],
        "critic.loss_scale_factor = 4.0 has no effect with loss_agg_mode 'token-mean'",
    ),
    (
        ["actor.loss_scale_factor=4", "actor.loss_agg_mode=seq-mean-token-mean"],
        "actor.loss_scale_factor = 4.0 has no effect with loss_agg_mode 'seq-mean-token-mean'",
    ),
    (
        ["actor.tis_cap=2", "algorithm.rollout_correction.rollout_is=token"],
        "actor.tis_cap and algorithm.rollout_correction.rollout_is both set importance weights",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), UNKNOWN_NAMES)
def test_unknown_names_raise_config_errors_naming_the_key(overrides, message):
    config = load_config(overrides=overrides)
    with pytest.raises(ConfigError) as error:
        validate_algorithm_names(config)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_known_names_pass():
    validate_algorithm_names(
        load_config(
            overrides=[
                "algorithm.adv_estimator=gae",
                "critic.loss_agg_mode=token-sum",
                "critic.loss_scale_factor=64",
                "algorithm.kl_penalty=low_var_kl+",
                "algorithm.kl_ctrl.type=adaptive",
            ]
        )
    )


def test_a_registry_names_the_callers_key():
    fruit: Registry[int] = Registry("fruit", "basket.fruit")
    fruit.register("apple")(1)
    with pytest.raises(
        ValueError, match=r"^basket.fruit = 'pear' is not a known fruit; valid: apple"
    ):
        fruit.get("pear")
    with pytest.raises(ValueError, match=r"^bowl.fruit = 'pear' is not a known fruit"):
        fruit.get("pear", key="bowl.fruit")
    with pytest.raises(ValueError, match=r"^critic.loss_agg_mode = 'sum' is not a known"):
        LOSS_AGG_MODES.get("sum", key="critic.loss_agg_mode")


def test_the_scale_factor_check_names_the_mode_key_of_its_section():
    with pytest.raises(ValueError, match=r"^critic.loss_agg_mode = 'sum' is not a known"):
        check_loss_scale_factor("sum", 2.0, "critic.loss_scale_factor")
