"""The test suite's own tools (scripts/): the time budget's records and file order, and the
warm rank server the multi-process scenarios fork from."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import suite_budget  # noqa: E402
from warm_ranks import WarmRanks, top_level_imports  # noqa: E402

# ---- suite_budget ----------------------------------------------------------------------------


def record(nodeid, worker, start, setup, call, teardown=0.0):
    return suite_budget.TestRecord(nodeid, worker, start, setup, call, teardown)


def test_durations_round_trip_with_the_run_relative_start(tmp_path):
    tests = [
        record("a.py::t1", "gw0", 1000.0, 0.5, 2.0),
        record("b.py::t2[x::y]", "gw1", 1001.5, 0.0, 3.25, 0.25),
    ]
    path = tmp_path / "durations.txt"
    suite_budget.write_durations(path, tests, wall=9.0)
    assert path.read_text().startswith("# ")  # the machine, then the date and commit
    back = suite_budget.read_durations(path)
    assert [(t.nodeid, t.worker, t.start, t.total) for t in back] == [
        ("a.py::t1", "gw0", 0.0, 2.5),
        ("b.py::t2[x::y]", "gw1", 1.5, 3.5),
    ]


def test_the_summary_shows_the_slowest_tests_files_and_each_workers_finish():
    tests = [
        record("a.py::t1", "gw0", 0.0, 0.0, 10.0),
        record("a.py::t2", "gw0", 10.0, 0.0, 5.0),
        record("b.py::t3", "gw1", 0.0, 1.0, 3.0),
    ]
    lines = suite_budget.summary(tests, top=2)
    assert lines[1].split() == ["10.0", "s", "a.py::t1"]
    assert lines[2].split() == ["5.0", "s", "a.py::t2"] and "b.py::t3" not in lines[3]
    assert "15.0 s  a.py" in "\n".join(lines)
    workers = [line for line in lines if line.startswith("  gw")]
    assert "gw0: 2 tests, busy 15 s, finished at 15 s (0 s before the last)" in workers[0]
    assert "gw1: 1 tests, busy 4 s, finished at 4 s (11 s before the last)" in workers[1]


def test_compare_lists_the_before_runs_slowest_with_their_times_after():
    before = [record("a.py::t1", "gw0", 0, 0, 10.0), record("a.py::gone", "gw0", 0, 0, 8.0)]
    after = [record("a.py::t1", "gw1", 0, 0, 4.0)]
    lines = suite_budget.compare(before, after, top=5)
    assert lines[1].split() == ["10.0", "4.0", "a.py::t1"]
    assert lines[2].split() == ["8.0", "—", "a.py::gone"]
    assert lines[-2:] == ["before: 2 tests, 18 s of test time", "after: 1 tests, 4 s of test time"]


def test_files_run_longest_first_and_unknown_files_before_them(pytester):
    for name, tests in {"test_short": 2, "test_long": 1, "test_new": 1}.items():
        body = "".join(f"def test_{i}():\n    pass\n" for i in range(tests))
        pytester.makepyfile(**{name: body})
    durations = pytester.path / "durations.txt"
    suite_budget.write_durations(
        durations,
        [
            record("test_short.py::test_0", "gw0", 0, 0, 1.0),
            record("test_short.py::test_1", "gw0", 1, 0, 1.0),
            record("test_long.py::test_0", "gw1", 0, 0, 30.0),
        ],
        wall=30.0,
    )
    result = pytester.runpytest(
        "-p", "suite_budget", f"--budget-order={durations}", "--collect-only", "-q"
    )
    order = [line for line in result.outlines if "::" in line]
    assert order == [
        "test_new.py::test_0",
        "test_long.py::test_0",
        "test_short.py::test_0",
        "test_short.py::test_1",
    ]


def test_a_missing_order_file_is_a_usage_error_naming_it(pytester):
    pytester.makepyfile(test_one="def test_0():\n    pass\n")
    result = pytester.runpytest("-p", "suite_budget", "--budget-order=nope.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--budget-order=nope.txt: no such durations file*"])


# ---- warm_ranks ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    warm = WarmRanks(preload=["json"], threads=1)
    yield warm
    warm.close()


def script(tmp_path, body):
    path = tmp_path / "rank.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_rank_runs_as_main_with_its_argv_folder_environment_and_own_path(server, tmp_path):
    path = script(
        tmp_path,
        """
        import json, os, sys
        assert __name__ == "__main__"
        print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                          "threads": os.environ["OMP_NUM_THREADS"], "mine": os.environ["MINE"]}))
        """,
    )
    results = server.run(path, [["a", "1"], ["b", "2"]], env={"MINE": "yes"})
    seen = [json.loads(output) for code, output in results]
    assert [code for code, _ in results] == [0, 0]
    assert [s["argv"] for s in seen] == [["a", "1"], ["b", "2"]]
    assert {s["cwd"] for s in seen} == {os.getcwd()}
    assert {s["path0"] for s in seen} == {str(tmp_path)}
    assert {(s["threads"], s["mine"]) for s in seen} == {("1", "yes")}


def test_a_failing_rank_gives_its_exit_code_and_traceback(server, tmp_path):
    path = script(
        tmp_path,
        """
        import sys
        if sys.argv[1] == "1":
            raise ValueError("rank one broke")
        if sys.argv[1] == "2":
            sys.exit(3)
        """,
    )
    (ok, _), (broke, said), (exited, _) = server.run(path, [["0"], ["1"], ["2"]])
    assert (ok, broke, exited) == (0, 1, 3)
    assert "ValueError: rank one broke" in said and "Traceback" in said


def test_a_rank_past_its_timeout_is_killed_and_reported(server, tmp_path):
    path = script(tmp_path, "import time\ntime.sleep(60)\n")
    ((code, _),) = server.run(path, [[]], timeout=0.5)
    assert code == -signal.SIGKILL


def test_another_thread_count_than_the_servers_is_refused(server, tmp_path):
    with pytest.raises(ValueError, match="OMP_NUM_THREADS=1 .* not 2"):
        server.run(script(tmp_path, "pass\n"), [[]], env={"OMP_NUM_THREADS": "2"})


def test_the_server_preloads_what_a_script_imports_at_its_top(tmp_path):
    path = script(
        tmp_path,
        """
        import os, json as j
        from pathlib import Path
        from . import sibling
        def f():
            import csv
        """,
    )
    assert top_level_imports(str(path)) == ["os", "json", "pathlib"]


def test_ranks_launched_again_on_another_port_only_when_theirs_was_taken():
    from warm_ranks import on_a_free_port

    ports = []

    def clashing(port):
        ports.append(port)
        if len(ports) == 1:
            raise AssertionError("rank 0 failed (1): ... EADDRINUSE, address already in use")
        return "ran"

    assert on_a_free_port(clashing) == "ran" and len(ports) == 2
    with pytest.raises(AssertionError, match="a real failure"):
        on_a_free_port(lambda port: (_ for _ in ()).throw(AssertionError("a real failure")))
