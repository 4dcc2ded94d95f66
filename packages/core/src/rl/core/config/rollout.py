"""The `rollout` section: sampling, the generation engine, and the weight sync into it.

Key names are verl's (`actor_rollout_ref.rollout.*`); the names the other seed systems
use for the same settings are in packages/rollout/README.md ("Config keys"). Engine
settings that only one engine reads go in `engine_kwargs.vllm` / `engine_kwargs.sglang`,
as in verl, and reach that engine unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rl.core.config.agent_program import AgentProgramConfig
from rl.core.config.errors import FieldError
from rl.core.config.resume_rules import free
from rl.core.config.rules import (
    NON_NEGATIVE,
    NOT_EMPTY,
    POSITIVE,
    POSITIVE_INT,
    SEED,
    Checked,
    Rule,
    between,
    check_fields,
    optional,
    setting,
)

# -1 and 0 both mean "no top-k": vLLM reads -1 (verl's default), Hugging Face generate() 0.
TOP_K = Rule(lambda value: value >= -1, "-1 or 0 (off) or >= 1")

LOAD_FORMATS = ("dummy", "auto", "safetensors", "pt")
ROLLOUT_DTYPES = ("auto", "float32", "bfloat16", "float16")
ENGINE_KWARGS_SECTIONS = ("vllm", "sglang")


@dataclass(frozen=True)
class ValKwargs(Checked):
    """Sampling for validation: greedy by default."""

    n: int = setting(1, POSITIVE_INT)
    temperature: float = setting(0.0, NON_NEGATIVE)
    top_p: float = setting(1.0, between(0, 1, open_low=True))
    top_k: int = setting(-1, TOP_K)


AGENT_TOOLS = ("calculator", "python")
TOOL_CALL_FORMATS = ("hermes", "call")


@dataclass(frozen=True)
class MultiTurnConfig:
    """Agentic rollouts (`rl.core.agent`): the model calls tools over several turns; the
    loss covers its own tokens only. verl's `rollout.multi_turn` names, with ROLL's and
    ChatLearn's budgets."""

    enable: bool = False
    max_assistant_turns: int = setting(4, POSITIVE_INT)  # ChatLearn: max_ai_message_turn
    # ROLL: max_tokens_per_step; null: the total
    max_tokens_per_turn: int | None = setting(None, optional(POSITIVE_INT))
    # ChatLearn: max_total_token_length; null: data.max_response_length
    max_total_tokens: int | None = setting(None, optional(POSITIVE_INT))
    tools: tuple[str, ...] = ("calculator",)  # built-in tools, by name (AGENT_TOOLS)
    # verl's tool config (YAML: class_name, config, tool_schema), instead of `tools`: its
    # classes that rl has (rl.core.agent.verl_tools)
    tool_config_path: str | None = setting(None, optional(NOT_EMPTY))
    tool_timeout_s: float = setting(10.0, POSITIVE)
    # calls run per model turn (the first ones; verl's default 1); null: every call
    max_parallel_calls: int | None = setting(None, optional(POSITIVE_INT))
    # a tool's text is cut to this many characters, keeping its left, right or both ends
    # (verl's "left" keeps the end, "right" the start, "middle" both)
    max_tool_response_length: int = setting(2000, POSITIVE_INT)
    tool_response_truncate_side: Literal["left", "middle", "right"] = "right"
    format: str = "hermes"  # hermes: <tool_call>{json}</tool_call>; call: name(argument)
    # a multi-step environment instead of tools (ROLL's env managers, verl's interactions):
    # a built-in one (guess_number) or `path/to/file.py:ClassName`; each trajectory gets a
    # fresh instance, reset with its row's answer; its episode return is the score
    environment: str | None = None
    # an agent program of yours, trained through the OpenAI-compatible endpoint (its own
    # tools and prompts; `tools`, `format` and `environment` are then not used)
    agent: AgentProgramConfig = field(default_factory=AgentProgramConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.agent.enabled and self.environment is not None:
            raise FieldError(
                "environment", self.environment, "null with an agent program (multi_turn.agent)"
            )
        for tool in self.tools:
            if tool not in AGENT_TOOLS:
                raise FieldError("tools", tool, f"built-in tools {list(AGENT_TOOLS)}")
        if self.format not in TOOL_CALL_FORMATS:
            raise FieldError("format", self.format, f"one of {list(TOOL_CALL_FORMATS)}")


@dataclass(frozen=True)
class RolloutConfig:
    # hf | vllm | sglang (any engine registered under `rl.engines`)
    name: str = setting("hf", NOT_EMPTY)
    # --- sampling (training rollouts; validation uses val_kwargs)
    n: int = setting(4, POSITIVE_INT)
    temperature: float = setting(1.0, NON_NEGATIVE)
    top_p: float = setting(1.0, between(0, 1, open_low=True))
    top_k: int = setting(-1, TOP_K)
    min_new_tokens: int = setting(0, NON_NEGATIVE)
    repetition_penalty: float = setting(1.0, POSITIVE)
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()  # besides the tokenizer's EOS
    val_kwargs: ValKwargs = free(default_factory=ValKwargs)
    # the actor's old log-prob pass over the generated batch (verl's rollout.log_prob_*)
    log_prob_micro_batch_size_per_gpu: int = free(16, POSITIVE_INT)
    log_prob_use_dynamic_bsz: bool = free(False)
    log_prob_max_token_len_per_gpu: int = free(16384, POSITIVE_INT)
    # --- the engine (vllm, sglang; the hf engine reads only dtype)
    dtype: str = "auto"  # auto: model.dtype
    tensor_parallel_size: int = setting(1, POSITIVE_INT)
    # SGLang: mem_fraction_static
    gpu_memory_utilization: float = setting(0.5, between(0, 1, open_low=True))
    max_num_seqs: int = setting(1024, POSITIVE_INT)  # SGLang / RLinf: max_running_requests
    max_num_batched_tokens: int = setting(8192, POSITIVE_INT)
    # None: data.max_prompt_length + max_response_length
    max_model_len: int | None = setting(None, optional(POSITIVE_INT))
    enforce_eager: bool = True  # SGLang: disable_cuda_graph
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    load_format: str = "dummy"  # dummy: random weights until the first sync fills them
    free_cache_engine: bool = True  # sleep() releases KV cache (and weights) between rollouts
    detokenize: bool = False
    # ChatLearn's data_rerank: a prompt's n samples go to different replicas (round-robin)
    data_rerank: bool = False
    seed: int = setting(0, SEED)
    # true on-policy: the rollout's log-probs are the trainer's, bit for bit (the HF engine
    # and the FSDP trainer run batch-invariant ops; rl.core.models.batch_invariant)
    batch_invariant: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # {vllm: {...}, sglang: {...}}
    # --- trainer -> engine weight sync
    update_weights_bucket_megabytes: int = setting(512, POSITIVE_INT)
    update_weights_delta: bool = (
        False  # send only tensors whose content changed since the last sync
    )
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        for token in self.stop_token_ids:
            if token < 0:
                raise FieldError("stop_token_ids", self.stop_token_ids, "token ids >= 0")
        if self.load_format not in LOAD_FORMATS:
            raise FieldError("load_format", self.load_format, f"one of {list(LOAD_FORMATS)}")
        if self.dtype not in ROLLOUT_DTYPES:
            raise FieldError("dtype", self.dtype, f"one of {list(ROLLOUT_DTYPES)}")
        for section, kwargs in self.engine_kwargs.items():
            if section not in ENGINE_KWARGS_SECTIONS:
                raise FieldError(
                    "engine_kwargs",
                    section,
                    f"sections {list(ENGINE_KWARGS_SECTIONS)} (one per engine)",
                )
            if not isinstance(kwargs, dict):
                raise FieldError(f"engine_kwargs.{section}", kwargs, "a mapping of engine options")

    def engine_options(self, engine: str) -> dict[str, Any]:
        """The `engine_kwargs.<engine>` mapping (empty when not given)."""
        return dict(self.engine_kwargs.get(engine) or {})
