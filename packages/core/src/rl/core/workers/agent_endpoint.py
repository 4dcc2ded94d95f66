"""The policy behind an OpenAI-compatible endpoint, for agent programs: each agent session
has a base URL of its own (`http://host:port/sessions/<id>/v1`), opened and closed by the
run, and every chat request in it is answered by the rollout engine and recorded token in /
token out (`rl.core.agent.session`). Requests outside a live session are refused (404).

Within a session the run samples (`sampling`: the rollout's temperature, top-p and top-k):
the trainer's log-probs assume it. `n` must be 1 (a session is one trajectory); `max_tokens`
may lower a turn's budget, never raise it; a request after the session's tokens or turns
are spent is refused (400), which fails the sample. A session's requests are answered one
at a time, in order; concurrent requests of different sessions are batched into engine
calls (`RequestBatcher`).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rl.core.agent.session import AgentSession, BudgetSpent, Turn
from rl.core.engines import Rollouts, SamplingParams
from rl.core.workers.openai_api import BadRequest, refuse_unsupported, text_ids
from rl.core.workers.openai_server import Generate, OpenAIServer, reply

# what a request may send that the run decides instead, compared with the run's values
_SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}


@dataclass(frozen=True)
class SessionLimits:
    max_total_tokens: int
    max_tokens_per_turn: int
    max_turns: int


# one prompt on one replica: (replica, prompt ids, sampling) -> its rollouts
Route = Callable[[int, list[int], SamplingParams], Awaitable[Rollouts]]


class AgentEndpoint(OpenAIServer):
    """`generate` answers batched prompts; `sampling` is the run's. With `route` over
    `replicas`, each session keeps to one replica (dealt round-robin as sessions open), its
    requests batched with those waiting on that replica."""

    def __init__(
        self,
        generate: Generate,
        tokenizer: Any,
        served: Sequence[str],
        sampling: SamplingParams,
        limits: SessionLimits,
        max_model_len: int,
        max_batch_size: int = 256,
        timeout_s: float = 600.0,
        route: Route | None = None,
        replicas: int = 1,
    ) -> None:
        super().__init__(generate, tokenizer, served, max_model_len, max_batch_size, timeout_s)
        self.sampling, self.limits = replace(sampling, n=1, prompt_seeds=()), limits
        self.route, self.replicas = route, replicas
        self.sessions: dict[str, AgentSession] = {}
        self.replica_of: dict[str, int] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.opened = 0

    def add_routes(self, app: Any) -> None:
        app.router.add_post("/sessions/{sid}/v1/chat/completions", self._session_chat)
        app.router.add_post("/sessions/{sid}/v1/completions", self._session_text)
        app.router.add_get("/sessions/{sid}/v1/models", self._session_models)
        app.router.add_get("/health", self._health)
        app.router.add_route("*", "/{tail:.*}", self._outside)

    def open(self) -> tuple[str, str]:
        """A new session: (its id, its base URL)."""
        sid = uuid.uuid4().hex
        self.sessions[sid] = AgentSession(
            self.tokenizer,
            max_total_tokens=self.limits.max_total_tokens,
            max_tokens_per_turn=self.limits.max_tokens_per_turn,
            max_turns=self.limits.max_turns,
        )
        self.replica_of[sid] = self.opened % self.replicas
        self.opened += 1
        return sid, f"http://{self.address}/sessions/{sid}/v1"

    def close_session(self, sid: str) -> AgentSession:
        """End the session (later requests are refused) and hand over its recording."""
        self.locks.pop(sid, None)
        self.replica_of.pop(sid, None)
        return self.sessions.pop(sid)

    async def _outside(self, _request: Any) -> Any:
        from aiohttp import web

        bad = BadRequest(
            "no live agent session here: send requests to the base URL the run gave the "
            "agent (OPENAI_BASE_URL, http://host:port/sessions/<id>/v1)",
            status=404,
        )
        return web.json_response(bad.body(), status=404)

    async def _session_models(self, request: Any) -> Any:
        if request.match_info["sid"] not in self.sessions:
            return await self._outside(request)
        return await self._models(request)

    async def _session_chat(self, request: Any) -> Any:
        return await self._session(request, chat=True)

    async def _session_text(self, request: Any) -> Any:
        return await self._session(request, chat=False)

    async def _session(self, request: Any, chat: bool) -> Any:
        from aiohttp import web

        sid = request.match_info["sid"]
        session = self.sessions.get(sid)
        if session is None:
            return await self._outside(request)
        lock = self.locks.setdefault(sid, asyncio.Lock())
        try:
            async with lock:
                answer, stream = await self._answer(session, request, self.replica_of[sid], chat)
        except BadRequest as bad:
            return web.json_response(bad.body(), status=bad.status)
        self.requests += 1
        return await reply(request, answer, stream, chat=chat)

    async def _answer(
        self, session: AgentSession, request: Any, replica: int, chat: bool
    ) -> tuple[dict[str, Any], bool]:
        body, model = await self._read(request)
        if any(
            body.get(key) is not None and float(body[key]) != float(getattr(self.sampling, ours))
            for key, ours in _SAMPLING.items()
        ):
            session.stats.sampling_overridden += 1
        try:
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise BadRequest("messages must be a non-empty list of messages", "messages")
                turn = session.turn(messages, body.get("tools"))
            else:
                turn = session.turn_tokens(text_ids(body, self.tokenizer))
        except BudgetSpent as spent:
            raise BadRequest(str(spent), "max_tokens") from None
        except BadRequest:
            raise
        except ValueError as error:  # the chat template cannot render these messages
            raise BadRequest(f"the chat template cannot render these messages: {error}") from None
        ids, logprobs, finish = await self._generate(turn, body, replica)
        if chat:
            message = session.answer(turn, ids, logprobs, finish)
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if message["tool_calls"] else finish,
            }
        else:
            text = session.answer_text(turn, ids, logprobs, finish)
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        answer: dict[str, Any] = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(turn.prompt_ids),
                "completion_tokens": len(ids),
                "total_tokens": len(turn.prompt_ids) + len(ids),
            },
        }
        if body.get("return_token_ids"):
            answer["prompt_token_ids"] = list(turn.prompt_ids)
        return answer, bool(body.get("stream"))

    async def _read(self, request: Any) -> tuple[dict[str, Any], str]:
        """The request's body and the model it names, or BadRequest."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the request body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        model = body.get("model") or self.served[0]
        if model not in self.served:
            raise BadRequest(
                f"The model `{model}` does not exist; this endpoint serves {self.served}",
                "model",
                404,
            )
        refuse_unsupported(body)
        if (body.get("n") or 1) != 1:
            raise BadRequest("n: an agent session is one trajectory; n must be 1", "n")
        return body, str(model)

    async def _generate(
        self, turn: Turn, body: dict[str, Any], replica: int
    ) -> tuple[list[int], list[float], str]:
        """The engine's answer to `turn`: its tokens, their log-probs, why it ended."""
        budget = min(turn.budget, self.max_model_len - len(turn.prompt_ids))
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        if asked:
            budget = min(budget, int(asked))
        if budget < 1:
            raise BadRequest("the session's context is full", "max_tokens")
        sampling = replace(self.sampling, max_new_tokens=budget)
        if self.route is not None:
            pending = self.route(replica, list(turn.prompt_ids), sampling)
        else:
            pending = self.batcher.submit(turn.prompt_ids, sampling)
        try:
            out = await asyncio.wait_for(pending, self.timeout_s)
        except TimeoutError:
            raise BadRequest(
                f"the model took more than {self.timeout_s:g} s to answer", status=504
            ) from None
        finish = out.finish_reasons[0] if out.finish_reasons else "stop"
        return list(out.response_ids[0]), list(out.logprobs[0]), finish
