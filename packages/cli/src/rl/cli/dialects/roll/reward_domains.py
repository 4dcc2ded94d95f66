"""ROLL's per-domain reward workers (`rewards.<domain>`) as rl's `reward.domains.<domain>`.

Each ROLL domain names a worker class (`worker_cls`), the tags routed to it
(`tag_included`) and the worker's options; rl runs the same scorers
(`rl.core.rewards.domain_score`), routes rows the same way, and falls back, as ROLL does, to
the domain `math_rule` for a tag no domain includes (`data.default_domain`, set only when
such a domain exists). ROLL shapes, masks and whitens each domain's rows apart
(`algorithm.advantage_by_domain`). A rule worker loads a tokenizer and nothing else from
its `model_args` / `data_args` / `strategy_args` (and runs on CPU): `drop_rule_worker_plumbing`
drops those keys before the table reads the file, with a note. ROLL's code sandbox worker
runs its local tests (`use_local: true`) in rl's sandbox (`rl.core.rewards.code_sandbox`);
its remote service (`use_local: false`, `code_url`) is refused. ROLL's LLM judge worker is
refused by name (`NOT_YET`), with its settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported

_PACKAGE = "roll.pipeline.rlvr.rewards."
WORKERS = {
    f"{_PACKAGE}math_rule_reward_worker.MathRuleRewardWorker": "math_rule",
    f"{_PACKAGE}code_sandbox_reward_worker.CodeSandboxRewardWorker": "code_sandbox",
    f"{_PACKAGE}llm_judge_reward_worker.LLMJudgeRewardWorker": "llm_judge",
    f"{_PACKAGE}ifeval_rule_reward_worker.GeneralRuleRewardWorker": "ifeval",
    f"{_PACKAGE}crossthinkqa_rule_reward_worker.CrossThinkQARuleRewardWorker": "crossthinkqa",
}
JUDGE = "llm_judge"
_JUDGE = "ROLL's LLM judge worker (a judge model served beside the run) is not in rl yet"
NOT_YET = {JUDGE: _JUDGE}
# a rule worker's plumbing: what it loads (a tokenizer) and where it runs
_PLUMBING = (
    "model_args",
    "data_args",
    "generating_args",
    "strategy_args",
    "training_args",
    "device_mapping",
    "world_size",
    "infer_batch_size",
    "num_gpus_per_worker",
)


def scorer(worker_cls: Any) -> Any:
    """ROLL's worker class path -> rl's scorer name."""
    if WORKERS.get(str(worker_cls)) in NOT_YET:
        return Unsupported(NOT_YET[WORKERS[str(worker_cls)]])
    name = WORKERS.get(str(worker_cls))
    if name is None:
        known = ", ".join(sorted(cls.rsplit(".", 1)[-1] for cls in WORKERS))
        return Unsupported(f"ROLL's reward worker {worker_cls} is not in rl (rl has {known})")
    return name


def domains(flat: Mapping[str, Any]) -> dict[str, str]:
    """Each ROLL reward domain -> its scorer name ('' for a worker rl does not have)."""
    suffix = ".worker_cls"
    found = {}
    for key, value in flat.items():
        if key.startswith("rewards.") and key.endswith(suffix) and key.count(".") == 2:
            found[key.split(".")[1]] = WORKERS.get(str(value), "")
    return found


def drop_rule_worker_plumbing(values: dict[str, Any]) -> list[str]:
    """Drop what a rule worker reads only to start (rl's rule scorers need none of it)."""
    notes = []
    for name, section in (values.get("rewards") or {}).items():
        worker = WORKERS.get(str(section.get("worker_cls"))) if isinstance(section, dict) else None
        if worker is None or worker == JUDGE:
            continue
        dropped = [key for key in _PLUMBING if section.pop(key, None) is not None]
        if dropped:
            notes.append(
                f"rewards.{name}.{{{', '.join(dropped)}}}: what ROLL's rule worker loads to "
                "start (a tokenizer) and where it runs; rl's rule scorers need none of it"
            )
    return notes


def default_domain(flat: Mapping[str, Any]) -> Any:
    """ROLL routes a tag no domain includes to `math_rule`."""
    return "math_rule" if "math_rule" in domains(flat) else None


def by_domain(flat: Mapping[str, Any]) -> Any:
    return True if len(domains(flat)) > 1 else None


def _local_code(value: Any) -> Any:
    if value is False:
        return Unsupported(
            "use_local false: ROLL's remote code sandbox service (code_url); rl runs the "
            "tests in its own sandbox (use_local: true)"
        )
    return None  # rl runs the code here, in its sandbox


RULES: list[Rule] = [
    Rule(
        "rewards.*.worker_cls",
        "reward.domains.{0}.scorer",
        convert=scorer,
        also=(
            ("data.default_domain", default_domain),
            ("algorithm.advantage_by_domain", by_domain),
        ),
    ),
    Rule("rewards.*.tag_included", "reward.domains.{0}.tag_included"),
    Rule("rewards.*.reward_type", "reward.domains.{0}.options.reward_type"),
    Rule(
        "rewards.*.response_length_penalty_coef",
        "reward.domains.{0}.options.response_length_penalty_coef",
        convert=lambda v: None if v in (None, 0, 0.0) else v,
    ),
    Rule("rewards.*.use_local", convert=_local_code, reason="read by the code sandbox worker"),
    Rule("rewards.*.code_url", reason="ROLL's remote code sandbox service; rl runs its own"),
    # an LLM judge's settings (a rule worker's were dropped before: drop_rule_worker_plumbing)
    *[
        Rule(f"rewards.*.{key}", reason=_JUDGE)
        for key in (
            "judge_*",
            "model_args.",
            "generating_args.",
            "strategy_args.",
            "data_args.",
            "device_mapping",
            "infer_batch_size",
            "world_size",
        )
    ],
]
