"""RLinf's reasoning (math GRPO / PPO / Reinforce++) configs as they are. RLinf composes its
YAML with Hydra (`version_base="1.1"`: a file's own values win over its defaults list;
`../hybrid_engines/fsdp@actor.fsdp_config` entries) and resolves interpolations through its
own OmegaConf resolvers (`subtract`, `multiply`, `int_div`, `not`, `torch.dtype`), which are
registered here so that files resolve unchanged. Strings that only look like templates
(Jinja chat templates) are data and pass through. What RLinf's `validate_cfg` derives is
derived here too: the optimizer batch from `data.rollout_batch_size`, `algorithm.group_size`
and `algorithm.n_minibatches` (ours in prompts: rollout_batch_size / n_minibatches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rl.cli.dialects import hydra_files
from rl.cli.dialects.record import Dialect, Table
from rl.cli.dialects.rlinf import values as values_module
from rl.cli.dialects.rlinf.launch import LAUNCH
from rl.cli.dialects.rlinf.rules import REASONS, RULES
from rl.cli.dialects.rlinf.unread import unread_keys
from rl.core.config.errors import ConfigError

DESCRIPTION = """
Composed by Hydra as RLinf runs it (a file's own values over its `defaults:` list, e.g.
`../hybrid_engines/fsdp@actor.fsdp_config`), with RLinf's OmegaConf resolvers registered
(`subtract`, `multiply`, `int_div`, `not`, `torch.dtype`) so that files resolve unchanged;
Jinja strings (chat templates) are data and pass through. Only `runner.task_type:
reasoning` converts (embodied and agent runners are refused by name). RLinf derives the
optimizer batch (`rollout_batch_size × group_size / n_minibatches` sequences); ours is
`rollout_batch_size / n_minibatches` prompts, and RLinf's divisibility rules are checked
first. RLinf reads the GPUs per node from Ray: give ours as the override
`+cluster.num_gpus_per_node=N` (or leave rl's `cluster.n_gpus_per_node`). Keys RLinf
does not read for a role's backend and precision (an FSDP actor's `lr_sched`, megatron's
fp16 `loss_scale` outside fp16) are dropped first. `reward_type: math` is RLinf's math
reward (rl's `rlinf_math` scorer, ±reward_scale). Launch scripts (`run_main_grpo_math.sh
[CONFIG_NAME] [OVERRIDES]`) are read as bash runs them. See
[coming from RLinf](coming-from-rlinf.md).
"""
DOCUMENTED = (
    "every key of RLinf's math reasoning configs as Hydra composes them (GRPO on megatron "
    "and FSDP, pipeline, dynamic, PPO, Reinforce++, importance sampling; RLinf a3816b59)"
)
REASONING = ("reasoning",)


def _register_resolvers() -> None:
    """RLinf's resolvers (rlinf/utils/omega_resolver.py), under their own names."""
    from omegaconf import OmegaConf

    resolvers: dict[str, Callable[..., Any]] = {
        "multiply": lambda x, y: x * y,
        "int_div": lambda x, y: x // y,
        "subtract": lambda x, y: x - y,
        "not": lambda x: not bool(x),
        "torch.dtype": lambda name: str(name),  # RLinf: getattr(torch, name); ours: the name
    }
    for name, fn in resolvers.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)


def compose(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    _register_resolvers()
    return hydra_files.compose(path, overrides, "RLinf config")


def check(values: dict[str, Any]) -> list[str]:
    """RLinf's validate_reasoning_cfg rules that our mapping relies on."""
    runner, algorithm, data = (values.get(k) or {} for k in ("runner", "algorithm", "data"))
    task = runner.get("task_type")
    if task is None:
        raise ConfigError(
            "runner.task_type is not set: RLinf requires it (reasoning, for the runner rl "
            "converts); is this an RLinf file?"
        )
    if task not in REASONING:
        raise ConfigError(
            f"runner.task_type = {task!r}: rl converts RLinf's reasoning runner only "
            "(embodied, agent and SFT runners have no counterpart in rl)"
        )
    if values.get("agentloop") or values.get("tools"):
        raise ConfigError(
            "agentloop / tools: RLinf's agent loop (rStar2: its own tool-call parser "
            f"{(values.get('agentloop') or {}).get('toolcall_parser')!r}, a code-judge server "
            "under tools.codejudge, down-sampling of the rollouts) has no counterpart in rl: "
            "rl's rollout.multi_turn runs hermes/call tool calls against built-in tools "
            "(calculator, python) without down-sampling; write that config in rl's schema"
        )
    if data.get("rollout_batch_size") is None:
        raise ConfigError("data.rollout_batch_size is not set (prompts per step)")
    prompts = int(data["rollout_batch_size"])
    group = int(algorithm.get("group_size") or 1)
    minibatches = int(algorithm.get("n_minibatches") or 1)
    if prompts <= 0 or prompts % minibatches:
        raise ConfigError(
            f"data.rollout_batch_size = {prompts} is not divisible by algorithm.n_minibatches "
            f"= {minibatches}: rl updates on whole groups of {group} responses"
        )
    seq_length, prompt_length = runner.get("seq_length"), data.get("max_prompt_length")
    if seq_length is not None and prompt_length is not None and seq_length <= prompt_length:
        raise ConfigError(
            f"runner.seq_length = {seq_length} must exceed data.max_prompt_length = "
            f"{prompt_length} (RLinf's rule: it is prompt + response length)"
        )
    notes = values_module.latex_note(values)
    if data.get("apply_chat_template"):
        notes.append(
            "RLinf encodes the chat-templated prompt with the tokenizer's special tokens "
            "again; rl does not (the same ids unless the tokenizer adds a BOS, e.g. Llama's)"
        )
    notes += [
        f"RLinf batch: {prompts} prompts × {group} responses, {minibatches} optimizer "
        f"step(s) of {prompts * group // minibatches} sequences"
    ]
    if "num_gpus_per_node" not in (values.get("cluster") or {}):
        notes.append(
            "RLinf reads the GPUs per node from Ray: rl's cluster.n_gpus_per_node applies "
            "(pass +cluster.num_gpus_per_node=N to set it)"
        )
    return notes


TABLE = Table("rlinf", RULES, REASONS, description=DESCRIPTION, documented=DOCUMENTED)
# what RLinf does to its config before reading it: the keys it does not read for the role's
# backend and precision are dropped (`unread`)
RLINF = Dialect("rlinf", TABLE, compose, check, rewrites=(unread_keys,), launch=LAUNCH)
