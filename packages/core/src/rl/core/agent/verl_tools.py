"""verl's tool config (`rollout.multi_turn.tool_config_path`: a YAML file whose `tools` list
each name a `class_name`, its `config` and its OpenAI `tool_schema`), read into rl's tools.

verl's classes rl has an equivalent of are built from the file, each under the name,
description and parameters its schema gives (what the chat template shows the model):
- `verl.tools.gsm8k_tool.Gsm8kTool`: the answer scored as verl's tool scores it (GSM8K's
  flexible reading of `#### <answer>` against the row's ground truth, handed over as verl
  hands it: `extra_info.tools_kwargs.<tool>.create_kwargs.ground_truth`), read back as
  `Current parsed answer='...' reward=...` (a row without a ground truth is the tool's
  error, counted, where verl would score the answer 0 in silence);
- `verl.tools.sandbox_fusion_tools.SandboxFusionTool`: the code run by rl's sandbox
  (`rl.core.agent.sandbox`) instead of verl's remote service, its `default_timeout` and
  `memory_limit_mb` the run's limits; Python only.
Any other class is refused by name at start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.core.agent.sandbox import SandboxLimits
from rl.core.agent.tools import PythonRunner, ToolError
from rl.core.errors import ConfigError

GSM8K = "verl.tools.gsm8k_tool.Gsm8kTool"
SANDBOX_FUSION = "verl.tools.sandbox_fusion_tools.SandboxFusionTool"
KEY = "rollout.multi_turn.tool_config_path"


# GSM8K's scorer, (solution, ground_truth, method, format_score, score) -> float: verl's
# (rl.core.rewards.gsm8k_rule.gsm8k, which the caller hands in: rewards sit above agent)
Gsm8kScore = Callable[..., float]


@dataclass
class Gsm8kAnswer:
    """verl's Gsm8kTool, as its `execute` scores an answer (one call, one instance)."""

    name: str
    description: str
    parameters: dict[str, Any]
    gsm8k: Gsm8kScore
    takes_row = True  # the row's create_kwargs come with each call

    def call(self, arguments: Mapping[str, Any], create_kwargs: Mapping[str, Any]) -> str:
        answer = arguments.get("answer", "")
        if not isinstance(answer, str):
            answer = str(answer)
        response = answer if answer.startswith("#### ") else "#### " + answer
        truth = create_kwargs.get("ground_truth")
        if truth is None:
            raise ToolError(
                f"{self.name}: the row gives no ground truth "
                f"(extra_info.tools_kwargs.{self.name}.create_kwargs.ground_truth)"
            )
        reward = self.gsm8k(response, truth, method="flexible", format_score=0.0, score=1.0)
        return f"Current parsed {answer=} {reward=}"


def load_tools(path: str, gsm8k: Gsm8kScore) -> list[Any]:
    """The tools of verl's tool config at `path` (ConfigError naming what cannot be);
    `gsm8k` scores the GSM8K tool's answers."""
    import yaml

    file = Path(path).expanduser()
    try:
        document = yaml.safe_load(file.read_text())
    except OSError as error:
        raise ConfigError(f"{KEY} = {path!r}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{KEY} = {path!r} is not YAML: {error}") from None
    entries = (document or {}).get("tools") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{KEY} = {path!r}: no `tools:` list (verl's tool config layout)")
    return [_tool(entry, index, path, gsm8k) for index, entry in enumerate(entries)]


def _tool(entry: Any, index: int, path: str, gsm8k: Gsm8kScore) -> Any:
    where = f"{KEY} ({path}), tools[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} is not a mapping")
    function = (entry.get("tool_schema") or {}).get("function") or {}
    name, parameters = function.get("name"), function.get("parameters") or {}
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: its tool_schema.function has no name")
    description = str(function.get("description") or "")
    config = entry.get("config") or {}
    class_name = entry.get("class_name")
    if class_name == GSM8K:
        return Gsm8kAnswer(name, description, dict(parameters), gsm8k)
    if class_name == SANDBOX_FUSION:
        language = config.get("default_language", "python")
        if language != "python":
            raise ConfigError(f"{where}: default_language {language!r}; rl's sandbox runs Python")
        if "code" not in (parameters.get("properties") or {}):
            raise ConfigError(f"{where}: the tool's code must come in a `code` parameter")
        timeout = float(config.get("default_timeout", 30))
        memory = int(config.get("memory_limit_mb", 1024))
        limits = SandboxLimits(timeout_s=timeout, cpu_s=int(timeout) + 1, memory_mb=memory)
        return PythonRunner(limits, name, description, dict(parameters))
    raise ConfigError(
        f"{where}: verl's tool class {class_name!r} is not in rl (it has "
        f"{GSM8K.rsplit('.', 1)[-1]} and {SANDBOX_FUSION.rsplit('.', 1)[-1]}); give the "
        "agent rl's built-in tools (rollout.multi_turn.tools) or run it as an agent program "
        "(rollout.multi_turn.agent)"
    )
