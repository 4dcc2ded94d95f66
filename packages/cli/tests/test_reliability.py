"""Reliability campaign: each failure a user can meet, as a real `rl train` process on the tiny
model, asserting the exit code and the message (issue 9). User errors exit 2 with one line on
stderr and no traceback; nothing written before is lost."""

import json
import os
import pickle
import random
import resource
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rl.core.errors import CheckpointError
from rl.core.trainer.manifest import verify_checkpoint, write_manifest
from rl.core.trainer.run_folder import LOCK_FILE


def train_args(rl_executable, tiny_run, output_dir, *extra, save_freq=1):
    """`rl train` of the tiny run into `output_dir`, checkpointing every `save_freq` steps
    (None: the config's own, off)."""
    every = [] if save_freq is None else [f"trainer.save_freq={save_freq}"]
    return [rl_executable, "train", *tiny_run, f"trainer.output_dir={output_dir}", *every, *extra]


def rl_train(
    rl_executable, tiny_run, output_dir, *extra, preexec_fn=None, timeout=600, save_freq=1
):
    return subprocess.run(
        train_args(rl_executable, tiny_run, output_dir, *extra, save_freq=save_freq),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def user_error(result):
    """The one-line message of a run refused with a user error (exit code 2)."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


def completed(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def steps(output_dir):
    root = Path(output_dir) / "checkpoints"
    return sorted(int(p.name.split("_")[-1]) for p in root.glob("global_step_*"))


def final_weights(output_dir):
    return load_file(str(Path(output_dir) / "hf" / "model.safetensors"))


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory, rl_executable, tiny_run):
    """`finished_runs(steps, out)`: `out` becomes a copy of a finished tiny run of `steps`
    steps with a checkpoint at every step, the run made once for the module (the cases
    here damage or resume it; a resumed copy names its own folder as trainer.output_dir)."""
    made: dict[int, Path] = {}

    def copy(steps, out):
        if steps not in made:
            folder = tmp_path_factory.mktemp(f"finished-{steps}") / "out"
            completed(
                rl_train(rl_executable, tiny_run, folder, f"trainer.total_training_steps={steps}")
            )
            made[steps] = folder
        shutil.copytree(made[steps], out, symlinks=True)
        return out

    return copy


# --- checkpoints -------------------------------------------------------------------------


def test_a_fresh_run_never_prunes_nor_resumes_an_earlier_runs_checkpoints(
    tmp_path, rl_executable, tiny_run
):
    """The reported failure: an earlier run left global_step_12; a new run with
    resume_mode=disable deleted each of its own checkpoints right after writing it, and the
    next run resumed the old global_step_12 with exit code 0. Now the new run is refused
    before it writes anything, config.yaml included."""
    out = tmp_path / "out"
    completed(rl_train(rl_executable, tiny_run, out, "trainer.max_ckpt_to_keep=1"))
    old = out / "checkpoints" / "global_step_3"
    old.rename(out / "checkpoints" / "global_step_12")  # an earlier, longer run
    (out / "checkpoints" / "latest").write_text("global_step_12")
    config_before = (out / "config.yaml").read_text()
    result = rl_train(rl_executable, tiny_run, out, "trainer.resume_mode=disable", "trainer.seed=7")
    message = user_error(result)
    assert "global_step_12" in message and "trainer.resume_mode=auto" in message
    assert steps(out) == [12]
    assert (out / "config.yaml").read_text() == config_before


def test_a_corrupt_newest_checkpoint_falls_back_to_the_newest_good_one(
    tmp_path, rl_executable, tiny_run, metrics_rows, finished_runs
):
    out = finished_runs(2, tmp_path / "out")
    assert steps(out) == [1, 2]
    weights = out / "checkpoints" / "global_step_2" / "actor" / "dcp" / "__0_0.distcp"
    weights.write_bytes(weights.read_bytes()[:-100])  # truncated
    result = completed(rl_train(rl_executable, tiny_run, out))
    assert f"not resuming from {weights.parents[2]}:" in result.stderr
    assert "has " in result.stderr and "the manifest says" in result.stderr
    rows = metrics_rows(out)
    assert [row["step"] for row in rows] == [0, 1, 2, 3]  # step 2 was redone from step 1
    generations = (out / "val_generations.jsonl").read_text().splitlines()
    per_step = Counter(json.loads(line)["step"] for line in generations)
    assert sorted(per_step) == [0, 2, 3]  # step 2's validation is there once, not twice
    assert len(set(per_step.values())) == 1, per_step


def test_resume_from_a_bad_path_is_one_line_naming_the_file(
    tmp_path, rl_executable, tiny_run, finished_runs
):
    out = finished_runs(1, tmp_path / "out")
    state = out / "checkpoints" / "global_step_1" / "trainer_state.pt"
    state.write_bytes(b"garbage")
    result = rl_train(
        rl_executable,
        tiny_run,
        tmp_path / "other",
        "trainer.resume_mode=path",
        f"trainer.resume_from_path={state.parent}",
    )
    message = user_error(result)
    assert str(state) in message and "trainer.resume_from_path" in message


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def test_a_crafted_checkpoint_cannot_run_code(tmp_path, rl_executable, tiny_run, finished_runs):
    """trainer_state.pt replaced by a pickle that runs code when unpickled, with a manifest
    rewritten to match (whoever can write the file can write the manifest)."""
    out = finished_runs(1, tmp_path / "out")
    folder = out / "checkpoints" / "global_step_1"
    marker = tmp_path / "pwned"
    torch.save({"step": 1, "payload": _Payload(marker)}, folder / "trainer_state.pt")
    run_id = json.loads((folder / "manifest.json").read_text())["run_id"]
    write_manifest(folder, run_id, 1)
    with open(folder / "trainer_state.pt", "rb") as handle:  # the payload is live under pickle
        assert b"exec" in handle.read()
    result = rl_train(
        rl_executable,
        tiny_run,
        out,
        "trainer.resume_mode=path",
        f"trainer.resume_from_path={folder}",
    )
    message = user_error(result)
    assert "trainer_state.pt cannot be loaded safely" in message
    assert not marker.exists()
    pickle.dumps(_Payload(marker))  # (the payload itself is a valid pickle)


def _small_file_limit():
    # Every file may hold at most 64 KiB: the checkpoint's weights cannot be written (EFBIG,
    # as on a full disk), the logs and metrics can.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


def test_a_failed_checkpoint_write_stops_the_run_clearly_and_keeps_what_was_there(
    tmp_path, rl_executable, tiny_run, finished_runs
):
    out = finished_runs(1, tmp_path / "out")
    before = verify_checkpoint(out / "checkpoints" / "global_step_1")
    result = rl_train(rl_executable, tiny_run, out, preexec_fn=_small_file_limit)
    message = user_error(result)
    assert "could not write checkpoint" in message and "global_step_2" in message
    assert "global_step_1 is intact" in message
    assert steps(out) == [1]
    assert verify_checkpoint(out / "checkpoints" / "global_step_1") == before
    assert not list((out / "checkpoints").glob(".tmp-*"))
    completed(rl_train(rl_executable, tiny_run, out))  # space back: it resumes and finishes
    assert steps(out) == [2, 3]


def test_a_torn_metrics_row_does_not_block_resume(
    tmp_path, rl_executable, tiny_run, metrics_rows, finished_runs
):
    out = finished_runs(2, tmp_path / "out")
    with (out / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 3, "reward/me')
    result = completed(rl_train(rl_executable, tiny_run, out))
    assert "dropped a torn" in result.stderr
    rows = metrics_rows(out)
    assert [row["step"] for row in rows] == [0, 1, 2, 3]


# --- rewards: a failure never looks like a zero reward ----------------------------------


def reward_file(tmp_path, *body):
    path = tmp_path / "reward.py"
    path.write_text(
        "import math, os, signal, sys, time\n\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        + "".join(f"    {line}\n" for line in body)
    )
    return [f"reward.custom_reward_function.path={path}"]


@pytest.mark.parametrize(
    ("body", "extra", "said"),
    [
        ("raise ValueError('boom')", [], "ValueError: boom"),
        ("return {'score': math.nan}", [], "nan"),
        ("return 'high'", [], "str"),
        ("time.sleep(60)", ["reward.timeout_s=0.5"], "timed out"),
        ("sys.exit(3)", [], "sys.exit"),
        ("os._exit(3)", [], "os._exit"),
        ("os._exit(3)", ["reward.num_workers=1"], "os._exit"),
        ("os.kill(os.getpid(), signal.SIGKILL)", ["reward.num_workers=1"], "died"),
    ],
)
def test_a_failing_reward_function_stops_the_run_with_its_error(
    tmp_path, rl_executable, tiny_run, body, extra, said
):
    out = tmp_path / "out"
    result = rl_train(rl_executable, tiny_run, out, *reward_file(tmp_path, body), *extra)
    message = user_error(result)
    assert "reward.max_error_rate" in message and said in message, message
    assert said in result.stderr.split("error: ")[0]  # shown as it happened, before the end


def test_reward_failures_under_the_bound_are_counted_and_shown(
    tmp_path, rl_executable, tiny_run, metrics_rows
):
    out = tmp_path / "out"
    body = ["if len(solution_str) % 2:", "    raise ValueError('boom')", "return 1.0"]
    result = completed(
        rl_train(
            rl_executable,
            tiny_run,
            out,
            *reward_file(tmp_path, *body),
            "reward.max_error_rate=1.0",
        )
    )
    assert result.stderr.count("ValueError: boom") == 1  # once per distinct error
    rows = metrics_rows(out)
    assert sum(row.get("reward/errors", 0) for row in rows) > 0


def test_rewards_that_overflow_the_loss_stop_after_max_skipped_steps(
    tmp_path, rl_executable, tiny_run
):
    out = tmp_path / "out"
    body = "return 3e38 * (len(solution_str) % 2)"
    result = rl_train(
        rl_executable,
        tiny_run,
        out,
        *reward_file(tmp_path, body),
        "algorithm.norm_adv_by_std_in_grpo=false",
        "trainer.max_skipped_steps=2",
        "sft.steps=0",
    )
    message = user_error(result)
    assert "2 steps in a row skipped every actor update" in message
    assert "trainer.max_skipped_steps" in message


# --- values refused up front ------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["actor.optim.grad_clip=-1"], "actor.optim.grad_clip = -1"),
        (
            ["algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=0"],
            "critic.ppo_mini_batch_size = 0",
        ),
        (["critic.loss_agg_mode=tokenmean"], "critic.loss_agg_mode = 'tokenmean'"),
        (["trainer.device=cuda"], "trainer.device"),
        (["model.path=/nope/model"], "model.path"),
        (["reward.timeout_s=0"], "reward.timeout_s = 0"),
        (["trainer.total_training_steps=0"], "trainer.total_training_steps = 0"),
    ],
)
def test_bad_values_are_refused_before_anything_is_written(
    tmp_path, rl_executable, tiny_run, overrides, said
):
    out = tmp_path / "out"
    result = rl_train(rl_executable, tiny_run, out, *overrides)
    assert said in user_error(result)
    assert not out.exists() or not any(out.iterdir())


def test_data_that_cannot_be_scored_is_refused_before_training(tmp_path, rl_executable, tiny_run):
    data = tmp_path / "train.jsonl"
    data.write_text(
        "".join(
            json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1), "data_source": "arithmetic"})
            + "\n"
            for i in range(16)
        )
    )
    files = [f"data.train_files=[{data}]", f"data.val_files=[{data}]"]
    message = user_error(
        rl_train(rl_executable, tiny_run, tmp_path / "a", *files, "data.answer_key=solution")
    )
    assert "data.answer_key" in message and "solution" in message
    data.write_text(data.read_text().replace('"arithmetic"', '"arithmetc"'))
    message = user_error(rl_train(rl_executable, tiny_run, tmp_path / "b", *files))
    assert "arithmetc" in message and "reward.custom_reward_function.path" in message


def test_a_config_file_whose_name_has_an_equals_sign(tmp_path, rl_executable, tiny_run):
    config = tmp_path / "lr=1e-3.yaml"
    config.write_text("trainer:\n  total_training_steps: 1\n")
    out = tmp_path / "out"
    args = [rl_executable, "train", "--config", str(config), *tiny_run]
    args += [f"trainer.output_dir={out}", "trainer.total_training_steps=1"]
    completed(subprocess.run(args, capture_output=True, text=True, timeout=600))
    assert (out / "hf").is_dir()


# --- kill-and-resume soak -----------------------------------------------------------------


def _start(rl_executable, tiny_run, output_dir, extra):
    args = train_args(rl_executable, tiny_run, output_dir, *extra)
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _kill_when(process, ready, timeout=300.0, sig=signal.SIGKILL):
    """Send `sig` once `ready()`; whether it was sent (the run may end first). A SIGTERM
    or SIGINT must end the run as a graceful stop does (exit 128 + the signal)."""
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline:
        if ready():
            os.kill(process.pid, sig)
            code = process.wait()
            graceful = (-sig, 128 + sig) if sig != signal.SIGKILL else (-sig,)
            assert code in (*graceful, 0), (sig, code, process.stderr.read()[-3000:])
            return True
        time.sleep(0.002)
    process.wait()
    return False


@pytest.mark.slow
def test_kill_and_resume_soak_ends_bit_identical_and_loses_no_checkpoint(
    tmp_path, rl_executable, tiny_run
):
    """Random SIGKILLs, SIGTERMs and SIGINTs across one run (the first a SIGKILL while a
    checkpoint is being written), each followed by a rerun of the same command: the final
    weights equal an uninterrupted run's bit for bit, and after every signal the newest good
    checkpoint is at least as new as before."""
    extra = ["trainer.total_training_steps=10", "trainer.test_freq=5"]
    straight = _start(rl_executable, tiny_run, tmp_path / "straight", extra)
    assert straight.wait(timeout=600) == 0, straight.stderr.read()
    out, ckpts = tmp_path / "killed", tmp_path / "killed" / "checkpoints"
    chance = random.Random(20261122)
    newest_good, kills = 0, 0
    for attempt in range(8):
        run = _start(rl_executable, tiny_run, out, extra)
        if attempt == 0:  # (not the first checkpoint: a run with none is not resumed)
            killed = _kill_when(run, lambda: any(ckpts.glob(".tmp-global_step_2/actor")))
        elif attempt < 4:
            # once the run has saved past the newest good checkpoint, at a random moment
            target, pause = newest_good + chance.randint(1, 2), chance.uniform(0.0, 0.05)
            sig = chance.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
            killed = _kill_when(run, lambda t=target, p=pause: _saved_past(ckpts, t, p), sig=sig)
        else:
            assert run.wait(timeout=600) == 0, run.stderr.read()
            break
        kills += killed
        good = [s for folder in ckpts.glob("global_step_*") if (s := _good_step(folder))]
        assert max(good, default=0) >= newest_good, (good, newest_good)
        newest_good = max(good, default=0)
    assert kills >= 3
    expected, got = final_weights(tmp_path / "straight"), final_weights(out)
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def _saved_past(ckpts, step, pause):
    if not (ckpts / f"global_step_{step}" / "manifest.json").exists():
        return False
    time.sleep(pause)
    return True


def _good_step(folder):
    """The step of a checkpoint that verifies, else 0 (a damaged folder is allowed, a lost
    one is not)."""
    try:
        return verify_checkpoint(folder)["step"]
    except CheckpointError:
        return 0


# --- fault injection, round two (issue 33) -------------------------------------------------
# What an operator does to a run (a second run on its folder, a fresh run over a finished
# one, SIGTERM from a scheduler, Ctrl-C during a checkpoint, a changed config on resume, a
# full disk at the export) and what the run must do: exit code, the one line the user
# reads, the files left behind.


def _run(rl_executable, tiny_run, out, *extra, preexec_fn=None):
    """`rl_train` with the config's save_freq (off): the cases here choose checkpoints."""
    return rl_train(rl_executable, tiny_run, out, *extra, preexec_fn=preexec_fn, save_freq=None)


def _launch(rl_executable, tiny_run, out, *extra):
    """A run in the background, its stderr in a file beside `out`."""
    log = open(Path(out).with_name(Path(out).name + ".stderr"), "w+")  # noqa: SIM115
    process = subprocess.Popen(
        train_args(rl_executable, tiny_run, out, *extra, save_freq=None),
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    process.log = log
    return process


def _stderr(process):
    process.log.seek(0)
    return process.log.read()


def _wait_for(ready, process, timeout=300.0):
    """Poll `ready()` while `process` runs (a liveness bound, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        assert process.poll() is None, _stderr(process)[-3000:]
        time.sleep(0.01)
    process.kill()
    pytest.fail(f"nothing happened in {timeout}s: {_stderr(process)[-2000:]}")


def _trained_step(out, step):
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return False
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return any(row["step"] >= step for row in rows)


def _metrics(out):
    lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    return {row["step"]: row for row in map(json.loads, lines)}


# --- one run per folder -------------------------------------------------------------------


def test_a_second_run_is_refused_and_sigterm_checkpoints_the_step_it_was_in(
    tmp_path, rl_executable, tiny_run
):
    """A second run on the folder of a live one is refused naming it; SIGTERM (with
    save_freq off) ends the first after a checkpoint of the step it was in, exit 143, and
    the same command resumes from it. (That a resumed run ends bit-identical to one never
    stopped, after SIGTERMs and SIGINTs too, is the soak's.)"""
    out = tmp_path / "out"
    run = _launch(rl_executable, tiny_run, out, "trainer.total_training_steps=2000")
    _wait_for(lambda: _trained_step(out, 1), run)

    message = user_error(_run(rl_executable, tiny_run, out))
    assert f"is in use by another run (pid {run.pid} on " in message
    assert "trainer.output_dir" in message

    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=300) == 128 + signal.SIGTERM, _stderr(run)[-3000:]
    said = _stderr(run)
    assert "SIGTERM received: finishing this step" in said
    stopped = [line for line in said.splitlines() if line.startswith("stopped by SIGTERM")]
    assert len(stopped) == 1 and "run the same command again" in stopped[0], said[-2000:]
    assert "Traceback" not in said
    (saved,) = steps(out)
    assert 1 <= saved < 2000 and f"checkpoint at step {saved}" in stopped[0]
    assert verify_checkpoint(out / "checkpoints" / f"global_step_{saved}")["step"] == saved
    assert not (out / "hf").exists()  # stopped, not finished
    assert max(_metrics(out)) == saved  # the loggers were flushed up to the checkpoint

    # the same command (shortened: the run's length may change under a constant LR)
    completed(_run(rl_executable, tiny_run, out, f"trainer.total_training_steps={saved + 1}"))
    assert sorted(_metrics(out))[-2:] == [saved, saved + 1]
    assert (out / "hf" / "model.safetensors").exists()


def test_a_step_longer_than_the_grace_period_is_abandoned_keeping_the_last_checkpoint(
    tmp_path, rl_executable, tiny_run
):
    out = tmp_path / "out"
    extra = ["trainer.total_training_steps=20", "trainer.save_freq=1", "trainer.stop_grace_s=0.001"]
    run = _launch(rl_executable, tiny_run, out, *extra)
    # the signal must land inside a step: right after a checkpoint the loop may stop
    # cleanly before the grace period runs out (a true stop, not this test's case). Steps
    # take about as long as one another: half a step after step 3's checkpoint is mid-step 4
    manifest = out / "checkpoints" / "global_step_{}" / "manifest.json"
    _wait_for(lambda: Path(str(manifest).format(2)).exists(), run)
    began = time.monotonic()
    _wait_for(lambda: Path(str(manifest).format(3)).exists(), run)
    time.sleep((time.monotonic() - began) / 2)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=300) == 143, _stderr(run)[-3000:]
    said = _stderr(run)
    assert "did not finish within trainer.stop_grace_s = 0.001s and was abandoned" in said
    assert "Traceback" not in said
    assert not list((out / "checkpoints").glob(".tmp-*"))  # an abandoned write left nothing
    for folder in (out / "checkpoints").glob("global_step_*"):
        verify_checkpoint(folder)
    completed(_run(rl_executable, tiny_run, out, "trainer.total_training_steps=3"))


def test_ctrl_c_during_a_checkpoint_finishes_it_and_is_no_disk_problem(
    tmp_path, rl_executable, tiny_run
):
    out = tmp_path / "out"
    run = _launch(
        rl_executable, tiny_run, out, "trainer.total_training_steps=200", "trainer.save_freq=1"
    )
    _wait_for(lambda: any((out / "checkpoints").glob(".tmp-global_step_*/actor")), run)
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=300) == 130, _stderr(run)[-3000:]
    said = _stderr(run)
    assert "stopped by SIGINT: checkpoint at step" in said
    assert "could not write" not in said and "Traceback" not in said
    for folder in (out / "checkpoints").glob("global_step_*"):
        verify_checkpoint(folder)
    assert steps(out)


def test_a_fresh_run_never_overwrites_a_finished_one(tmp_path, rl_executable, tiny_run):
    out = tmp_path / "out"
    completed(_run(rl_executable, tiny_run, out, "trainer.total_training_steps=1"))
    model = (out / "hf" / "model.safetensors").read_bytes()
    metrics = (out / "metrics.jsonl").read_text()
    message = user_error(_run(rl_executable, tiny_run, out, "trainer.seed=2"))
    assert f"trainer.output_dir {out} holds an earlier run (hf/, metrics.jsonl" in message
    assert "trainer.overwrite_output_dir=true" in message
    assert (out / "hf" / "model.safetensors").read_bytes() == model
    assert (out / "metrics.jsonl").read_text() == metrics

    extra = ["trainer.total_training_steps=1", "trainer.seed=2"]
    completed(_run(rl_executable, tiny_run, out, *extra, "trainer.overwrite_output_dir=true"))
    assert (out / "hf" / "model.safetensors").read_bytes() != model
    assert (out / LOCK_FILE).exists()  # the lock file stays; its lock went with the process
    assert oct((out / "hf" / "model.safetensors").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- a resumed run is the same run ---------------------------------------------------------


def test_a_changed_learning_rate_is_refused_on_resume_unless_allowed_and_then_used(
    tmp_path, rl_executable, tiny_run
):
    out = tmp_path / "out"
    constant = "actor.optim.lr_scheduler=constant"  # the lr logged is the lr set
    base = ["trainer.save_freq=1", constant, "actor.optim.lr=1e-5"]
    completed(_run(rl_executable, tiny_run, out, *base, "trainer.total_training_steps=2"))
    changed = [
        "trainer.save_freq=1",
        constant,
        "actor.optim.lr=3e-5",
        "trainer.total_training_steps=3",
    ]
    message = user_error(_run(rl_executable, tiny_run, out, *changed, "data.seed=9"))
    assert "changes what is trained: actor.optim.lr: 1e-05 -> 3e-05; data.seed: 1 -> 9" in message
    assert "--allow-config-change actor.optim.lr,data.seed" in message
    assert steps(out) == [1, 2]

    result = completed(
        _run(rl_executable, tiny_run, out, *changed, "--allow-config-change", "actor.optim.lr")
    )
    assert "resumed with actor.optim.lr = 3e-05 (was 1e-05 at step 2)" in result.stderr
    lrs = {step: row["lr"] for step, row in _metrics(out).items() if "lr" in row}
    assert lrs[1] == pytest.approx(1e-5) and lrs[2] == pytest.approx(1e-5)
    assert lrs[3] == pytest.approx(3e-5)  # the new lr is the one used, from the resumed step
    rows = [json.loads(line) for line in (out / "config_changes.jsonl").read_text().splitlines()]
    assert {"step": 2, "key": "actor.optim.lr", "from": 1e-5, "to": 3e-5} in rows

    shorter = user_error(
        _run(rl_executable, tiny_run, out, *changed[:3], "trainer.total_training_steps=1")
    )
    assert "global_step_3 is at step 3, past this run's end" in shorter
    assert "trainer.total_training_steps = 1" in shorter


# --- writes -------------------------------------------------------------------------------


def test_a_full_disk_at_the_export_keeps_the_previous_model_and_says_so(
    tmp_path, rl_executable, tiny_run, finished_runs
):
    out = finished_runs(1, tmp_path / "out")
    model = (out / "hf" / "model.safetensors").read_bytes()
    result = _run(
        rl_executable,
        tiny_run,
        out,
        "trainer.total_training_steps=2",
        preexec_fn=_small_file_limit,
    )
    message = user_error(result)
    assert f"could not write {out / 'hf'}: File too large" in message
    assert "what was there before is kept" in message
    assert (out / "hf" / "model.safetensors").read_bytes() == model
    assert not list(out.glob(".tmp-hf*")) and not list(out.glob(".old-hf*"))


# --- reproducibility ---------------------------------------------------------------------

# metrics of wall-clock time: the rest of a row is the same in two runs of one config
WALL_CLOCK = ("timing/", "perf/")

# the demo (32 prompts x 16 responses, shared prompts) for 3 steps: before the fix its third
# step's update differed between two runs (twice in two tries; a race, so not every time)
DEMO_3_STEPS = [
    "trainer.total_training_steps=3",
    "trainer.test_freq=0",
    "trainer.progress_bar=false",
]


def test_two_runs_of_the_demo_are_bit_identical_with_two_threads(
    tmp_path, rl_executable, metrics_rows
):
    """Issue 34: with two torch threads the demo drifted at rounding level from step 3
    (shared prompts' gradients summed in thread order, `rl.kernels.gather`). Two runs of the
    same config give the same metrics but for timings, and the same weights, bit for bit."""
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    for name in ("a", "b"):
        result = subprocess.run(
            [rl_executable, "train", *DEMO_3_STEPS, f"trainer.output_dir={tmp_path / name}"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        completed(result)
    rows = [
        [{k: v for k, v in row.items() if not k.startswith(WALL_CLOCK)} for row in metrics_rows(p)]
        for p in (tmp_path / "a", tmp_path / "b")
    ]
    assert [row["step"] for row in rows[0]][-1] == 3
    assert rows[0] == rows[1]
    first, second = final_weights(tmp_path / "a"), final_weights(tmp_path / "b")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)
