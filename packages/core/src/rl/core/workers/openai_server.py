"""An OpenAI-compatible HTTP endpoint in front of one of rl's engines, on loopback:
`POST /v1/chat/completions`, `POST /v1/completions` (both also streamed, as server-sent
events), `GET /v1/models` and `GET /health`.

It runs on an event loop of its own in a daemon thread, so whoever starts it (the trainer,
a reward worker) goes on. Concurrent requests are gathered into batched `generate` calls
(`RequestBatcher`, up to `max_batch_size` samples), so a hundred clients each sending one
request make a few engine calls, not a hundred. Each call has `timeout_s`: a request that
waits longer is answered 504. A stream is sent when its answer is complete (the engines
generate a batch at once): the same chunks a streaming client expects, only not earlier.

Requests are read by `rl.core.workers.openai_api`; what it refuses is answered 400 (404
for a model not served) with OpenAI's error body.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rl.core.engines import Rollouts, SamplingParams
from rl.core.workers.openai_api import BadRequest, read_request, response_body, stream_chunks
from rl.core.workers.request_batcher import RequestBatcher

log = logging.getLogger(__name__)

Generate = Callable[[list[list[int]], SamplingParams], Awaitable[Rollouts]]


class OpenAIServer:
    """`generate` answers batched prompts (an awaitable, run on the server's loop);
    `served` are the names a request's `model` may give (the first is the default)."""

    def __init__(
        self,
        generate: Generate,
        tokenizer: Any,
        served: Sequence[str],
        max_model_len: int,
        max_batch_size: int = 64,
        timeout_s: float = 600.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.generate, self.tokenizer, self.served = generate, tokenizer, list(served)
        self.max_model_len, self.max_batch_size = max_model_len, max_batch_size
        self.timeout_s, self.host = timeout_s, host
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.runner: Any = None
        self.address = ""  # host:port, once started
        self.unix_path = ""  # a Unix socket it also listens on (start's `unix_path`)
        self.requests = 0  # answered, for the run's metrics

    def start(self, unix_path: str = "") -> str:
        """Serve on a free port (and on the Unix socket `unix_path` when given: what a
        sandbox without a network reaches); returns `host:port` (verl's
        `reward_router_address`)."""
        self.unix_path = unix_path
        try:
            from aiohttp import web  # noqa: F401  (a dependency of ray[default])
        except ImportError:
            raise RuntimeError(
                "the OpenAI-compatible endpoint needs aiohttp: pip install 'rl-core[ray]'"
            ) from None
        self.loop = asyncio.new_event_loop()
        started: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.thread = threading.Thread(
            target=self._serve, args=(started,), name="rl-openai-server", daemon=True
        )
        self.thread.start()
        self.address = started.result(timeout=60)
        return self.address

    @property
    def base_url(self) -> str:
        return f"http://{self.address}/v1"

    def _serve(self, started: concurrent.futures.Future[str]) -> None:
        # the loop is held here: `close` may clear `self.loop` as soon as the address is
        # out, before this thread reaches `run_forever` (its stop is then already queued)
        loop = self.loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._listen(started))
        loop.run_forever()

    async def _listen(self, started: concurrent.futures.Future[str]) -> None:
        from aiohttp import web

        try:
            self.batcher = RequestBatcher(self.generate, self.max_batch_size)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            self.add_routes(app)
            # connections still open at close get 1 s, not aiohttp's 60
            self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
            await self.runner.setup()
            site = web.TCPSite(self.runner, self.host, 0)
            await site.start()
            if self.unix_path:
                await web.UnixSite(self.runner, self.unix_path).start()
            port = self.runner.addresses[0][1]
            started.set_result(f"{self.host}:{port}")
        except BaseException as error:
            started.set_exception(error)

    def add_routes(self, app: Any) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._text)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)

    async def _chat(self, request: Any) -> Any:
        return await self._complete(request, chat=True)

    async def _text(self, request: Any) -> Any:
        return await self._complete(request, chat=False)

    async def _complete(self, request: Any, chat: bool) -> Any:
        from aiohttp import web

        try:
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise BadRequest("the request body is not JSON") from None
            completion = read_request(
                body, self.tokenizer, self.served, self.max_model_len, chat=chat
            )
            try:
                out = await asyncio.wait_for(
                    self.batcher.submit(completion.prompt_ids, completion.sampling),
                    self.timeout_s,
                )
            except TimeoutError:
                raise BadRequest(
                    f"the model took more than {self.timeout_s:g} s to answer", status=504
                ) from None
            except Exception as error:
                log.warning("the served model failed a request: %s", error)
                raise BadRequest(f"the model failed: {error}", status=500) from None
        except BadRequest as bad:
            return web.json_response(bad.body(), status=bad.status)
        answer = response_body(completion, out, self.tokenizer, chat=chat)
        self.requests += 1
        return await reply(request, answer, completion.stream, chat)

    async def _models(self, _request: Any) -> Any:
        from aiohttp import web

        data = [{"id": name, "object": "model", "owned_by": "rl"} for name in self.served]
        return web.json_response({"object": "list", "data": data})

    async def _health(self, _request: Any) -> Any:
        from aiohttp import web

        return web.Response(text="ok")

    def close(self) -> None:
        """Stop serving (requests in flight are cut) and end the thread."""
        loop, self.loop = self.loop, None
        if loop is None:
            return
        if self.runner is not None:
            cleanup = asyncio.run_coroutine_threadsafe(self.runner.cleanup(), loop)
            try:
                cleanup.result(timeout=15)
            except (concurrent.futures.TimeoutError, RuntimeError) as error:
                # the thread is a daemon: stopping its loop below ends the serving anyway
                log.warning("the endpoint did not shut down cleanly (%r); stopping it", error)
        loop.call_soon_threadsafe(loop.stop)
        if self.thread is not None:
            self.thread.join(timeout=15)
        if not loop.is_running():
            loop.close()


async def reply(request: Any, answer: dict[str, Any], stream: bool, chat: bool) -> Any:
    """`answer` as JSON, or as the chunks of a server-sent-event stream."""
    from aiohttp import web

    if not stream:
        return web.json_response(answer)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for chunk in stream_chunks(answer, chat=chat):
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
