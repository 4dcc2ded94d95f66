"""The test suite's time budget: where CI's minutes go, and test files handed out longest first.

As a pytest plugin (the root conftest.py loads it; every option is off unless given):

- `--budget-durations=PATH` writes one row per test: its node id, the xdist worker that ran
  it, when it started (seconds after the first test began) and its setup, call, teardown
  and total seconds. A committed copy (benchmarks/ci/durations.txt) is the reference a
  later change is compared with.
- `--budget-report=N` prints, after the run, the N slowest tests (all three phases
  counted), the slowest files, and each worker's busy time and finish: whether the
  workers finished together or one waited on the other.
- `--budget-order=PATH` orders the collected test files by their total time in PATH,
  longest first (files PATH does not know go first: a new file may be a slow one). With
  `--dist loadfile --no-loadscope-reorder`, xdist hands the files out in that order: a
  long file starts early instead of keeping one worker busy while the other is idle.

As a script: `python scripts/suite_budget.py compare BEFORE AFTER [--top 30]` prints the
BEFORE run's slowest tests beside their AFTER times, and the totals of both; `python
scripts/suite_budget.py report FILE [--top 25]` prints the summary of a recorded run.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

PHASES = ("setup", "call", "teardown")
HEADER = "nodeid\tworker\tstart_s\tsetup_s\tcall_s\tteardown_s\ttotal_s\toutcome"


@dataclass
class TestRecord:
    """One test's record: seconds per phase, the worker that ran it, when it started."""

    nodeid: str
    worker: str
    start: float  # epoch seconds when recording, run-relative seconds in a file
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0
    outcome: str = "passed"

    @property
    def total(self) -> float:
        return self.setup + self.call + self.teardown

    @property
    def file(self) -> str:
        return self.nodeid.split("::", 1)[0]


def scope_of(nodeid: str) -> str:
    """The unit xdist's loadfile mode hands out whole: the test's file."""
    return nodeid.split("::", 1)[0]


def read_durations(path: str | os.PathLike[str]) -> list[TestRecord]:
    """The rows of a durations file (lines starting with # are its header)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#") or line == HEADER:
            continue
        nodeid, worker, start, setup, call, teardown, _total, outcome = line.split("\t")
        rows.append(
            TestRecord(
                nodeid, worker, float(start), float(setup), float(call), float(teardown), outcome
            )
        )
    return rows


def write_durations(path: str | os.PathLike[str], tests: Iterable[TestRecord], wall: float) -> None:
    tests = sorted(tests, key=lambda t: t.start)
    origin = tests[0].start if tests else 0.0
    lines = [
        f"# {describe_machine()}",
        f"# recorded {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {git_commit()}; "
        f"{len(tests)} tests, wall {wall:.0f} s",
        HEADER,
    ]
    for t in tests:
        times = "\t".join(
            f"{x:.2f}" for x in (t.start - origin, t.setup, t.call, t.teardown, t.total)
        )
        lines.append(f"{t.nodeid}\t{t.worker}\t{times}\t{t.outcome}")
    Path(path).write_text("\n".join(lines) + "\n")


def describe_machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores, Python {platform.python_version()}"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def summary(tests: list[TestRecord], top: int) -> list[str]:
    """The N slowest tests, the slowest files, and each worker's load and finish."""
    if not tests:
        return ["no tests ran"]
    origin = min(t.start for t in tests)
    lines = [f"{top} slowest tests (setup + call + teardown):"]
    for t in sorted(tests, key=lambda t: -t.total)[:top]:
        lines.append(f"  {t.total:8.1f} s  {t.nodeid}")
    files: dict[str, float] = defaultdict(float)
    for t in tests:
        files[scope_of(t.nodeid)] += t.total
    lines.append("slowest files:")
    for name, seconds in sorted(files.items(), key=lambda kv: -kv[1])[:10]:
        lines.append(f"  {seconds:8.1f} s  {name}")
    by_worker: dict[str, list[TestRecord]] = defaultdict(list)
    for t in tests:
        by_worker[t.worker].append(t)
    end = max(t.start - origin + t.total for t in tests)
    lines.append(f"workers (the run's tests span {end:.0f} s):")
    for worker, own in sorted(by_worker.items()):
        busy = sum(t.total for t in own)
        last = max(t.start - origin + t.total for t in own)
        lines.append(
            f"  {worker}: {len(own)} tests, busy {busy:.0f} s, finished at {last:.0f} s "
            f"({end - last:.0f} s before the last)"
        )
    return lines


def compare(before: list[TestRecord], after: list[TestRecord], top: int) -> list[str]:
    """BEFORE's slowest tests with their AFTER times (— where AFTER has no such test)."""
    now = {t.nodeid: t.total for t in after}
    lines = [f"{'before':>8}  {'after':>8}  test"]
    for t in sorted(before, key=lambda t: -t.total)[:top]:
        later = f"{now[t.nodeid]:8.1f}" if t.nodeid in now else f"{'—':>8}"
        lines.append(f"{t.total:8.1f}  {later}  {t.nodeid}")
    for name, run in (("before", before), ("after", after)):
        lines.append(f"{name}: {len(run)} tests, {sum(t.total for t in run):.0f} s of test time")
    return lines


# ---- pytest plugin -------------------------------------------------------------------------


def pytest_addoption(parser):
    group = parser.getgroup("budget", "the test suite's time budget (scripts/suite_budget.py)")
    group.addoption("--budget-durations", metavar="PATH", help="write every test's times here")
    group.addoption("--budget-report", type=int, metavar="N", help="print the N slowest tests")
    group.addoption("--budget-order", metavar="PATH", help="run files longest first, as in PATH")


class Recorder:
    """Collects the reports the controller sees (under xdist, every worker's)."""

    def __init__(self, config):
        self.config = config
        self.tests: dict[str, TestRecord] = {}
        self.began = datetime.now().timestamp()

    def pytest_runtest_logreport(self, report):
        node = getattr(report, "node", None)  # xdist puts the worker on the report
        worker = node.gateway.id if node is not None else "main"
        test = self.tests.setdefault(
            report.nodeid, TestRecord(report.nodeid, worker, report.start or self.began)
        )
        setattr(test, report.when, report.duration)
        if report.outcome != "passed" and test.outcome == "passed":
            test.outcome = report.outcome

    def pytest_sessionfinish(self, session):
        path = self.config.getoption("budget_durations")
        if path:
            wall = datetime.now().timestamp() - self.began
            write_durations(path, self.tests.values(), wall)

    def pytest_terminal_summary(self, terminalreporter):
        top = self.config.getoption("budget_report")
        if top:
            terminalreporter.section("time budget (scripts/suite_budget.py)")
            for line in summary(list(self.tests.values()), top):
                terminalreporter.write_line(line)


def pytest_configure(config):
    is_worker = hasattr(config, "workerinput")  # xdist workers report to the controller
    wanted = config.getoption("budget_durations") or config.getoption("budget_report")
    if wanted and not is_worker:
        config.pluginmanager.register(Recorder(config), "suite-budget-recorder")


def pytest_collection_modifyitems(session, config, items):
    path = config.getoption("budget_order")
    if not path:
        return
    if not Path(path).is_file():
        import pytest  # (only here: the report runs outside the test environment too)

        raise pytest.UsageError(f"--budget-order={path}: no such durations file")
    seconds: dict[str, float] = defaultdict(float)
    for t in read_durations(path):
        seconds[scope_of(t.nodeid)] += t.total
    first_seen = {}
    for index, item in enumerate(items):
        first_seen.setdefault(scope_of(item.nodeid), index)
    # unknown files first (float inf), then longest first; a file's own order is kept
    items.sort(
        key=lambda item: (
            -seconds.get(scope_of(item.nodeid), float("inf")),
            first_seen[scope_of(item.nodeid)],
        )
    )


# ---- command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="summarise a recorded run")
    report.add_argument("file")
    report.add_argument("--top", type=int, default=25)
    versus = commands.add_parser("compare", help="the BEFORE run's slowest tests, then and now")
    versus.add_argument("before")
    versus.add_argument("after")
    versus.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    if args.command == "report":
        lines = summary(read_durations(args.file), args.top)
    else:
        lines = compare(read_durations(args.before), read_durations(args.after), args.top)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
