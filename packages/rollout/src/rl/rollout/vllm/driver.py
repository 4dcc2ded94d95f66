"""A background loop that steps an in-process vLLM engine for many callers.

vLLM's `LLMEngine` is not thread-safe and only makes progress when `step()` is
called. `EngineLoop` owns one engine: callers `submit` requests from any thread
(or event loop, through `asyncio.wrap_future`) and get a future per request; one
thread steps the engine while requests are pending, so requests submitted
concurrently are batched together (continuous batching) instead of waiting for
each other. `exclusive` runs a function on the engine between steps (weight
updates, sleep/wake).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class EngineLoop:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._lock = threading.Lock()  # held while the engine runs a step or a call
        self._wake = threading.Condition(threading.Lock())
        self._futures: dict[str, Future[Any]] = {}
        self._ids = itertools.count()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="vllm-engine-loop", daemon=True)
        self._thread.start()

    def submit(self, prompt: Any, params: Any) -> Future[Any]:
        """Add one request; the future resolves to its final `RequestOutput`."""
        future: Future[Any] = Future()
        with self._lock:
            self._raise_if_unusable()
            # outputs carry the id given here (vLLM's internal one adds a suffix)
            request_id = f"rl-{next(self._ids)}"
            self.engine.add_request(request_id, prompt, params)
            self._futures[request_id] = future
        with self._wake:
            self._wake.notify()
        return future

    def exclusive(self, call: Callable[[Any], T]) -> T:
        """Run `call(engine)` while no step runs (requests in flight wait)."""
        with self._lock:
            self._raise_if_unusable()
            return call(self.engine)

    def close(self) -> None:
        self._closed = True
        with self._wake:
            self._wake.notify()
        self._thread.join(timeout=30)

    def _raise_if_unusable(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the vLLM engine failed earlier: {self._error!r}") from self._error
        if self._closed:
            raise RuntimeError("the vLLM engine was closed")

    def _run(self) -> None:
        while not self._closed:
            with self._wake:
                while not self._futures and not self._closed:
                    self._wake.wait()
            try:
                self._step_once()
            except BaseException as error:  # the engine is unusable: fail every caller
                self._error = error
                self._fail_all(error)
                return

    def _step_once(self) -> None:
        with self._lock:
            if not self.engine.has_unfinished_requests():  # nothing can finish them now
                lost, self._futures = self._futures, {}
                outputs = []
            else:
                lost, outputs = {}, self.engine.step()
        for future in lost.values():
            future.set_exception(RuntimeError("vLLM dropped the request without an output"))
        for output in outputs:
            if output.finished:
                future = self._futures.pop(output.request_id, None)
                if future is not None:
                    future.set_result(output)

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            futures, self._futures = self._futures, {}
        for future in futures.values():
            future.set_exception(error)
