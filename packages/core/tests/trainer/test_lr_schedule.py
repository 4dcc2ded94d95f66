import math

import pytest
import torch

from rl.core.config import ConfigError, OptimConfig
from rl.core.optim import lr_multiplier, make_lr_scheduler, warmup_steps


def test_closed_form_values():
    assert lr_multiplier(0, 100, 10, "constant") == pytest.approx(0.1)
    assert lr_multiplier(9, 100, 10, "constant") == pytest.approx(1.0)
    assert lr_multiplier(50, 100, 0, "constant") == 1.0
    assert lr_multiplier(55, 100, 10, "cosine") == pytest.approx(
        0.5 * (1 + math.cos(math.pi * 0.5))
    )
    assert lr_multiplier(100, 100, 0, "cosine", min_ratio=0.1) == pytest.approx(0.1)
    assert lr_multiplier(25, 100, 0, "linear") == pytest.approx(0.75)
    assert lr_multiplier(80, 100, 0, "wsd", decay_ratio=0.2) == pytest.approx(1.0)
    assert lr_multiplier(90, 100, 0, "wsd", decay_ratio=0.2) == pytest.approx(0.5)
    assert lr_multiplier(100, 100, 0, "wsd", min_ratio=0.2, decay_ratio=0.2) == pytest.approx(0.2)


def test_warmup_ratio_and_steps():
    assert warmup_steps(OptimConfig(lr_warmup_ratio=0.1), 50) == 5
    assert warmup_steps(OptimConfig(lr_warmup_steps=3, lr_warmup_ratio=0.1), 50) == 3


def test_scheduler_drives_the_optimizer_and_survives_a_state_round_trip():
    param = torch.nn.Parameter(torch.zeros(1))
    config = OptimConfig(lr=2.0, lr_scheduler="cosine", lr_warmup_steps=2)
    optimizer = torch.optim.SGD([param], lr=config.lr)
    scheduler = make_lr_scheduler(optimizer, config, total_steps=10)
    seen = []
    for _ in range(5):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen[:2] == pytest.approx([1.0, 2.0])
    expected = [2.0 * lr_multiplier(s, 10, 2, "cosine") for s in range(5)]
    assert seen == pytest.approx(expected)
    again = make_lr_scheduler(torch.optim.SGD([param], lr=config.lr), config, total_steps=10)
    again.load_state_dict(scheduler.state_dict())
    assert again.get_last_lr() == scheduler.get_last_lr()


def test_unknown_schedule_is_rejected():
    with pytest.raises(ConfigError, match="optim.lr_scheduler = 'step'"):
        lr_multiplier(5, 10, 0, "step")
