"""The test suite's thread rule (root conftest.py): under `pytest -n N` each worker and the
processes it starts share the cores instead of each taking all of them."""

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("environ", "cores", "threads"),
    [
        ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 2, 1),  # CI: 2 workers on 2 cores
        ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 16, 8),
        ({"PYTEST_XDIST_WORKER_COUNT": "4"}, 2, 1),  # never 0
        ({"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "3"}, 2, None),  # given: kept
        ({}, 2, None),  # no xdist: torch's own default
    ],
)
def test_each_worker_gets_an_equal_share_of_the_cores(worker_threads, environ, cores, threads):
    _, rule = worker_threads
    assert rule(environ, cores) == threads


def test_the_processes_a_worker_starts_use_its_share(worker_threads):
    """(The worker's own count is set before torch starts, but a test may change it.)"""
    chosen, _ = worker_threads
    if chosen is None:
        pytest.skip("not an xdist worker, or OMP_NUM_THREADS was given: nothing was set")
    child = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(child.stdout) == chosen == int(os.environ["OMP_NUM_THREADS"])
