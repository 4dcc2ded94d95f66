"""Runs that survive: a multi-node Ray cluster on this machine (Ray's own
`ray.cluster_utils.Cluster`, one raylet per node, each with CPUs of its own), the actor's
2 FSDP ranks on node 1 and one rollout replica per node (`trainer.rollout_restarts`), real
workers killed and real nodes removed mid-run.

- a rollout worker SIGKILLed: the run finishes, a replacement rejoins, and every metric
  but the wall-clock ones equals the unbroken run's (the lost rows are generated again
  with their own seeds);
- node 2 removed: its replica is lost, its replacement has no room, the other replica
  takes the batch, and the run ends as the unbroken one (without `rollout_restarts` a lost
  replica ends the run: test_train_placements.py);
- the node of the train rank removed: one error line naming the node, the last checkpoint
  intact, and the same command resumes once a node is back;
- after each, no worker of the run is left on any node;
- the unbroken run's checkpoint of its 2 ranks, resumed by one local process, trains the
  next steps as the 2 ranks did.
"""

import contextlib
import os
import re
import signal
import subprocess
import time

import pytest

pytest.importorskip("ray")

ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}
STEPS = 4
ROWS = [  # the demo's task and warm start: rewards differ within a group, the updates train
    "data.builtin_train_size=64",
    "data.builtin_val_size=8",
    "data.train_batch_size=8",
    "data.max_response_length=4",
    "actor.ppo_mini_batch_size=4",
    "rollout.n=2",
    f"trainer.total_training_steps={STEPS}",
    f"trainer.test_freq={STEPS}",
    "trainer.save_freq=2",
    "trainer.progress_bar=false",
]
RUN = [
    *ROWS,
    "trainer.worker_timeout_s=180",
    "trainer.launcher=ray",
    "cluster.n_gpus_per_node=4",
    "cluster.placement={actor: [0, 1], rollout: [2, 3]}",
    "cluster.cpus_per_worker=1",
]
# what a lost replica or another layout may change: times, memory, how weights moved, the
# membership itself, how much prompt prefix a rank's micro-batches happened to share
STATISTICS = ("timing/", "perf/", "memory/", "weight_sync/", "rollout/replica", "rollout/regen")
STATISTICS += ("actor/prompt_tokens_shared",)


@pytest.fixture(scope="module")
def cluster():
    """Node 1 (the head: the actor's 2 ranks and replica 0) with 3 CPUs, node 2 with 1
    (replica 1); a test that removes node 2 adds another in its place."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        made = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 3, "include_dashboard": False}
        )
        made.add_node(num_cpus=1)
        yield made
        made.shutdown()


@pytest.fixture
def workers_on(descendants):
    """`workers_on(node, kind)`: the pids of the run's workers on `node` (`ray::RoleWorker`,
    `ray::RolloutWorker`; both by default), the processes its raylet started."""

    def find(node, kind="Worker"):
        raylet = node.all_processes["raylet"][0].process.pid
        return [pid for pid, args in descendants(raylet) if args.startswith(f"ray::{kind}")]

    return find


def start(rl_executable, output_dir, cluster, *extra):
    return subprocess.Popen(
        [
            rl_executable,
            "train",
            *RUN,
            *extra,
            f"trainer.ray_address={cluster.address}",
            f"trainer.output_dir={output_dir}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def after_step(process, output_dir, step, metrics_rows, deadline_s=600):
    """Wait until the run logged `step` (it must still be running)."""
    deadline = time.time() + deadline_s
    while not any(r.get("step", 0) >= step for r in metrics_rows(output_dir, True)):
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.time() < deadline, "the run made no step"
        time.sleep(0.05)


@contextlib.contextmanager
def driver_paused(process, settle_s=1.0):
    """The driver stopped (SIGSTOP) while the fault is made, so that it falls between two
    calls to the workers: the calls in flight (a weight push among them) finish first. A
    replica lost in the middle of a push ends the run (docs/fault-tolerance.md)."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        time.sleep(settle_s)
        yield
        time.sleep(settle_s)
    finally:
        os.kill(process.pid, signal.SIGCONT)


def finish(process, timeout=600):
    try:
        _, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, stderr


def no_workers_left(cluster, workers_on, timeout=60.0):
    """Every node's workers of the run are gone within `timeout` (the driver's exit ends
    them, as its shutdown does)."""
    deadline = time.time() + timeout
    nodes = [cluster.head_node, *cluster.worker_nodes]
    while time.time() < deadline:
        if not [pid for node in nodes for pid in workers_on(node)]:
            return True
        time.sleep(0.5)
    return False


def comparable(row):
    return {k: v for k, v in row.items() if not k.startswith(STATISTICS)}


@pytest.fixture(scope="module")
def unbroken(cluster, rl_executable, tmp_path_factory, metrics_rows):
    """The run with nothing lost, on the same cluster (2 replicas, restarts allowed)."""
    out = tmp_path_factory.mktemp("unbroken")
    code, stderr = finish(start(rl_executable, out, cluster, "trainer.rollout_restarts=1"))
    assert code == 0, stderr[-3000:]
    return out


def assert_same_run(rows, expected):
    assert [r["step"] for r in rows] == [r["step"] for r in expected]
    for got, want in zip(rows, expected, strict=True):
        got, want = comparable(got), comparable(want)
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-6), (got["step"], key)


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_rollout_worker_is_replaced_and_the_run_is_the_unbroken_one(
    cluster, unbroken, rl_executable, tmp_path, metrics_rows, workers_on
):
    head, (node2,) = cluster.head_node, list(cluster.worker_nodes)
    assert no_workers_left(cluster, workers_on)  # the unbroken run left nothing
    out = tmp_path / "killed"
    run = start(rl_executable, out, cluster, "trainer.rollout_restarts=1")
    after_step(run, out, 1, metrics_rows)
    # the layout the scenario asks for: the actor on node 1, one replica per node
    assert len(workers_on(head, "RoleWorker")) == 2
    assert len(workers_on(head, "RolloutWorker")) == 1
    (replica,) = workers_on(node2, "RolloutWorker")
    with driver_paused(run):
        os.kill(replica, signal.SIGKILL)
    code, stderr = finish(run)
    assert code == 0, stderr[-3000:]
    assert re.search(r"rollout replica \d lost \(rollout\.\w+: it died\)", stderr), stderr[-3000:]
    rows = metrics_rows(out)
    last = rows[-1]
    assert last["rollout/replica_restarts"] == 1 and last["rollout/replicas_lost"] == 1
    # the replacement joins at the first push after its engine is built (seconds; a step
    # here is a fraction of one): whichever, the membership adds up
    # (rl.core.tests.workers.test_replicas waits for it and checks what it generates)
    rejoined = last["rollout/replicas_rejoined"]
    assert last["rollout/replicas"] == 1 + rejoined
    assert last["rollout/replicas_joining"] == 1 - rejoined
    assert_same_run(rows, metrics_rows(unbroken))
    assert no_workers_left(cluster, workers_on)


@pytest.mark.ray
@pytest.mark.slow
def test_a_lost_node_leaves_its_replica_out_and_the_other_takes_the_batch(
    cluster, unbroken, rl_executable, tmp_path, metrics_rows, workers_on
):
    (node2,) = list(cluster.worker_nodes)
    out = tmp_path / "node_lost"
    run = start(rl_executable, out, cluster, "trainer.rollout_restarts=1")
    after_step(run, out, 1, metrics_rows)
    assert len(workers_on(node2, "RolloutWorker")) == 1
    with driver_paused(run):
        cluster.remove_node(node2)  # its raylet and every worker on it
    code, stderr = finish(run)
    cluster.add_node(num_cpus=1)  # for the next test
    assert code == 0, stderr[-3000:]
    rows = metrics_rows(out)
    last = rows[-1]
    # no node has room for the replacement: it waits (and is stopped with the run)
    assert last["rollout/replicas"] == 1 and last["rollout/replicas_lost"] == 1
    assert last["rollout/replica_restarts"] == 1 and last["rollout/replicas_joining"] == 1
    assert_same_run(rows, metrics_rows(unbroken))
    assert no_workers_left(cluster, workers_on)


@pytest.mark.ray
@pytest.mark.slow
def test_the_train_ranks_node_lost_is_one_line_and_the_same_command_resumes(
    monkeypatch, rl_executable, tmp_path, metrics_rows, workers_on
):
    """Node 1 (the head) has no CPU for workers; the train rank lands on node 2 or 3,
    which is removed after its first checkpoint; a node added, the same command ends the
    run from that checkpoint."""
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        made.add_node(num_cpus=1)
        made.add_node(num_cpus=1)
        out = tmp_path / "train_node_lost"
        args = ("cluster.placement={actor: [0], rollout: [1]}", "cluster.n_gpus_per_node=2")
        args = (*args, "trainer.save_freq=1")
        run = start(rl_executable, out, made, *args)
        after_step(run, out, 2, metrics_rows)
        (node,) = [n for n in made.worker_nodes if workers_on(n, "RoleWorker")]
        with driver_paused(run):  # lost between calls: the next call to it names the node
            made.remove_node(node)
        code, stderr = finish(run)
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert code == 2 and len(errors) == 1, stderr[-3000:]
        assert node.node_id in errors[0] and "died" in errors[0], errors[0]
        assert "Traceback" not in stderr.split(errors[0])[-1]
        assert no_workers_left(made, workers_on)
        saved = sorted((out / "checkpoints").glob("global_step_*/manifest.json"))
        assert saved, "no checkpoint was left"
        last = max(int(p.parent.name.split("_")[-1]) for p in saved)
        before = metrics_rows(out)[: last + 1]  # the warm start and the steps it holds
        made.add_node(num_cpus=1)  # capacity is back
        resumed = start(rl_executable, out, made, *args)
        code, stderr = finish(resumed)
        assert code == 0, stderr[-3000:]
        rows = metrics_rows(out)
        assert [r["step"] for r in rows] == list(range(STEPS + 1))
        assert rows[: last + 1] == before  # resumed after them, not run again
        assert no_workers_left(made, workers_on)
    finally:
        with contextlib.suppress(Exception):
            made.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_a_two_rank_checkpoint_resumes_in_one_process_as_the_same_run(
    unbroken, rl_executable, tmp_path, metrics_rows
):
    """The unbroken run's step-2 checkpoint, written by the actor's 2 FSDP ranks, resumed by
    one local process (the same config but the layout: free on resume) trains steps 3 and
    4 as the 2 ranks did (the same prompts, samples and weights, summed in another order)."""
    one = tmp_path / "one_process"
    result = subprocess.run(
        [
            rl_executable,
            "train",
            *ROWS,
            f"trainer.output_dir={one}",
            "trainer.resume_mode=path",
            f"trainer.resume_from_path={unbroken / 'checkpoints' / 'global_step_2'}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cluster.n_gpus_per_node" in result.stderr  # the layout change, said and recorded
    resumed = [r for r in metrics_rows(one) if r["step"] > 2]
    straight = [r for r in metrics_rows(unbroken) if r["step"] > 2]
    assert [r["step"] for r in resumed] == [3, 4]
    assert all(r["actor/grad_norm"] > 0 for r in resumed)  # the updates trained
    assert_same_run(resumed, straight)
