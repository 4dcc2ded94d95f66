"""A failing reward function never looks like a zero reward: each failure carries its text."""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rl.core.config import load_config
from rl.core.errors import ConfigError, RewardError
from rl.core.rewards import RewardManager, RewardRequest, make_reward_manager
from rl.core.rewards.worker import ERROR, OK, TIMEOUT, score_chunk

BAD_REWARD = textwrap.dedent("""
    import math
    import os
    import signal
    import sys
    import time

    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        if solution_str == "raise":
            raise ValueError("boom")
        if solution_str == "nan":
            return float("nan")
        if solution_str == "inf":
            return -math.inf
        if solution_str == "nan-dict":
            return {"score": float("nan"), "format": 1.0}
        if solution_str == "no-score":
            return {"acc": 1.0}
        if solution_str == "str-score":
            return {"score": "1"}
        if solution_str == "str":
            return "abc"
        if solution_str == "none":
            return None
        if solution_str == "list":
            return [1.0]
        if solution_str == "sleep":
            time.sleep(1000)
        if solution_str == "sleep-swallowed":
            try:
                time.sleep(1000)
            except Exception:
                return 1.0
        if solution_str == "sys-exit":
            sys.exit(3)
        if solution_str == "os-exit":
            os._exit(4)
        if solution_str == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"score": 1.0, "format": 0.5}
""")

EXPECTED_NUMBER = "expected a number or {'score': number}"
# (response, status, the failure's text)
CASES = [
    ("raise", ERROR, "ValueError: boom (bad_reward.py, line 10)"),
    ("nan", ERROR, "returned nan"),
    ("inf", ERROR, "returned -inf"),
    ("nan-dict", ERROR, "returned {'score': nan}"),
    ("no-score", ERROR, f"returned a dict without 'score' (keys: 'acc'), {EXPECTED_NUMBER}"),
    ("str-score", ERROR, f"returned {{'score': '1'}} (the score is a str), {EXPECTED_NUMBER}"),
    ("str", ERROR, f"returned 'abc' (str), {EXPECTED_NUMBER}"),
    ("none", ERROR, f"returned None (NoneType), {EXPECTED_NUMBER}"),
    ("list", ERROR, f"returned [1.0] (list), {EXPECTED_NUMBER}"),
    ("sleep", TIMEOUT, "timed out after 0.3 s (reward.timeout_s)"),
    ("sleep-swallowed", TIMEOUT, "timed out after 0.3 s (reward.timeout_s)"),
    ("sys-exit", ERROR, "called sys.exit(3)"),
    ("os-exit", ERROR, "called os._exit(4)"),
]


@pytest.fixture
def bad_reward(tmp_path):
    path = tmp_path / "bad_reward.py"
    path.write_text(BAD_REWARD)
    return str(path)


def requests(*solutions):
    return [RewardRequest("custom", s, "yes") for s in solutions]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("response", "status", "text"), CASES, ids=[c[0] for c in CASES])
def test_each_failure_in_process_scores_zero_and_says_why(bad_reward, response, status, text):
    # liveness: the "sleep" cases sleep 1000 s; the test's 30 s timeout stands for the
    # alarm having fired, and the TIMEOUT status and text below say it did
    manager = RewardManager(bad_reward, timeout_s=0.3, max_error_rate=1.0)
    result = manager.score(requests(response, "ok"))
    assert result.scores == [0.0, 1.0]
    assert result.errors == [text, ""]
    assert result.metrics["reward/errors"] == float(status == ERROR)
    assert result.metrics["reward/timeouts"] == float(status == TIMEOUT)
    assert result.metrics["reward/error_rate"] == 0.5
    assert result.metrics["reward/format"] == 0.5  # only the good response's extras


def test_in_process_scoring_restores_os_exit_and_the_alarm_handler(bad_reward):
    real_exit, handler = os._exit, signal.getsignal(signal.SIGALRM)
    RewardManager(bad_reward, timeout_s=0.3, max_error_rate=1.0).score(
        requests("os-exit", "sleep", "ok")
    )
    assert os._exit is real_exit and signal.getsignal(signal.SIGALRM) == handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.timeout(30)
def test_a_child_forked_by_the_reward_function_still_exits_for_real():
    def forking(data_source, solution_str, ground_truth, extra_info=None):
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        return float(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))

    outcomes = score_chunk(requests("x"), 5.0, forking)
    assert [(o.score, o.status) for o in outcomes] == [(7.0, OK)]


def test_wrong_arity_called_directly_is_a_type_error_text():
    outcomes = score_chunk(requests("x"), 0.0, lambda solution, truth: 1.0)
    assert outcomes[0].status == ERROR
    assert outcomes[0].error.startswith("TypeError: ")
    assert "got an unexpected keyword argument 'data_source'" in outcomes[0].error


def test_off_the_main_thread_scoring_runs_without_an_alarm():
    def slow(data_source, solution_str, ground_truth, extra_info=None):
        time.sleep(0.3)
        return 1.0

    found = []
    thread = threading.Thread(target=lambda: found.extend(score_chunk(requests("x"), 0.05, slow)))
    thread.start()
    thread.join(10)
    assert [(o.score, o.status) for o in found] == [(1.0, OK)]


def test_numbers_of_other_types_are_scores():
    import numpy as np
    import torch

    returns = iter([np.float32(0.5), torch.tensor(0.25), True, 2, {"score": np.int64(1)}])
    outcomes = score_chunk(requests(*"abcde"), 0.0, lambda **kwargs: next(returns))
    assert [(o.score, o.status) for o in outcomes] == [
        (0.5, OK),
        (0.25, OK),
        (1.0, OK),
        (2.0, OK),
        (1.0, OK),
    ]


def test_each_distinct_failure_text_is_shown_once(bad_reward, caplog):
    manager = RewardManager(bad_reward, max_error_rate=1.0)
    with caplog.at_level(logging.WARNING, logger="rl"):
        manager.score(requests("raise", "ok", "raise", "nan"))
        manager.score(requests("nan", "raise", "ok"))
    shown = [r.getMessage() for r in caplog.records if r.name.startswith("rl.")]
    assert len(shown) == 2
    assert shown[0].startswith(
        "reward failed (data_source 'custom', response 'raise'): "
        "ValueError: boom (bad_reward.py, line 10)"
    )
    assert shown[1].startswith("reward failed (data_source 'custom', response 'nan'): returned nan")


def test_failures_reach_stderr_with_no_logging_configured(bad_reward):
    script = (
        "import sys\n"
        "from rl.core.rewards.manager import RewardManager\n"
        "from rl.core.rewards.types import RewardRequest\n"
        f"m = RewardManager({bad_reward!r}, max_error_rate=1.0)\n"
        "m.score([RewardRequest('custom', 'raise', 'yes'), RewardRequest('custom', 'ok', 'y')])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "reward failed (data_source 'custom', response 'raise'): ValueError: boom" in done.stderr


def fails(count, total):
    return requests(*(["raise"] * count + ["ok"] * (total - count)))


def test_the_run_stops_when_the_failed_share_over_the_window_passes_the_bound(bad_reward):
    manager = RewardManager(bad_reward, max_error_rate=0.5, error_rate_window=3)
    assert manager.score(fails(1, 4)).metrics["reward/error_rate"] == 0.25
    manager.score(fails(3, 4))  # 4 of 8: at the bound, not over it
    with pytest.raises(RewardError) as stopped:
        manager.score(fails(3, 4))  # 7 of 12
    assert str(stopped.value) == (
        "the reward failed on 7 of 12 responses in the last 3 scoring calls (rate 0.58), "
        "more than reward.max_error_rate = 0.5; first error: ValueError: boom (bad_reward.py, "
        "line 10). Fix the reward function, or raise reward.max_error_rate (1.0 never stops)"
    )


def test_the_window_slides(bad_reward):
    manager = RewardManager(bad_reward, max_error_rate=0.5, error_rate_window=2)
    manager.score(fails(0, 4))
    manager.score(fails(3, 4))  # 3 of 8
    with pytest.raises(RewardError, match=r"on 6 of 8 responses in the last 2 scoring calls"):
        manager.score(fails(3, 4))  # the first call has left the window: 6 of 8, not 6 of 12


def test_a_first_call_that_fails_entirely_stops_at_once(bad_reward):
    with pytest.raises(RewardError, match=r"on 2 of 2 responses in the last scoring call "):
        RewardManager(bad_reward).score(requests("nan-dict", "str"))


def test_a_max_error_rate_of_one_never_stops(bad_reward):
    manager = RewardManager(bad_reward, max_error_rate=1.0, error_rate_window=2)
    for _ in range(4):
        assert manager.score(fails(3, 3)).metrics["reward/error_rate"] == 1.0


def test_the_error_rate_settings_come_from_the_config_and_are_checked(bad_reward):
    config = load_config(
        overrides=[
            f"reward.custom_reward_function.path={bad_reward}",
            "reward.max_error_rate=0.2",
            "reward.error_rate_window=3",
            "reward.timeout_s=0.3",
        ]
    )
    manager = make_reward_manager(config.reward)
    assert manager.failures.max_error_rate == 0.2 and manager.failures.calls.maxlen == 3
    with pytest.raises(RewardError, match=r"first error: timed out after 0.3 s"):
        manager.score(requests("sleep", "ok"))
    with pytest.raises(ConfigError, match=r"reward.max_error_rate = 1.5 must be between 0 and 1"):
        RewardManager(max_error_rate=1.5)
    with pytest.raises(ConfigError, match=r"reward.error_rate_window = 0 must be >= 1"):
        RewardManager(error_rate_window=0)


POOL_CASES = [c for c in CASES if c[0] in ("raise", "nan-dict", "sleep", "sys-exit", "os-exit")]


@pytest.mark.timeout(120)
def test_failures_in_a_worker_pool_carry_the_same_texts_and_a_dead_worker_its_exit_code(
    bad_reward,
):
    manager = RewardManager(bad_reward, num_workers=1, timeout_s=0.3, max_error_rate=1.0)
    try:
        responses = [c[0] for c in POOL_CASES]
        result = manager.score(requests(*responses, "ok"))
        assert result.errors == [c[2] for c in POOL_CASES] + [""]
        assert result.scores == [0.0] * len(POOL_CASES) + [1.0]
        assert result.metrics["reward/timeouts"] == 1.0 and result.metrics["reward/errors"] == 4.0
        killed = manager.score(requests("kill"))
        assert killed.errors == ["a reward worker process died (exit code -9: killed by SIGKILL)"]
        assert killed.metrics["reward/errors"] == 1.0
        assert manager.score(requests("ok")).scores == [1.0]  # a new pool took over
    finally:
        manager.close()
