"""OpenAI's chat and text completion requests in rl's terms, and rl's rollouts as OpenAI's
responses: what the served endpoint (`rl.core.workers.openai_server`) reads and writes.

A request becomes prompt token ids (a chat rendered by the served model's chat template, its
`tools` described to it; a text prompt tokenized; token ids taken as they are) and one
`SamplingParams`. OpenAI's defaults hold where a key is absent (temperature 1, top_p 1, n 1);
`max_tokens` (or `max_completion_tokens`) defaults to what the context has left, as vLLM's
server does. vLLM's extensions that rl's engines honour are read too: `top_k`,
`min_tokens`, `repetition_penalty`, `stop_token_ids`, `ignore_eos`, `return_token_ids`
(the prompt's and each choice's token ids in the response: token in, token out).

What the engines cannot honour is refused by name (`BadRequest`): stop strings, top
log-probs, penalties other than repetition, `logit_bias`, audio, a response format,
`suffix`, `echo`, `best_of`. A prompt that leaves no room to generate is refused too.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rl.core.engines import Rollouts, SamplingParams


class BadRequest(ValueError):
    """A request the endpoint refuses; `param` names the key (OpenAI's error `param`)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": None}}


# keys the engines cannot honour: refused when set to anything but their "off" value
_UNSUPPORTED = {
    "stop": "stop strings (rl's engines stop on token ids: stop_token_ids)",
    "top_logprobs": "top log-probs (logprobs gives each sampled token's)",
    "frequency_penalty": "a frequency penalty (repetition_penalty is honoured)",
    "presence_penalty": "a presence penalty (repetition_penalty is honoured)",
    "logit_bias": "a logit bias",
    "response_format": "a response format (guided decoding)",
    "audio": "audio output",
    "suffix": "a suffix",
    "echo": "echo",
    "best_of": "best_of",
    "prediction": "predicted outputs",
}
_OFF: tuple[Any, ...] = (None, 0, 0.0, False, "", [], {}, 1, {"type": "text"})


@dataclass(frozen=True)
class Completion:
    """One request, read: its prompt's token ids, how to sample, and what to answer with."""

    prompt_ids: list[int]
    sampling: SamplingParams
    model: str
    stream: bool
    logprobs: bool
    return_token_ids: bool


def read_request(
    body: Any, tokenizer: Any, served: Sequence[str], max_model_len: int, chat: bool
) -> Completion:
    """A chat (`chat`) or text completion request's body, for a model named in `served`."""
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model") or served[0]
    if model not in served:
        raise BadRequest(
            f"The model `{model}` does not exist; this endpoint serves {list(served)}",
            "model",
            404,
        )
    refuse_unsupported(body)
    prompt_ids = _chat_ids(body, tokenizer) if chat else text_ids(body, tokenizer)
    room = max_model_len - len(prompt_ids)
    if room < 1:
        raise BadRequest(
            f"the prompt has {len(prompt_ids)} tokens; this model's context is "
            f"{max_model_len} tokens, which leaves no room to generate",
            "messages" if chat else "prompt",
        )
    budget = body.get("max_completion_tokens") or body.get("max_tokens") or room
    if budget > room:
        raise BadRequest(
            f"max_tokens = {budget}, but the prompt's {len(prompt_ids)} tokens leave "
            f"{room} of the context's {max_model_len}",
            "max_tokens",
        )
    try:
        sampling = SamplingParams(
            n=int(body.get("n") or 1),
            temperature=float(_given(body, "temperature", 1.0)),
            top_p=float(_given(body, "top_p", 1.0)),
            top_k=int(_given(body, "top_k", -1)),
            max_new_tokens=int(budget),
            min_new_tokens=int(body.get("min_tokens") or 0),
            stop_token_ids=tuple(int(t) for t in body.get("stop_token_ids") or ()),
            seed=None if body.get("seed") is None else int(body["seed"]),
            repetition_penalty=float(_given(body, "repetition_penalty", 1.0)),
            ignore_eos=bool(body.get("ignore_eos")),
        )
    except (TypeError, ValueError) as error:
        raise BadRequest(str(error).replace("SamplingParams.", "")) from None
    logprobs = body.get("logprobs")
    return Completion(
        prompt_ids,
        sampling,
        str(model),
        stream=bool(body.get("stream")),
        logprobs=bool(logprobs) if chat else logprobs not in (None, False),
        return_token_ids=bool(body.get("return_token_ids")),
    )


def refuse_unsupported(body: Mapping[str, Any]) -> None:
    """`BadRequest` naming the first key set that the engines cannot honour."""
    for key, what in _UNSUPPORTED.items():
        if body.get(key) not in _OFF:
            raise BadRequest(f"{key}: rl's endpoint does not support {what}", key)


def _given(body: Mapping[str, Any], key: str, default: Any) -> Any:
    return default if body.get(key) is None else body[key]


def _chat_ids(body: Mapping[str, Any], tokenizer: Any) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of messages", "messages")
    rendered = [_message(m, i) for i, m in enumerate(messages)]
    options: dict[str, Any] = dict(body.get("chat_template_kwargs") or {})
    if body.get("tools"):
        options["tools"] = body["tools"]
    last_is_assistant = rendered[-1]["role"] == "assistant"
    continued = bool(body.get("continue_final_message")) and last_is_assistant
    try:
        ids = tokenizer.apply_chat_template(
            rendered,
            add_generation_prompt=not continued,
            continue_final_message=continued,
            tokenize=True,
            **options,
        )
    except Exception as error:
        raise BadRequest(f"the chat template cannot render these messages: {error}") from None
    if isinstance(ids, Mapping):  # transformers 5 may answer a BatchEncoding
        ids = ids["input_ids"]
    return [int(t) for t in ids]


def _message(message: Any, index: int) -> dict[str, Any]:
    if not isinstance(message, Mapping) or "role" not in message:
        raise BadRequest(f"messages[{index}] must be an object with a role", "messages")
    content = message.get("content")
    if isinstance(content, list):  # content parts: the text ones, joined
        kinds = {str(part.get("type")) for part in content if isinstance(part, Mapping)}
        if kinds - {"text"}:
            raise BadRequest(
                f"messages[{index}].content has parts of type {sorted(kinds - {'text'})}; "
                "this endpoint serves text",
                "messages",
            )
        content = "".join(part.get("text", "") for part in content)
    return {**message, "content": content if content is not None else ""}


def text_ids(body: Mapping[str, Any], tokenizer: Any) -> list[int]:
    """A text completion's prompt as token ids (its text tokenized, or its ids)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
        prompt = prompt[0]  # one prompt given as a list of one
    if isinstance(prompt, str):
        return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [int(t) for t in prompt]
    raise BadRequest(
        "prompt must be one text or one list of token ids (send several prompts as several "
        "requests)",
        "prompt",
    )


def response_body(request: Completion, out: Rollouts, tokenizer: Any, chat: bool) -> dict[str, Any]:
    """The non-streamed answer to `request`, whose `n` samples are the rows of `out`."""
    choices = []
    for index, (ids, logprobs) in enumerate(zip(out.response_ids, out.logprobs, strict=True)):
        text = tokenizer.decode(ids, skip_special_tokens=True)
        choice: dict[str, Any] = {"index": index, "finish_reason": _finish(out, index)}
        if chat:
            choice["message"] = {"role": "assistant", "content": text, "tool_calls": []}
        else:
            choice["text"] = text
        choice["logprobs"] = _logprobs(ids, logprobs, tokenizer, chat) if request.logprobs else None
        if request.return_token_ids:
            choice["token_ids"] = list(ids)
        choices.append(choice)
    completion_tokens = sum(len(ids) for ids in out.response_ids)
    body: dict[str, Any] = {
        "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": choices,
        "usage": {
            "prompt_tokens": len(request.prompt_ids),
            "completion_tokens": completion_tokens,
            "total_tokens": len(request.prompt_ids) + completion_tokens,
        },
    }
    if request.return_token_ids:
        body["prompt_token_ids"] = list(request.prompt_ids)
    return body


def stream_chunks(body: Mapping[str, Any], chat: bool) -> list[dict[str, Any]]:
    """`body` (a finished answer) as the chunks of a stream: per choice its role, its text
    and its finish; the usage rides on the last chunk."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    head = {key: body[key] for key in ("id", "created", "model")}
    chunks: list[dict[str, Any]] = []
    for choice in body["choices"]:
        index = choice["index"]
        if chat:
            message = choice["message"]
            parts: list[dict[str, Any]] = [
                {"role": "assistant", "content": ""},
                {"content": message["content"]},
            ]
            if message.get("tool_calls"):
                calls = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
                parts.append({"tool_calls": calls})
            for delta in parts:
                entry = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
                chunks.append({**head, "object": kind, "choices": [entry]})
            last: dict[str, Any] = {"index": index, "delta": {}, "logprobs": choice["logprobs"]}
        else:
            last = {"index": index, "text": choice["text"], "logprobs": choice["logprobs"]}
        if "token_ids" in choice:
            last["token_ids"] = choice["token_ids"]
        last["finish_reason"] = choice["finish_reason"]
        chunks.append({**head, "object": kind, "choices": [last]})
    chunks[-1]["usage"] = body["usage"]
    return chunks


def _finish(out: Rollouts, row: int) -> str:
    return out.finish_reasons[row] if out.finish_reasons else "stop"


def _logprobs(ids: list[int], logprobs: list[float], tokenizer: Any, chat: bool) -> Any:
    tokens = [tokenizer.decode([token]) for token in ids]
    if chat:
        return {
            "content": [
                {
                    "token": token,
                    "logprob": float(logprob),
                    "bytes": list(token.encode("utf-8")),
                    "top_logprobs": [],
                }
                for token, logprob in zip(tokens, logprobs, strict=True)
            ]
        }
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": [float(x) for x in logprobs],
        "top_logprobs": None,
        "text_offset": offsets,
    }
