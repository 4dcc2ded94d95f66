"""Colocated roles take turns: the policy of who offloads when (engines record calls)."""

from rl.core.workers.turns import Turns, memory_gib


class Recorder:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def offload(self):
        self.log.append(f"{self.name}.offload")

    def onload(self):
        self.log.append(f"{self.name}.onload")


def test_only_offloading_roles_step_aside_and_come_back():
    log = []
    engines = {name: Recorder(name, log) for name in ("actor", "ref", "rollout")}
    turns = Turns(engines, offloading={"actor", "ref"}, device_type="cpu")
    turns.enter("rollout")
    assert log == ["actor.offload", "ref.offload"]
    turns.enter("rollout")  # already working: nothing moves
    turns.enter("ref")
    assert log[2:] == ["ref.onload"]
    turns.enter("actor")
    assert log[3:] == ["ref.offload", "actor.onload"]
    metrics = turns.drain_metrics()
    assert set(metrics) >= {"memory/actor_before_gib", "memory/actor_after_gib"}
    assert all(value > 0 for value in metrics.values())  # this process's resident memory
    assert turns.drain_metrics() == {}


def test_without_offloading_nothing_moves():
    log = []
    engines = {name: Recorder(name, log) for name in ("actor", "rollout")}
    turns = Turns(engines, offloading=(), device_type="cpu")
    turns.enter("rollout")
    turns.enter("actor")
    assert log == [] and turns.drain_metrics() == {}


def test_memory_is_reported_in_gib():
    assert 0.01 < memory_gib("cpu") < 64


def test_the_engines_say_whether_they_offload():
    """Only engines that declare `Offloading` are asked, and only theirs `offloads` counts;
    one with an `offloads` attribute but no declaration is not probed."""
    from rl.core.engines import Offloading
    from rl.core.workers.worker import offloading_roles

    class Engine(Offloading):
        def __init__(self, offloads):
            self._offloads = offloads

        @property
        def offloads(self):
            return self._offloads

        def offload(self): ...

        def onload(self): ...

    class Undeclared:
        offloads = True

    engines = {
        "actor": Engine(True),
        "ref": Engine(False),
        "critic": Undeclared(),
        "rollout": Engine(True),
    }
    assert offloading_roles(engines) == {"actor"}  # rollout memory is sleep()/wake()'s
