"""`reward.domains.<d>.judge`: an LLM judge served by rl's own rollout engine (ROLL's
`LLMJudgeRewardWorker` with `judge_model_type: inference`), read by the `llm_judge`
scorer (`rl.core.rewards.judge`).

Key names follow ROLL's worker where it has one: `judge_prompt`, its `generating_args`
(`max_new_tokens`, `temperature`, `top_p`, `top_k`), `infer_batch_size` (`batch_size`
here, as verl's reward model names it); `model_path` is verl's `reward_model.model.path`
(ROLL: `model_args.model_name_or_path`) and `engine` is the rollout engine's name
(`rollout.name`; ROLL's `strategy_args.strategy_name`: vllm, hf_infer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rl.core.config.rules import (
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    Checked,
    between,
    check_fields,
    optional,
    require,
    setting,
)

# ROLL's judge_prompt names (roll/utils/prompt.py prompt_maps); any other text with
# {question}, {response} and {reference} is a template of its own; "default" is the prompt
# ROLL's worker falls back to when judge_prompt names none
JUDGE_PROMPTS = ("default", "Qwen2.5-7B-Instruct-RLVR-prompt")


@dataclass(frozen=True)
class JudgeConfig(Checked):
    model_path: str | None = setting(None, optional(NOT_EMPTY))
    prompt: str = setting("default", NOT_EMPTY)
    # how the judge's text becomes a score: yes_no, what ROLL's worker calls
    # (_extract_score_v2: "yes" in the text -> 1, else 0), or score (the first
    # "Score: <x>" over 10, 0.5 when there is none: its _extract_score)
    parse: Literal["yes_no", "score"] = "yes_no"
    engine: str = setting("hf", NOT_EMPTY)  # a rollout engine: hf, vllm
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  # auto: model.dtype
    # colocated: in the trainer's process, on its device; ray: `replicas` Ray actors of
    # its own with num_cpus / num_gpus each (ROLL's judge on devices of its own:
    # device_mapping, one replica a device); num_gpus null: tensor_parallel_size on a cuda
    # run, else 0
    placement: Literal["colocated", "ray"] = "colocated"
    replicas: int = setting(1, POSITIVE_INT)
    num_cpus: float = setting(1.0, POSITIVE)
    num_gpus: float | None = setting(None, optional(NON_NEGATIVE))
    tensor_parallel_size: int = setting(1, POSITIVE_INT)  # devices a replica's engine spans
    batch_size: int = setting(8, POSITIVE_INT)  # judge prompts per generate call
    max_new_tokens: int = setting(16, POSITIVE_INT)
    # greedy by default: the same response gets the same verdict (ROLL's examples sample
    # at 0.8; their generating_args map)
    temperature: float = setting(0.0, NON_NEGATIVE)
    top_p: float = setting(1.0, between(0, 1, open_low=True))
    top_k: int = -1
    # the judge's context, prompt and verdict (vLLM's max_model_len; ROLL's generating
    # max_length default): longer judge prompts are cut from the left
    max_model_len: int = setting(8192, POSITIVE_INT)
    # ROLL's vLLM judge: strategy_config.gpu_memory_utilization; null: rollout's
    gpu_memory_utilization: float | None = setting(None, optional(between(0, 1, open_low=True)))
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        require(
            self.placement == "ray" or self.replicas == 1,
            "replicas",
            self.replicas,
            "1 with placement colocated (replicas are Ray actors: placement ray)",
        )
        require(
            self.max_model_len > self.max_new_tokens,
            "max_model_len",
            self.max_model_len,
            f"more than judge.max_new_tokens ({self.max_new_tokens}): room for the prompt",
        )
