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
its remote service (`use_local: false`, `code_url`) is refused. ROLL's LLM judge worker
(`judge_model_type: inference`) is rl's `llm_judge` scorer, its model served by rl's
engine (`reward.domains.<d>.judge`: its prompt, model, sampling, engine, and with a
`device_mapping` a Ray replica a device); a judge behind an API is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, ignore, ignored_for, off_when
from rl.cli.dialects.roll import values

_PACKAGE = "roll.pipeline.rlvr.rewards."
WORKERS = {
    f"{_PACKAGE}math_rule_reward_worker.MathRuleRewardWorker": "math_rule",
    f"{_PACKAGE}code_sandbox_reward_worker.CodeSandboxRewardWorker": "code_sandbox",
    f"{_PACKAGE}llm_judge_reward_worker.LLMJudgeRewardWorker": "llm_judge",
    f"{_PACKAGE}ifeval_rule_reward_worker.GeneralRuleRewardWorker": "ifeval",
    f"{_PACKAGE}crossthinkqa_rule_reward_worker.CrossThinkQARuleRewardWorker": "crossthinkqa",
}
JUDGE = "llm_judge"
# ROLL's GeneratingArguments defaults (roll/configs/generating_args.py), what its judge
# samples with where its generating_args leave a key out
PROMPT_ROOM = 8192  # a judge prompt's room without a max_model_len (ROLL's max_length)
JUDGE_SAMPLING_DEFAULTS = {"temperature": 0.95, "top_p": 0.7, "top_k": 50, "max_new_tokens": 8192}
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
    """Drop what a rule worker reads only to start (rl's rule scorers need none of it), and
    fill in ROLL's sampling defaults where a judge's generating_args leave them out."""
    notes = []
    for name, section in (values.get("rewards") or {}).items():
        worker = WORKERS.get(str(section.get("worker_cls"))) if isinstance(section, dict) else None
        if worker == JUDGE:
            sampling = section.setdefault("generating_args", {}) or {}
            section["generating_args"] = sampling
            filled = [k for k in JUDGE_SAMPLING_DEFAULTS if sampling.get(k) is None]
            sampling.update({k: JUDGE_SAMPLING_DEFAULTS[k] for k in filled})
            if filled:
                notes.append(
                    f"rewards.{name}.generating_args.{{{', '.join(filled)}}}: ROLL's defaults "
                    "(GeneratingArguments), what its judge samples with"
                )
            strategy = section.setdefault("strategy_args", {}) or {}
            section["strategy_args"] = strategy
            engine = strategy.setdefault("strategy_config", {}) or {}
            strategy["strategy_config"] = engine
            if engine.get("max_model_len") is None:  # ROLL cuts no judge prompt
                engine["max_model_len"] = int(sampling["max_new_tokens"]) + PROMPT_ROOM
                notes.append(
                    f"rewards.{name}: the judge's context is its max_new_tokens + "
                    f"{PROMPT_ROOM} prompt tokens (ROLL sets none without a vLLM max_model_len)"
                )
            continue
        if worker is None:
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


def _judge_prompt(value: Any) -> Any:
    from rl.core.config.judge import JUDGE_PROMPTS

    if value in JUDGE_PROMPTS:
        return value
    return Unsupported(
        f"judge_prompt {value!r}: ROLL names {JUDGE_PROMPTS[1:]}, and falls back to its 0-10 "
        "prompt for any other name, whose 'Score: x' its worker then reads as yes / no; "
        "name one of them, or set reward.domains.<d>.judge.prompt to a template"
    )


def _judge_type(value: Any) -> Any:
    if value in (None, "inference"):
        return None  # a judge model served by the run: rl's llm_judge
    if value == "api":
        return Unsupported(
            "judge_model_type api: a judge behind an OpenAI-compatible API is not in rl; "
            "use inference (a judge served by the run)"
        )
    return Unsupported(
        f"judge_model_type {value!r}: ROLL's judge worker has api and inference only (it "
        "raises 'Unsupported model type' for any other)"
    )


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
    Rule("rewards.*.judge_prompt", "reward.domains.{0}.judge.prompt", convert=_judge_prompt),
    Rule("rewards.*.judge_model_type", convert=_judge_type, reason="how ROLL runs the judge"),
    *ignored_for(
        "read by ROLL's judge only with judge_model_type api (refused)",
        "rewards.*.judge_model_name",
        "rewards.*.judge_api_url",
        "rewards.*.judge_api_key",
    ),
    Rule("rewards.*.model_args.model_name_or_path", "reward.domains.{0}.judge.model_path"),
    Rule("rewards.*.model_args.dtype", "reward.domains.{0}.judge.dtype", convert=values.dtype),
    ignore(
        "rewards.*.model_args.attn_implementation",
        "the attention kernel (fa2, sdpa): rl's engine picks its own",
    ),
    ignore(
        "rewards.*.model_args.disable_gradient_checkpointing",
        "the judge only generates: no gradients to checkpoint",
    ),
    ignore(
        "rewards.*.model_args.model_type",
        "trl: ROLL loads a value head beside the judge's LM head, which generating never reads",
    ),
    ignore(
        "rewards.*.data_args.template",
        "rl renders the judge's prompt with the judge tokenizer's own chat template (ROLL's "
        "template of the same family)",
    ),
    *[
        Rule(f"rewards.*.generating_args.{key}", f"reward.domains.{{0}}.judge.{key}")
        for key in ("max_new_tokens", "temperature", "top_p", "top_k")
    ],
    Rule(
        "rewards.*.generating_args.num_return_sequences",
        convert=off_when(1, None),
        reason="one verdict a response is what ROLL's judge reads",
    ),
    Rule(
        "rewards.*.generating_args.num_beams",
        convert=off_when(1, None),
        reason="beam search: rl's engines sample",
    ),
    Rule(
        "rewards.*.strategy_args.strategy_name",
        "reward.domains.{0}.judge.engine",
        convert=values.infer_strategy,
    ),
    Rule(
        "rewards.*.strategy_args.strategy_config.max_model_len",
        "reward.domains.{0}.judge.max_model_len",
    ),
    Rule(
        "rewards.*.strategy_args.strategy_config.gpu_memory_utilization",
        "reward.domains.{0}.judge.gpu_memory_utilization",
    ),
    ignore(
        "rewards.*.strategy_args.strategy_config.block_size",
        "vLLM's KV-cache block size: the engine's default",
    ),
    Rule(
        "rewards.*.strategy_args.strategy_config.load_format",
        convert=off_when("auto", None),
        reason="the judge reads its weights from its folder (auto)",
    ),
    Rule(
        "rewards.*.device_mapping",
        "reward.domains.{0}.judge.replicas",
        convert=lambda value: len(values.placement(value)),
        also=(("reward.domains.{0}.judge.placement", lambda _flat: "ray"),),
    ),
    Rule("rewards.*.infer_batch_size", "reward.domains.{0}.judge.batch_size"),
    ignore(
        "rewards.*.world_size",
        "ROLL's count of reward worker processes; the judge's replicas follow its device_mapping",
    ),
]
