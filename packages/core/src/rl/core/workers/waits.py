"""Waiting on the calls of one or more Ray worker groups, and naming the cause of a failure.

A call fails fast: the first rank that raises or dies ends it with one `WorkerError` naming
the role, the rank and the last line of the remote traceback, and a call that does not
finish within its group's `timeout_s` fails the same way (a rank stuck in a collective with a
dead peer would otherwise wait for ever).

When a worker dies, its peers in a collective often fail first (a gloo connection reset
reaches them before Ray reports the death). So a failure or a time-out is not reported at
once: the calls still pending get `DEATH_GRACE_S` to show a dead worker, and a death, the
cause, is what the error names.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rl.core.errors import WorkerError

DEATH_GRACE_S = 5.0


class WorkerDied(WorkerError):
    """A worker process died (killed, crashed, its node lost); `rank` is its rank in its
    group (-1 where unknown)."""

    def __init__(self, message: str, rank: int = -1) -> None:
        super().__init__(message)
        self.rank = rank


def last_line(error: BaseException) -> str:
    """The last non-empty line of a (remote) traceback: the exception itself."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(error).__name__


def death_reason(error: BaseException) -> str:
    """Ray's account of a death, without its list of common causes."""
    reason = last_line(error)
    return reason.split(" Some common causes include")[0].strip()


@dataclass(frozen=True)
class _Call:
    role: str
    method: str
    rank: int
    node: str = ""  # the Ray node the worker ran on, where its group knows it

    @property
    def where(self) -> str:
        return f" on node {self.node}" if self.node else ""


def wait_together(waits: Sequence[tuple[Any, list[Any], str, str]]) -> list[list[Any]]:
    """The answers of `(group, refs, role, method)` calls started on worker groups, waited for
    at once (each group's answers in rank order), or the `WorkerError` of the first failure
    (a death preferred, see the module). Every group of a failed wait is marked `broken`."""
    try:
        return _wait_all(waits)
    except WorkerError:
        for group, *_ in waits:
            group.broken = True
        raise


def _wait_all(
    waits: Sequence[tuple[Any, list[Any], str, str]], ranks: Sequence[int] | None = None
) -> list[list[Any]]:
    """`wait_together`'s answers; `ranks`: the ranks of a single wait's refs (default 0..)."""
    import ray

    calls = {
        ref: _Call(role, method, rank, node_of(group, rank))
        for group, refs, role, method in waits
        for rank, ref in zip(ranks or range(len(refs)), refs, strict=True)
    }
    deadlines = {
        ref: time.monotonic() + group.timeout_s for group, refs, *_ in waits for ref in refs
    }
    timeouts = {ref: group.timeout_s for group, refs, *_ in waits for ref in refs}
    pending = list(calls)
    while pending:
        first = min(deadlines[ref] for ref in pending)
        ready, pending = ray.wait(pending, num_returns=1, timeout=max(first - time.monotonic(), 0))
        if ready:
            error = _error_of(ready[0], calls[ready[0]])
        else:
            late = [ref for ref in pending if deadlines[ref] <= time.monotonic()]
            error = _late(late, calls, timeouts) if late else None
        if error is not None:
            raise _death_among(pending, calls) or error
    return [ray.get(refs) for _, refs, *_ in waits]


def node_of(group: Any, rank: int) -> str:
    """The Ray node id of `group`'s rank `rank` (its `nodes`, recorded at start), or ""."""
    nodes = getattr(group, "nodes", None) or ()
    return str(nodes[rank]) if rank < len(nodes) else ""


def wait_surviving(
    group: Any, refs: list[Any], role: str, method: str
) -> tuple[dict[int, Any], list[int]]:
    """The answers of calls started on `group`'s ranks, surviving deaths: (rank -> answer of
    each rank that answered, the ranks whose worker died). Any other failure, or a rank not
    answering within the group's `timeout_s`, is a `WorkerError` as in `wait_together`."""
    answers: dict[int, Any] = {}
    dead: list[int] = []
    pending = dict(enumerate(refs))
    while pending:
        ranks = list(pending)
        try:
            got = _wait_all([(group, [pending[r] for r in ranks], role, method)], ranks)[0]
        except WorkerDied as died:
            dead.append(died.rank)
            del pending[died.rank]
            continue
        except WorkerError:
            group.broken = True
            raise
        answers.update(zip(ranks, got, strict=True))
        break
    return answers, sorted(dead)


def _error_of(ref: Any, call: _Call) -> WorkerError | None:
    """The error of a finished call, None when it answered."""
    import ray

    try:
        ray.get(ref)
    except ray.exceptions.RayActorError as error:
        return WorkerDied(
            f"{call.role}.{call.method}: the worker of rank {call.rank}{call.where} died "
            f"({death_reason(error)}); see the Ray worker logs",
            call.rank,
        )
    except ray.exceptions.RayTaskError as error:
        return WorkerError(
            f"{call.role}.{call.method} failed on rank {call.rank}: "
            f"{last_line(error.cause if error.cause is not None else error)} "
            "(the full traceback is in the worker's log above)"
        )
    return None


def _late(late: list[Any], calls: dict[Any, _Call], timeouts: dict[Any, float]) -> WorkerError:
    call = calls[late[0]]
    ranks = sorted(calls[ref].rank for ref in late if calls[ref].role == call.role)
    return WorkerError(
        f"{call.role}.{call.method}: rank(s) {ranks} did not answer within "
        f"{timeouts[late[0]]:g} s (trainer.worker_timeout_s); a peer may have died "
        "or hung, see the Ray worker logs"
    )


def _death_among(pending: list[Any], calls: dict[Any, _Call]) -> WorkerDied | None:
    """A death among the calls still pending, when one shows within `DEATH_GRACE_S`."""
    import ray

    deadline = time.monotonic() + DEATH_GRACE_S
    while pending and (remaining := deadline - time.monotonic()) > 0:
        ready, pending = ray.wait(pending, num_returns=1, timeout=remaining)
        if ready and isinstance(died := _error_of(ready[0], calls[ready[0]]), WorkerDied):
            return died
    return None
