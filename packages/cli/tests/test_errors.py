"""How `rl` ends on an error: a user's mistake is one line and exit 2; a bug keeps its
traceback, says it is a bug, and exits 1; Ctrl-C exits 130."""

import subprocess

import pytest
import typer

from rl.cli.errors import exit_on_error
from rl.core.config import ConfigError
from rl.core.errors import DataError


def run_wrapped(error, capsys):
    with pytest.raises(typer.Exit) as exit_info, exit_on_error():
        raise error
    return exit_info.value.exit_code, capsys.readouterr()


def test_an_internal_key_error_is_a_bug_with_its_traceback(capsys):
    code, captured = run_wrapped(KeyError("sampler"), capsys)
    assert code == 1
    assert "Traceback (most recent call last)" in captured.err
    assert "KeyError: 'sampler'" in captured.err
    assert "bug in rl" in captured.err and "report" in captured.err
    assert captured.out == ""


@pytest.mark.parametrize("error", [ValueError("x"), AttributeError("y"), ImportError("z")])
def test_builtin_errors_are_bugs_too(error, capsys):
    code, captured = run_wrapped(error, capsys)
    assert code == 1 and "Traceback" in captured.err


def test_a_config_error_is_one_line(capsys):
    code, captured = run_wrapped(ConfigError("rollout.n = 0 is not allowed: >= 1"), capsys)
    assert code == 2
    assert captured.err == "error: rollout.n = 0 is not allowed: >= 1\n"


def test_a_user_error_over_several_lines_is_printed_on_one(capsys):
    code, captured = run_wrapped(DataError("train.jsonl, row 3:\n  no prompt column"), capsys)
    assert code == 2
    assert captured.err == "error: train.jsonl, row 3: no prompt column\n"


def test_ctrl_c_exits_130(capsys):
    code, captured = run_wrapped(KeyboardInterrupt(), capsys)
    assert code == 130
    assert captured.err.strip() == "interrupted" and "Traceback" not in captured.err


def test_typer_exits_pass_through():
    with pytest.raises(typer.Exit) as exit_info, exit_on_error():
        raise typer.Exit(code=3)
    assert exit_info.value.exit_code == 3


def rl(rl_executable, *args):
    return subprocess.run(
        [rl_executable, *args], capture_output=True, text=True, timeout=300, check=False
    )


def assert_one_error_line(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_a_bad_value_exits_2_with_one_line_naming_the_key(rl_executable):
    result = rl(rl_executable, "train", "actor.optim.grad_clip=-1")
    assert_one_error_line(result, "actor.optim.grad_clip = -1.0 is not allowed: > 0")


def test_a_missing_data_file_is_refused_before_any_model_loads(rl_executable, tmp_path):
    result = rl(
        rl_executable,
        "train",
        "data.train_files=[/nope/train.parquet]",
        f"trainer.output_dir={tmp_path}",
    )
    assert_one_error_line(result, "data.train_files[0] = '/nope/train.parquet' does not exist")


def test_config_option_takes_a_file_whose_name_has_an_equals_sign(rl_executable, tmp_path):
    path = tmp_path / "lr=1e-3.yaml"
    path.write_text("actor:\n  optim:\n    lr: 1.0e-3\nrollout:\n  n: 0\n")
    assert_one_error_line(
        rl(rl_executable, "train", "--config", str(path)), "rollout.n = 0 is not allowed: >= 1"
    )
    assert_one_error_line(
        rl(rl_executable, "sft", "--config", str(path), "rollout.n=2", "sft.lr=-1"),
        "sft.lr = -1.0 is not",
    )
    shown = rl(rl_executable, "config", "show", "--config", str(path), "rollout.n=3")
    assert shown.returncode == 0, shown.stderr
    assert "lr: 0.001" in shown.stdout and "n: 3" in shown.stdout


def test_config_option_with_a_second_file_is_refused(rl_executable, tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("rollout:\n  n: 2\n")
    result = rl(rl_executable, "config", "show", "--config", str(path), "b.yaml")
    assert_one_error_line(result, "'b.yaml' is not an override (key.sub=value)")
