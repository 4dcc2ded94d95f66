"""ChatLearn's GRPO configs as they are (`chatlearn/entrypoint.py grpo --config-file F
key=value ...`). ChatLearn loads the YAML with OmegaConf, applies the overrides to it as an
OmegaConf dotlist (plain `key=value`; no `+` / `~` forms), merges it over its dataclass
defaults and only then resolves `${...}`; so does this importer: `DEFAULTS` holds the
dataclass defaults the mapping needs, including the two keys that templates interpolate
but only the dataclass defines (`runtime_args.num_inference_per_prompt`, and
`models.policy_trainer.seq_length`, which ChatLearn computes as prompt + response length).
A number that reached us as a string (`"2e-6"`: PyYAML's YAML 1.1 reading, or a quoted
value) is coerced to a float, with a note naming the key.

ChatLearn counts batches in responses, we in prompts: `data.train_batch_size` =
sample_per_episode / n and `actor.ppo_mini_batch_size` = train_global_batch_size / n, with
n = `models.policy.num_inference_per_prompt`. The legacy v1.0 format (`runtime:` /
`runtime_env:`, `includes:`, `model_config_file`, `${ENV:default}`, "a,b" colocation
strings) is recognised and refused with what to do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.cli.dialects import hydra_files
from rl.cli.dialects.chatlearn.defaults import DEFAULTS, legacy_reason
from rl.cli.dialects.chatlearn.launch import LAUNCH
from rl.cli.dialects.chatlearn.rules import REASONS, RULES
from rl.cli.dialects.record import Dialect, Table
from rl.cli.dialects.switches import Switch, flag
from rl.core.config.errors import ConfigError

# the sections ChatLearn reads only while a switch is on: the templates carry both rollout
# managers' sections, which ChatLearn builds only when runtime_args turns them on (grpo.py)
SWITCHES = (
    Switch(
        ("models.partial_rollout_manager.",),
        "runtime_args.use_partial_rollout",
        flag("runtime_args.use_partial_rollout"),
    ),
    Switch(
        ("models.rollout_manager.",),
        "runtime_args.use_rollout_manager",
        flag("runtime_args.use_rollout_manager"),
    ),
)

DESCRIPTION = """
Loaded as ChatLearn does: the YAML by OmegaConf, the overrides applied to it as an
OmegaConf dotlist (`key=value`), merged over ChatLearn's dataclass defaults (those that
differ from ours, and the keys templates interpolate that only the dataclass defines:
`runtime_args.num_inference_per_prompt`, `models.policy_trainer.seq_length` = prompt +
response length), then resolved. Numbers that arrive as strings (`"2e-6"`, as PyYAML reads
it) are coerced with a note. Batches in responses become ours in prompts
(`sample_per_episode` / n, `train_global_batch_size` / n with n =
`models.policy.num_inference_per_prompt`); ChatLearn's fixed choices (GRPO advantages,
token-mean loss, bf16, a constant FSDP learning rate) are written out. `num_gpu` (a total)
becomes `cluster.n_gpus_per_node` on one node. The legacy v1.0 format is detected and
refused with what to do. Launch scripts (`python chatlearn/entrypoint.py grpo --config-file
F ...`) are read from the ChatLearn checkout; base_env.sh's `num_device` is refused until
exported. The reward is ChatLearn's rule (`rl.core.rewards.chatlearn_rule`), the megatron
trainer trains without KL and entropy terms as ChatLearn's does. See
[coming from ChatLearn](coming-from-chatlearn.md).
"""
DOCUMENTED = (
    "the fields of ChatLearn's GrpoConfig: RuntimeConfig with LogConfig, and the policy, "
    "policy_trainer and ref_policy (FSDP and Megatron), reward and rollout-manager model "
    "configs, read from ChatLearn b7af31a9"
)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)$")
_COERCED = "__coerced__"  # set by compose, read (and removed) by check
# the keys of an agent config (template/agent/*.yaml, one file per task, named per data row)
AGENT_KEYS = {"max_ai_message_turn", "max_total_token_length", "chat_template"}


def compose(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The file with its overrides, over ChatLearn's defaults, resolved."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not path.is_file():
        raise ConfigError(f"{path} does not exist (a ChatLearn config file)")
    text = path.read_text(encoding="utf-8")
    try:
        raw = OmegaConf.load(path)
    except Exception as error:  # yaml and omegaconf errors both name the line
        raise ConfigError(f"{path} could not be read: {hydra_files.one_line(error)}") from None
    why = legacy_reason(OmegaConf.to_container(raw, resolve=False), text)
    if why:
        raise ConfigError(
            f"{path}: ChatLearn's legacy v1.0 format ({why}); rl reads the current format "
            "(runtime_args + models.*, ChatLearn's template/grpo_*.yaml): port the file to it"
        )
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or key.startswith(("+", "~")):
            raise ConfigError(
                f"override {item!r}: ChatLearn takes plain key=value overrides (an OmegaConf "
                "dotlist; no +key / ~key forms)"
            )
        try:
            parsed = OmegaConf.from_dotlist([item])
            OmegaConf.update(raw, key, OmegaConf.select(parsed, key), merge=True)
        except OmegaConfBaseException as error:
            raise ConfigError(f"override {item!r}: {hydra_files.one_line(error)}") from None
    if raw and set(raw.keys()) <= AGENT_KEYS:  # an agent config: its own small file
        agent: dict[str, Any] = OmegaConf.to_container(raw, resolve=True)  # type: ignore[assignment]
        agent[_COERCED] = _coerce_numbers(agent)
        return agent
    merged = OmegaConf.merge(OmegaConf.create(DEFAULTS), raw)
    _seq_length(merged)
    values = hydra_files.resolve(merged, path)
    values[_COERCED] = _coerce_numbers(values)
    return values


def _seq_length(config: Any) -> None:
    """ChatLearn's post-init value of policy_trainer / ref_policy `seq_length`, which its
    megatron template interpolates before the dataclass has computed it."""
    from omegaconf import OmegaConf

    prompt = OmegaConf.select(config, "models.policy.max_prompt_tokens_length")
    response = OmegaConf.select(config, "models.policy.max_response_tokens_length")
    for section in ("policy_trainer", "ref_policy"):
        node = OmegaConf.select(config, f"models.{section}")
        if node is not None and "seq_length" not in node:
            node.seq_length = int(prompt) + int(response)


def _coerce_numbers(node: dict[str, Any], prefix: str = "") -> list[str]:
    """Turn number-looking strings (`"2e-6"`) into floats in place; the keys changed."""
    changed = []
    for key, value in node.items():
        if isinstance(value, dict):
            changed += _coerce_numbers(value, f"{prefix}{key}.")
        elif isinstance(value, str) and _NUMBER.match(value.strip()):
            node[key] = float(value)
            changed.append(f"{prefix}{key}")
    return changed


def check(values: dict[str, Any]) -> list[str]:
    """ChatLearn's own batch rules (GrpoConfig._validate_impl), before ours apply."""
    notes = [
        f"{key}: a number written as text, read as a float (as ChatLearn's loader reads "
        "2e-6, which PyYAML leaves a string)"
        for key in values.pop(_COERCED, [])
    ]
    if "runtime_args" not in values:
        return [
            *notes,
            "a ChatLearn agent config (template/agent/*.yaml): only its turn budgets; merge "
            "them into the run's config, with rollout.multi_turn.enable: true",
        ]
    runtime, policy = values["runtime_args"], values["models"]["policy"]
    samples, n = int(runtime["sample_per_episode"]), int(policy["num_inference_per_prompt"])
    global_batch = int(runtime["train_global_batch_size"])
    for whole, part, names in (
        (samples, n, "sample_per_episode / models.policy.num_inference_per_prompt"),
        (samples, global_batch, "sample_per_episode / train_global_batch_size"),
        (global_batch, n, "train_global_batch_size / models.policy.num_inference_per_prompt"),
    ):
        if part <= 0 or whole % part:
            raise ConfigError(
                f"runtime_args: {names} = {whole} / {part} is not a whole number (ChatLearn "
                "requires it; rl counts both in prompts)"
            )
    notes.append(f"ChatLearn batch: {samples // n} prompts × {n} responses per episode")
    return notes + _loss_notes(values)


def _loss_notes(values: dict[str, Any]) -> list[str]:
    """What ChatLearn's loss does that no key says (loss_gallery / train_helper)."""
    trainer = values["models"]["policy_trainer"]
    notes = []
    if values["runtime_args"].get("train_backend") == "megatron":
        for name in ("kl_coef", "entropy_coef"):
            if float(trainer.get(name) or 0.0) > 0:
                notes.append(
                    f"models.policy_trainer.{name} = {trainer[name]}: ChatLearn's megatron "
                    "trainer back-propagates the policy loss alone (train_helper.loss_func), "
                    "so rl trains without that term too"
                )
    return notes


TABLE = Table("chatlearn", RULES, REASONS, description=DESCRIPTION, documented=DOCUMENTED)
CHATLEARN = Dialect("chatlearn", TABLE, compose, check, switches=SWITCHES, launch=LAUNCH)
