"""Generation overlapped with learning (`trainer.mode: one_step_off | async`).

A producer thread generates the steps' rollouts in order; step s's rollouts may start as
soon as the rollout engine holds weights at most `max_staleness` updates older than the
ones step s will train (`one_step_off` is `max_staleness: 1`), so no rollout is ever too
stale to use and none is generated only to be dropped. The trainer (main thread) takes
them in order, scores them (rewards keep their SIGALRM timeouts there), learns, and pushes
its weights into the engine every `sync_every` steps (and before a validation, and at the
end), waiting for the generation in flight: the engine holds one set of weights at a time.
With `max_staleness: 0` the producer waits for each push, and the run is the sync run.

On CPU, while generation and learning overlap, each gets half of torch's intra-op threads
(left at all of them, both oversubscribe the cores and run about 2x slower:
benchmarks/modes/). With `trainer.partial_rollout` the producer holds the engine for one
piece of generation at a time (`rl.core.trainer.partial`): a push waits for that piece,
and the step's responses go on under the new weights.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rl.core.errors import TrainingError
from rl.core.trainer.partial import Interruptible, version_metrics
from rl.core.trainer.step import Collected, generate, learn, score, sync

if TYPE_CHECKING:
    from rl.core.trainer.context import RunContext


@dataclass
class _Ready:
    step: int
    version: int  # updates in the weights that generated it
    collected: Collected | None
    sampler_state: dict[str, Any]  # after this step's prompts were drawn
    error: BaseException | None = None


class RolloutPipeline:
    def __init__(self, ctx: RunContext, start: int, max_staleness: int, sync_every: int) -> None:
        if max_staleness < sync_every - 1:
            raise ValueError("max_staleness must be at least sync_every - 1")
        self.ctx, self.max_staleness, self.sync_every = ctx, max_staleness, sync_every
        self.version = start  # updates in the weights the rollout engine holds
        self.changed = threading.Condition()
        self.engine = threading.Lock()  # held while the engine generates or takes weights
        self.ready: queue.Queue[_Ready] = queue.Queue()
        self.stopped = False
        self.claimed = False  # the trainer waits for the engine: the next piece lets it first
        self._threads = self._split_threads() if max_staleness > 0 else None
        trainer = ctx.config.trainer
        self.pieces = (
            Interruptible(self._piece, lambda: self.version, trainer.partial_rollout_chunk)
            if trainer.partial_rollout
            else None
        )
        self.producer = threading.Thread(
            target=self._produce, args=(start,), daemon=True, name="rl-rollout"
        )
        self.producer.start()

    def _split_threads(self) -> int | None:
        import torch

        threads = torch.get_num_threads()
        if self.ctx.config.trainer.device != "cpu" or threads < 2:
            return None
        torch.set_num_threads(threads // 2)
        return threads

    def _produce(self, step: int) -> None:
        ctx = self.ctx
        while step < ctx.total_steps:
            with self.changed:
                self.changed.wait_for(functools.partial(self._may_start, step))
                if self.stopped:
                    return
            items = [ctx.train_data[i] for i in ctx.sampler.next_batch()]
            state = ctx.sampler.state_dict()
            try:
                if self.pieces is not None:  # the engine is held piece by piece
                    version = self.version
                    collected = generate(ctx, items, step, self.pieces)
                    collected.metrics.update(version_metrics(collected.rollouts, step))
                else:
                    with self.engine:
                        version = self.version
                        collected = generate(ctx, items, step)
            except BaseException as error:  # handed to the trainer, which raises it
                self.ready.put(_Ready(step, -1, None, state, error))
                return
            self.ready.put(_Ready(step, version, collected, state))
            step += 1

    def _may_start(self, step: int) -> bool:
        return self.stopped or self.version >= step - self.max_staleness

    def step(self, kl_ctrl: Any, push: bool) -> tuple[dict[str, float], dict[str, Any]]:
        """Learn from the next step's rollouts; push the weights when due or `push`.
        Returns the step's metrics and the sampler state to checkpoint with it."""
        timeout = self.ctx.config.trainer.worker_timeout_s
        try:
            ready = self.ready.get(timeout=timeout)
        except queue.Empty:
            raise TrainingError(
                f"no rollouts for the next step within trainer.worker_timeout_s = {timeout} s "
                "(the rollout engine hangs, or generation needs a longer timeout)"
            ) from None
        if ready.error is not None:
            raise ready.error
        assert ready.collected is not None
        collected = score(self.ctx, ready.collected)
        metrics = learn(self.ctx, collected, kl_ctrl, release_rollout=False)
        metrics["rollout/staleness"] = float(ready.step - ready.version)
        done = ready.step + 1
        due = push or done % self.sync_every == 0 or done == self.ctx.total_steps
        if not due:  # the engine keeps generating with the weights it has
            metrics["timing/wait_rollout"] = 0.0
            return (
                sync(self.ctx, collected, metrics, done, push_weights=False),
                ready.sampler_state,
            )
        waited = time.perf_counter()
        with self.engine_idle():  # waits for the generation (or, partial, the piece) in flight
            metrics["timing/wait_rollout"] = time.perf_counter() - waited
            metrics = sync(self.ctx, collected, metrics, done)
            with self.changed:
                self.version = done
                self.changed.notify_all()
        return metrics, ready.sampler_state

    @contextmanager
    def _piece(self) -> Iterator[None]:
        """The engine for one piece of a partial rollout, once the trainer does not wait
        for it (a push or a validation goes first)."""
        with self.changed:
            self.changed.wait_for(lambda: not self.claimed or self.stopped)
        with self.engine:
            yield

    @contextmanager
    def engine_idle(self) -> Iterator[None]:
        """Hold the rollout engine (no generation in flight) meanwhile: for a push or a
        validation."""
        with self.changed:
            self.claimed = True
        try:
            with self.engine:
                yield
        finally:
            with self.changed:
                self.claimed = False
                self.changed.notify_all()

    def close(self) -> None:
        with self.changed:
            self.stopped = True
            self.changed.notify_all()
        if self._threads is not None:
            import torch

            torch.set_num_threads(self._threads)
