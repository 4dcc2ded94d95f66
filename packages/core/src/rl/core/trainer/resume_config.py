"""A resumed run is the same run: its config is compared with the one that wrote the checkpoint.

Each checkpoint holds the config that produced it (`config.yaml` in the step folder). On
resume every difference is listed. A difference that changes what is trained (the
optimizer, the algorithm, the data, the seed, sampling, the model, the reward) is refused
unless it is allowed by name (`trainer.allow_config_change`, `rl train
--allow-config-change KEY`; shell patterns); an allowed change takes effect at the
resumed step and is recorded in `<output_dir>/config_changes.jsonl`. Settings that change
how the run is driven, logged or laid out (frequencies, loggers, timeouts, micro-batch
sizes, the placement) may change freely and are recorded too. The length of the run may
change freely only where it does not move the learning-rate schedule.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rl.core.config import Config, to_dict
from rl.core.config.resume_rules import Rule as ResumeRule
from rl.core.config.resume_rules import resume_rules
from rl.core.errors import ConfigChangeError

log = logging.getLogger(__name__)
CONFIG_FILE = "config.yaml"  # in each checkpoint folder
CHANGES_FILE = "config_changes.jsonl"  # in the run's output_dir


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> leaf values of a nested dict (lists are leaves)."""
    if not isinstance(tree, dict) or (prefix and not tree):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """key -> (value in the checkpoint's config, value now), for every key that differs."""
    old, new = flat(before), flat(after)
    missing = object()
    found = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, missing), new.get(key, missing)
        if _plain(a) != _plain(b):
            found[key] = (None if a is missing else a, None if b is missing else b)
    return found


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _matches(key: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def schedule_moves_with_length(config: Config) -> bool:
    """Whether a learning rate (or megatron's weight decay) depends on the run's length: a
    decay over the whole run (not over a fixed `lr_decay_steps`), a warm-up given as a ratio
    of it, or a weight decay rising over it."""
    optims = [config.actor.optim] + ([config.critic.optim] if config.uses_critic else [])
    return any(
        (o.lr_scheduler != "constant" and o.lr_decay_steps is None)
        or (o.lr_warmup_steps <= 0 and o.lr_warmup_ratio > 0)
        or o.weight_decay_incr_style != "constant"
        for o in optims
    )


def changes_training(
    key: str, config: Config, rules: Mapping[str, ResumeRule] | None = None
) -> bool:
    """Whether `key` changes what is trained, as the config's fields declare it
    (`rl.core.config.resume_rules`: `free`, `run_length`)."""
    if rules is None:
        rules = resume_rules(config)
    rule = next((rules[p] for p in rules if fnmatch.fnmatchcase(key, p)), None)
    if rule == "length":
        return schedule_moves_with_length(config)
    return rule != "free"


def check_resumed_config(
    checkpoint: Path, config: Config, output_dir: Path, step: int
) -> dict[str, tuple[Any, Any]]:
    """Compare `config` with the config `checkpoint` was written with; refuse training
    changes not allowed by name, record the rest in config_changes.jsonl; returns them."""
    path = checkpoint / CONFIG_FILE
    if not path.exists():
        log.warning(
            "%s records no config (written by an older rl): the resumed config is not "
            "compared with the one that trained it",
            checkpoint,
        )
        return {}
    before = yaml.safe_load(path.read_text()) or {}
    found = differences(before, to_dict(config))
    if not found:
        return {}
    allowed = config.trainer.allow_config_change
    rules = resume_rules(config)  # read off the config's fields once, not once per key
    refused = {
        k: v
        for k, v in found.items()
        if changes_training(k, config, rules) and not _matches(k, allowed)
    }
    for key, (old, new) in found.items():
        log.warning("resumed with %s = %r (was %r at step %d)", key, new, old, step)
    if refused:
        listed = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in refused.items())
        raise ConfigChangeError(
            f"resuming {checkpoint} (step {step}) with a config that changes what is trained: "
            f"{listed}; resume with the checkpoint's values, start a new run in another "
            "trainer.output_dir, or allow the change by name with --allow-config-change "
            f"{','.join(refused)} (trainer.allow_config_change)"
        )
    _record(output_dir, step, found)
    return found


def _record(output_dir: Path, step: int, found: dict[str, tuple[Any, Any]]) -> None:
    with (output_dir / CHANGES_FILE).open("a") as handle:
        for key, (old, new) in found.items():
            row = {"step": step, "key": key, "from": old, "to": new}
            handle.write(json.dumps(row, default=str) + "\n")
