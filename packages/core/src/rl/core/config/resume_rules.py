"""Whether a key may change when a run resumes, declared next to the field.

A resumed run is the same run (`rl.core.trainer.resume_config`): a setting that changes
what is trained may differ from the checkpoint's config only when allowed by name. A field
declared with `free(...)` only drives, logs or lays out the run (a frequency, a logger, a
micro-batch size, the placement) and may change freely; one declared with `run_length(...)`
is the run's length, free unless a learning-rate schedule moves with it. Every other field
changes training. `resume_rules(config)` reads the declarations off the config's sections.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Literal

from rl.core.config.rules import Rule as ValueRule
from rl.core.config.rules import setting

RESUME = "resume"  # the field metadata key
Rule = Literal["free", "length"]


def free(
    default: Any = MISSING, rule: ValueRule | None = None, *, default_factory: Any = MISSING
) -> Any:
    """A config field (with its value `rule`, as `setting`) that may differ from the
    checkpoint's config on resume (it and, for a section or a mapping, everything under
    it)."""
    return setting(default, rule, default_factory=default_factory, metadata={RESUME: "free"})


def run_length(default: Any = MISSING, rule: ValueRule | None = None) -> Any:
    """A config field (with its value `rule`) that sets the run's length
    (`total_training_steps`, `total_epochs`): free unless a schedule depends on it."""
    return setting(default, rule, metadata={RESUME: "length"})


def resume_rules(section: Any, prefix: str = "") -> dict[str, Rule]:
    """Dotted key -> rule of every field declared `free` or `run_length` in `section` (a
    config instance) and the sections below it, backends' sections included; a free
    section or mapping also as `key.*`."""
    rules: dict[str, Rule] = {}
    for item in fields(section):
        key, value = prefix + item.name, getattr(section, item.name)
        rule = item.metadata.get(RESUME)
        if rule is not None:
            rules[key] = rule
            if is_dataclass(value) or isinstance(value, dict):
                rules[f"{key}.*"] = rule
        elif is_dataclass(value):
            rules.update(resume_rules(value, f"{key}."))
        elif isinstance(value, dict):  # backend sections, under their own keys
            for name, inner in value.items():
                if is_dataclass(inner):
                    rules.update(resume_rules(inner, f"{prefix}{name}."))
    return rules
