"""What needs no tracker installed: metric names as the trackers take them, `trainer.logger`
values, and the message when a tracker's package is missing."""

import logging
import sys

import pytest

from rl.core import doctor
from rl.core.config import ConfigError, load_config
from rl.core.imports import MissingDependencyError
from rl.core.logging import make_tracker
from rl.core.logging.sinks import TrackerKeys, tracker_key
from rl.core.trainer import preflight as preflight_module
from rl.core.trainer.preflight import preflight


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("actor/pg_loss", "actor/pg_loss"),
        ("pass@4/gsm8k", "pass_at_4/gsm8k"),
        ("test_score/lighteval/MATH-Hard", "test_score/lighteval/MATH_Hard"),
        ("val/score (mean)", "val/score__mean_"),
        ("timing/gen.s", "timing/gen_s"),
        ("/lead//double/trail/", "lead/double/trail"),
        ("réponse/longueur", "r_ponse/longueur"),
        ("@", "_at_"),
        ("/", "_"),
    ],
)
def test_tracker_key(name, key):
    assert tracker_key(name) == key


def test_two_names_in_one_key_warn_once(caplog):
    keys = TrackerKeys("W&B")
    with caplog.at_level(logging.WARNING):
        assert keys({"a-b": 1.0, "a_b": 2.0}) == {"a_b": 2.0}
        assert keys({"a-b": 3.0, "a_b": 4.0, "c": 5.0}) == {"a_b": 4.0, "c": 5.0}
    assert [r.getMessage() for r in caplog.records] == [
        "metrics 'a-b' and 'a_b' are both logged to W&B as 'a_b'"
    ]


def test_trainer_logger_takes_swanlab_and_refuses_unknown_names():
    assert load_config(overrides=["trainer.logger=[console,swanlab]"]).trainer.logger == (
        "console",
        "swanlab",
    )
    with pytest.raises(ConfigError, match="'swanlab'"):
        load_config(overrides=["trainer.logger=[console,neptune]"])


@pytest.mark.parametrize(
    ("logger", "module"), [("wandb", "wandb"), ("mlflow", "mlflow"), ("swanlab", "swanlab")]
)
def test_a_missing_tracker_names_its_extra(logger, module, tmp_path, monkeypatch):
    config = load_config(
        overrides=[f"trainer.output_dir={tmp_path}", f"trainer.logger=[console,{logger}]"]
    )
    monkeypatch.setattr(preflight_module, "is_installed", lambda name: name != module)
    with pytest.raises(MissingDependencyError) as before_the_run:
        preflight(config)
    assert str(before_the_run.value) == (
        f"trainer.logger includes {logger!r}, but {module} is not installed: "
        f"pip install 'rl-core[{logger}]'"
    )
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingDependencyError, match=rf"pip install 'rl-core\[{logger}\]'"):
        make_tracker(config, tmp_path, total_steps=1)


def test_doctor_lists_every_tracker():
    labels = {label: install for label, _, _, install in doctor.THIRD_PARTY}
    for label, extra in [
        ("TensorBoard", "tensorboard"),
        ("W&B", "wandb"),
        ("MLflow", "mlflow"),
        ("SwanLab", "swanlab"),
    ]:
        assert labels[label] == f"pip install 'rl-core[{extra}]'"
    mlflow = next(check for check in doctor.third_party_checks() if check.name == "MLflow")
    if doctor.distribution_version("mlflow-skinny"):  # the extra installs the client alone
        assert mlflow.ok and "mlflow-skinny" in mlflow.detail
