"""Waits on real Ray worker groups name the cause of a failure: a worker that died, not
the peer whose collective broke because of it, nor the one that timed out waiting."""

import os
import time

import pytest

from rl.core.errors import WorkerError

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ray = pytest.importorskip("ray")


class Worker:
    """A rank that answers, fails or dies when told to."""

    def __init__(self, rank, world_size):
        self.rank = rank

    def pid(self):
        return os.getpid()

    def node(self):
        return ray.get_runtime_context().get_node_id()

    def answer(self, after_s):
        time.sleep(after_s)
        return self.rank

    def fail(self, after_s):
        time.sleep(after_s)
        raise ConnectionResetError("the peer closed the connection")

    def die(self, after_s):
        time.sleep(after_s)
        os._exit(1)


@pytest.fixture
def groups():
    from rl.core.workers.ray_group import RayWorkerGroup

    os.environ["RAY_AUTH_MODE"] = "disabled"
    made = []

    def make(world_size, timeout_s=60.0):
        # the workers start within 60 s (a loaded 2-core CI machine took over 2 s); the
        # group's calls then wait `timeout_s`
        made.append(
            RayWorkerGroup(
                ["actor"],
                world_size,
                cpus_per_worker=0.25,
                timeout_s=60.0,
                distributed=False,
                worker_class=Worker,
            )
        )
        made[-1].timeout_s = timeout_s
        return made[-1]

    yield make
    for group in made:
        group.broken = True
        group.shutdown()


def test_a_death_is_named_before_the_failure_it_caused_in_another_group(groups):
    from rl.core.workers.waits import wait_together

    train, rollout = groups(2), groups(1)
    # the train rank fails first (its connection to the replica reset); the replica's death
    # reaches Ray a moment later
    sent = [train.actors[0].fail.remote(0.2), train.actors[1].answer.remote(0.0)]
    received = [rollout.actors[0].die.remote(1.0)]
    with pytest.raises(
        WorkerError, match=r"^rollout.pull_weights: the worker of rank 0 on node [0-9a-f]+ died"
    ):
        wait_together(
            [(train, sent, "actor", "push_weights"), (rollout, received, "rollout", "pull_weights")]
        )
    assert train.broken and rollout.broken


def test_a_death_is_named_before_a_peers_failure_in_one_group(groups):
    group = groups(2)
    refs = [group.actors[0].fail.remote(0.2), group.actors[1].die.remote(1.0)]
    with pytest.raises(
        WorkerError, match=r"^actor.step: the worker of rank 1 on node [0-9a-f]+ died"
    ):
        group.wait(refs, "actor", "step")


def test_a_failure_without_a_death_is_named_as_it_is(groups):
    from rl.core.workers.waits import wait_together

    train, rollout = groups(1), groups(1)
    refs = [train.actors[0].fail.remote(0.0)], [rollout.actors[0].answer.remote(0.0)]
    with pytest.raises(WorkerError, match=r"^actor.push_weights failed on rank 0: the peer closed"):
        wait_together(
            [(train, refs[0], "actor", "push_weights"), (rollout, refs[1], "rollout", "pull")]
        )


def test_answers_come_per_group_in_rank_order_and_a_late_rank_is_named(groups):
    from rl.core.workers.waits import wait_together

    train, rollout = groups(2), groups(1, timeout_s=2.0)
    answers = wait_together(
        [
            (train, [a.answer.remote(0.3 - 0.2 * r) for r, a in enumerate(train.actors)], "a", "m"),
            (rollout, [rollout.actors[0].answer.remote(0.0)], "b", "m"),
        ]
    )
    assert answers == [[0, 1], [0]]
    started = time.monotonic()
    with pytest.raises(WorkerError, match=r"^b.m: rank\(s\) \[0\] did not answer within 2 s"):
        wait_together(
            [
                (train, [a.answer.remote(0.0) for a in train.actors], "a", "m"),
                (rollout, [rollout.actors[0].answer.remote(30.0)], "b", "m"),
            ]
        )
    assert time.monotonic() - started < 2.0 + 5.0 + 3.0  # the timeout, the grace, slack
