"""SGLang `generate` output dicts -> `rl.core.engines.Rollouts`.

With `skip_tokenizer_init=True` and `return_logprob=True`, each output is

    {"output_ids": [int, ...],
     "meta_info": {"finish_reason": {"type": "stop", "matched": 2}    # EOS / stop token id
                                 | {"type": "length", "length": 8}    # max_new_tokens
                                 | {"type": "abort", "message": "..."},
                   "output_token_logprobs": [(logprob, token_id, None), ...],
                   "prompt_tokens": int, "completion_tokens": int, ...}}

`output_token_logprobs` has one entry per sampled token, the stop token included; its
token ids are the response and `output_ids` must agree with them (equal, or missing only
the final matched stop token). An aborted request raises: failures surface.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rl.core.engines import Rollouts

FINISH_REASONS = {"stop": "stop", "length": "length"}


class SGLangOutputError(RuntimeError):
    """An SGLang output the engine cannot turn into a response (aborted, inconsistent)."""


def finish_reason(meta_info: Mapping[str, Any]) -> str:
    """ "stop" or "length" from SGLang's `meta_info["finish_reason"]`; raises on abort."""
    reason = meta_info.get("finish_reason")
    kind = reason.get("type") if isinstance(reason, Mapping) else reason
    if kind in FINISH_REASONS:
        return FINISH_REASONS[kind]
    message = reason.get("message", "") if isinstance(reason, Mapping) else ""
    raise SGLangOutputError(f"SGLang finished a request with {reason!r} {message}".strip())


def token_logprobs(meta_info: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    """Sampled token ids and their log-probs from `meta_info["output_token_logprobs"]`."""
    entries = meta_info.get("output_token_logprobs")
    if entries is None:
        raise SGLangOutputError("SGLang output has no output_token_logprobs (return_logprob?)")
    ids = [int(entry[1]) for entry in entries]
    return ids, [float(entry[0]) for entry in entries]


def parse_output(output: Mapping[str, Any]) -> tuple[list[int], list[float], str]:
    """(response token ids, their float log-probs, finish reason) of one SGLang output."""
    meta_info = output["meta_info"]
    reason = finish_reason(meta_info)
    ids, logprobs = token_logprobs(meta_info)
    output_ids = output.get("output_ids")
    if output_ids is not None:
        output_ids = [int(token) for token in output_ids]
        trimmed_stop = reason == "stop" and output_ids == ids[:-1]
        if output_ids != ids and not trimmed_stop:
            raise SGLangOutputError(
                f"SGLang output_ids {output_ids[:8]}... disagree with the token ids of "
                f"output_token_logprobs {ids[:8]}..."
            )
    return ids, logprobs, reason


def to_rollouts(prompts: Sequence[Sequence[int]], outputs: Sequence[Mapping[str, Any]]) -> Rollouts:
    """Rollouts of one output per row; `prompts` holds each row's prompt (already expanded)."""
    if len(prompts) != len(outputs):
        raise SGLangOutputError(f"{len(outputs)} SGLang outputs for {len(prompts)} requests")
    rollouts = Rollouts([], [], [], [])
    for prompt, output in zip(prompts, outputs, strict=True):
        ids, logprobs, reason = parse_output(output)
        rollouts.prompt_ids.append(list(prompt))
        rollouts.response_ids.append(ids)
        rollouts.logprobs.append(logprobs)
        rollouts.finish_reasons.append(reason)
    return rollouts
