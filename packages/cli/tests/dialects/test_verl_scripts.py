"""verl launch scripts read as bash would run them (never run): variables from the script
and the environment, `$( )` of the commands rl computes, `$(( ))`, "$@" standing for the
overrides given after the script, `if`/`case`, and the config file found as Hydra finds it
for the entry module (installed verl, or the verl checkout that holds the script).

Most tests read small scripts written here with verl's `LAUNCH.read` (an explicit
environment, folder and clock); a few convert fixture scripts (`verl/run_*.sh`) end to end,
one of them against verl 0.9.1's own `ppo_trainer.yaml`."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rl.cli.dialects import convert, detect
from rl.cli.dialects.verl_launch import LAUNCH
from rl.core.config import ConfigError

HERE = Path(__file__).parent / "verl"
NOW = datetime(2026, 1, 29, 11, 20, 4, 123456, tzinfo=UTC)
PPO = "python3 -m verl.trainer.main_ppo --config-path=/cfg --config-name=x"
ENV = {"HOME": "/home/me"}


def read(tmp_path, body, arguments=(), environ=None, name="run.sh", cwd=None):
    script = tmp_path / name
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(body)
    environ = ENV if environ is None else environ
    return LAUNCH.read(script, list(arguments), environ, cwd or tmp_path, NOW)


def overrides(tmp_path, body, arguments=(), environ=None, cwd=None):
    return read(tmp_path, body, arguments, environ, cwd=cwd).overrides


@pytest.fixture
def utc(monkeypatch):
    """Local time is UTC while the test runs (`date` prints local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# variables: the script's own, then the environment, with bash's defaults


def test_variables_come_from_the_script_then_the_environment(tmp_path):
    body = (
        "MODEL=${MODEL_PATH:-/models/default}\n"
        "CKPT=${CKPT-/ckpt}\n"  # set but empty in the environment: `-` keeps the empty value
        ": ${OUT:=/out}\n"  # `:=` assigns for the lines after
        "export LR=1e-6\n"
        f"{PPO} a.model=$MODEL a.data=$HOME/data b.ckpt=$CKPT c.out=$OUT c.lr=${{LR}} "
        "c.user=${USER:-nobody} c.node=${SLURM_NODEID:-0}\n"
    )
    environ = {"HOME": "/home/me", "CKPT": "", "USER": "ann", "MODEL_PATH": "/m/qwen"}
    assert overrides(tmp_path, body, environ=environ) == [
        "a.model=/m/qwen",
        "a.data=/home/me/data",
        "b.ckpt=",
        "c.out=/out",
        "c.lr=1e-6",
        "c.user=ann",
        "c.node=0",
    ]


def test_a_variable_set_nowhere_is_reported_with_the_override_it_feeds(tmp_path):
    body = (
        "source ./env.sh\n"
        f"{PPO} trainer.default_local_dir=$CKPT_DIR/run data.train_files=$HOME/d.parquet\n"
    )
    with pytest.raises(ConfigError) as error:
        read(tmp_path, body, environ={"HOME": "/home/me"})
    message = str(error.value)
    assert "\n" not in message
    assert "trainer.default_local_dir uses $CKPT_DIR (set neither by the script" in message
    assert "export CKPT_DIR" in message
    assert "pass trainer.default_local_dir=VALUE after the script" in message
    assert "data.train_files" not in message  # $HOME came from the environment
    assert "(the script sources ./env.sh, which rl does not read)" in message


def test_the_users_override_of_that_key_stands_in_for_the_unknown_value(tmp_path):
    body = f"{PPO} +trainer.default_local_dir=$CKPT_DIR trainer.x=1\n"
    got = overrides(tmp_path, body, ["trainer.default_local_dir=/ckpt"])
    # the script's `+` (add) is kept with the user's value; the user's override follows
    assert got == [
        "+trainer.default_local_dir=/ckpt",
        "trainer.x=1",
        "trainer.default_local_dir=/ckpt",
    ]


def test_arrays_exports_and_continuations_as_before(tmp_path):
    body = (
        "set -x\nexport VLLM_USE_V1=1\n"
        "common=(\n  data.a=1   # a comment\n  'data.b=two words'\n)\n"
        "common+=(data.c=$((2 * 3)))\n"
        f'{PPO} \\\n    "${{common[@]}}" \\\n    x.n=${{#common[@]}}\n'
    )
    assert overrides(tmp_path, body) == ["data.a=1", "data.b=two words", "data.c=6", "x.n=3"]


def test_parameter_operators(tmp_path):
    body = (
        "MODEL_ID=Qwen/Qwen2.5-0.5B-Instruct\nP=/data/run/train.parquet\n"
        f"{PPO} a=${{MODEL_ID,,}} b=${{MODEL_ID##*/}} c=${{P%.parquet}} d=${{P#/data/}} "
        "e=${MODEL_ID/Qwen/qwen} f=${MODEL_ID//Qwen/Q} g=${MODEL_ID:5:3} h=${#P} i=${MODEL_ID^^}\n"
    )
    assert overrides(tmp_path, body) == [
        "a=qwen/qwen2.5-0.5b-instruct",
        "b=Qwen2.5-0.5B-Instruct",
        "c=/data/run/train",
        "d=run/train.parquet",
        "e=qwen/Qwen2.5-0.5B-Instruct",
        "f=Q/Q2.5-0.5B-Instruct",
        "g=Qwe",
        "h=23",
        "i=QWEN/QWEN2.5-0.5B-INSTRUCT",
    ]


# command substitution: computed for pwd, date, basename, dirname, realpath, nproc


def test_pwd_and_the_scripts_own_folder(tmp_path):
    here = tmp_path / "examples" / "grpo"
    body = (
        'PROJECT_DIR="$(pwd)"\nOLD=`pwd`\n'
        'SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n'
        'ROOT=$(cd -- "$SCRIPT_DIR/../.." >/dev/null 2>&1 && pwd)\n'
        f"{PPO} a=$PROJECT_DIR b=$OLD c=$SCRIPT_DIR d=$ROOT e=$(realpath $SCRIPT_DIR/..) "
        "f=$(readlink -f examples) g=$(basename $SCRIPT_DIR) h=$(basename /x/model.tar .tar)\n"
    )
    here.mkdir(parents=True)
    script = here / "run.sh"
    script.write_text(body)
    got = LAUNCH.read(script, [], ENV, tmp_path, NOW).overrides
    root = os.path.realpath(tmp_path)
    assert got == [
        f"a={tmp_path}",
        f"b={tmp_path}",
        f"c={root}/examples/grpo",
        f"d={root}",
        f"e={root}/examples",
        f"f={root}/examples",
        "g=grpo",
        "h=model",
    ]


def test_date_is_formatted_as_gnu_date_prints_it(tmp_path, utc):
    body = (
        "now() {\n  date '+%d-%H-%M'\n}\n"
        f"{PPO} a=$(date +%Y%m%d) b=$(date +%Y%m%d_%H%M%S) c=$(date +%s) "
        '"d=$(date)" e=$(date -u +"%Y-%m-%dT%H:%M:%S%z") f=$(now) g=$(date +%-d/%e/%j/%a/%b/%p/%N)\n'
    )
    assert overrides(tmp_path, body) == [
        "a=20260129",
        "b=20260129_112004",
        f"c={int(NOW.timestamp())}",
        "d=Thu Jan 29 11:20:04 UTC 2026",
        "e=2026-01-29T11:20:04+0000",
        "f=29-11-20",
        "g=29/29/029/Thu/Jan/AM/123456000",
    ]


def test_nproc_reads_omp_num_threads_as_gnu_nproc_does(tmp_path):
    assert overrides(tmp_path, f"{PPO} a=$(nproc)\n", environ={"OMP_NUM_THREADS": "3"}) == ["a=3"]


def test_another_command_is_not_run_and_named_if_the_command_needs_it(tmp_path):
    body = (
        "head_node=$(scontrol show hostnames | head -n 1)\n"  # not used: no error
        "GIT=$(git rev-parse --short HEAD)\n"
        f"{PPO} trainer.experiment_name=grpo-$GIT\n"
    )
    with pytest.raises(ConfigError) as error:
        read(tmp_path, body)
    message = str(error.value)
    assert (
        "trainer.experiment_name uses $(git rev-parse --short HEAD) (rl does not run `git`)"
        in message
    )
    assert "pass trainer.experiment_name=VALUE after the script" in message
    assert "scontrol" not in message
    assert overrides(tmp_path, body, ["trainer.experiment_name=mine"]) == [
        "trainer.experiment_name=mine",
        "trainer.experiment_name=mine",
    ]


# arithmetic


def test_arithmetic_with_integers_and_variables(tmp_path):
    body = (
        "NNODES=${NNODES:-2}\na=3\nb=4\nmax_prompt_length=$((1024 * 2))\n"
        f"{PPO} x.gpus=$((NNODES * 8)) x.len=$((1024 * 3)) x.sum=$((a + b)) "
        "x.tokens=$(((max_prompt_length + 1024) * 2)) x.div=$((-7 / 2)) x.hex=$((0x10 + 010)) "
        "x.cond=$((a > b ? a : b)) x.pow=$((2 ** 10)) x.dollar=$(( $a * ${b} ))\n"
    )
    assert overrides(tmp_path, body, environ={"NNODES": "4"}) == [
        "x.gpus=32",
        "x.len=3072",
        "x.sum=7",
        "x.tokens=6144",
        "x.div=-3",
        "x.hex=24",
        "x.cond=4",
        "x.pow=1024",
        "x.dollar=12",
    ]


@pytest.mark.parametrize(
    ("expression", "why"),
    [("GPUS * 8", "$GPUS (set neither"), ("8 / 0", "division by 0"), ("x += 1", "assignment")],
)
def test_arithmetic_that_cannot_be_known_is_named(tmp_path, expression, why):
    with pytest.raises(
        ConfigError, match=r"trainer\.n uses .*" + why.replace("$", r"\$").replace("(", r"\(")
    ):
        read(tmp_path, f"{PPO} trainer.n=$(({expression}))\n")


# "$@": the overrides given after the script


def test_the_users_overrides_stand_where_the_script_has_them(tmp_path):
    body = f'{PPO} a=1 "$@" b=2\n'
    # bash's order: the script's b=2 comes last and wins over the user's
    assert overrides(tmp_path, body, ["a=9", "b=9"]) == ["a=1", "a=9", "b=9", "b=2"]
    assert overrides(tmp_path, f"{PPO} a=1 $* b=2\n", ["c=3"]) == ["a=1", "c=3", "b=2"]
    assert overrides(tmp_path, f'{PPO} a=1 "$@"\n') == ["a=1"]


def test_without_dollar_at_the_users_overrides_come_last(tmp_path):
    assert overrides(tmp_path, f"{PPO} a=1 b=2\n", ["a=9"]) == ["a=1", "b=2", "a=9"]


def test_positional_arguments_and_shift_as_in_bash(tmp_path):
    body = (
        "nproc=$1\nsave=$2\nshift 2\nENGINE=${3:-vllm}\n"
        + f'{PPO} x.n=$nproc x.s=$save x.e=$ENGINE "$@"\n'
    )
    assert overrides(tmp_path, body, ["8", "/save", "k=v"]) == [
        "x.n=8",
        "x.s=/save",
        "x.e=vllm",
        "k=v",
    ]
    tail = f'{PPO} a=1 "${{@:2}}"\n'
    assert overrides(tmp_path, tail, ["first", "k=v"]) == ["a=1", "k=v"]


def test_a_plus_override_given_twice_is_hydras_error(tmp_path, verl_release, monkeypatch):
    monkeypatch.syspath_prepend(str(verl_release("0.9.1")))
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm "
        'actor_rollout_ref.model.path=builtin:tiny-qwen2 +trainer.extra=1 "$@"\n'
    )
    with pytest.raises(ConfigError, match=r"trainer\.extra"):
        convert("verl", script, ["+trainer.extra=2"])


# conditions: decided from what is known, refused when they cannot be


def test_if_and_case_are_decided_from_known_values(tmp_path):
    body = (
        'ENGINE=${ENGINE:-vllm}\nif [ "$ENGINE" = "vllm" ]; then\n  MODE=async\nelif [ -z "$ENGINE" ]; then\n'
        "  MODE=none\nelse\n  MODE=sync\nfi\n"
        "[[ $ENGINE == sg* ]] && TP=2 || TP=1\n"
        'case "$ENGINE" in\n  vllm|sglang) GPU_UTIL=0.8 ;;\n  *) GPU_UTIL=0.5 ;;\nesac\n'
        f"{PPO} r.mode=$MODE r.tp=$TP r.util=$GPU_UTIL\n"
    )
    assert overrides(tmp_path, body) == ["r.mode=async", "r.tp=1", "r.util=0.8"]
    assert overrides(tmp_path, body, environ={"ENGINE": "sglang"}) == [
        "r.mode=sync",
        "r.tp=2",
        "r.util=0.8",
    ]


def test_a_value_set_under_an_undecidable_condition_is_refused(tmp_path):
    body = (
        "if command -v nvidia-smi; then\n  N=8\nfi\n" + f"{PPO} trainer.n_gpus_per_node=${{N:-1}}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"trainer\.n_gpus_per_node uses \$N \(it is assigned under the `if` of line 1",
    ):
        read(tmp_path, body)


def test_a_launch_in_a_loop_is_refused(tmp_path):
    body = f"for seed in 1 2 3; do\n  {PPO} seed=$seed\ndone\n"
    with pytest.raises(ConfigError, match=r"runs in a `for` loop \(line 1\)"):
        read(tmp_path, body)


def test_a_script_that_exits_first_says_so(tmp_path):
    body = 'if [ "$#" -lt 2 ]; then\n  echo "usage"\n  exit 1\nfi\n' + f"{PPO}\n"
    with pytest.raises(ConfigError, match="it exits at line 3 first"):
        read(tmp_path, body)
    assert overrides(tmp_path, body, ["a=1", "b=2"]) == ["a=1", "b=2"]


# the python command, in the forms verl's scripts write it


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m verl.trainer.main_ppo --config-path /cfg --config-name x a=1 2>&1 | tee log.txt",
        "PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1 python -u -m verl.trainer.main_ppo -cp /cfg -cn x.yaml a=1",
        "nohup python3.11 -m verl.trainer.main_ppo --config-path=/cfg --config-name=x a=1 > out.log &",
        "ray job submit --address=$RAY --no-wait -- python3 -m verl.trainer.main_ppo --config-path=/cfg --config-name=x a=1",
        "echo start && python3 -m verl.trainer.main_ppo --config-path=/cfg --config-name=x a=1 || exit 1",
        "$PYTHON -m verl.trainer.main_ppo --config-path=/cfg --config-name=x a=1",
    ],
)
def test_the_python_command_in_its_usual_forms(tmp_path, command):
    launch = read(tmp_path, command + "\n", environ={"PYTHON": "/opt/conda/bin/python"})
    assert launch.overrides == ["a=1"]
    assert launch.config_file == Path("/cfg/x.yaml")


def test_a_hydra_option_rl_does_not_follow_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="passes --multirun, a Hydra option rl does not follow"):
        read(tmp_path, f"{PPO} --multirun a=1,2\n")


# the config file, as Hydra finds it for the entry module


def test_the_built_in_config_of_the_installed_verl(tmp_path, verl_release, monkeypatch):
    verl = verl_release("0.9.1")
    monkeypatch.syspath_prepend(str(verl))
    config = (verl / "verl" / "trainer" / "config").resolve()  # Hydra's realpath
    launch = read(tmp_path, "python3 -m verl.trainer.main_ppo a=1\n")
    assert launch.config_file == config / "ppo_trainer.yaml"
    assert "from the installed verl" in launch.notes[0]
    # a relative --config-path is read against verl/trainer/, not the script's folder
    megatron = "python3 -m verl.trainer.main_ppo --config-path=config --config-name='ppo_megatron_trainer.yaml'\n"
    assert read(tmp_path, megatron).config_file == config / "ppo_megatron_trainer.yaml"
    package = "python3 -m verl.trainer.main_ppo --config-path=pkg://verl.trainer.config --config-name=ppo_trainer\n"
    assert read(tmp_path, package).config_file == config / "ppo_trainer.yaml"


@pytest.mark.parametrize(
    ("module", "config"),
    [
        ("verl.experimental.one_step_off_policy.main_ppo", "one_step_off_ppo_trainer"),
        ("verl.experimental.fully_async_policy.fully_async_main", "fully_async_ppo_trainer"),
    ],
)
def test_verls_experimental_entry_modules(tmp_path, verl_release, monkeypatch, module, config):
    verl = verl_release("0.9.1")
    monkeypatch.syspath_prepend(str(verl))
    launch = read(tmp_path, f"python -m {module} trainer.nnodes=1\n")
    folder = verl.joinpath(*module.split(".")[:-1], "config").resolve()
    assert launch.config_file == folder / f"{config}.yaml"
    assert detect(tmp_path / "run.sh") == "verl"


def test_verls_sft_trainer_under_torchrun(tmp_path, verl_release, monkeypatch):
    verl = verl_release("0.6.1")
    monkeypatch.syspath_prepend(str(verl))
    body = (
        "nproc_per_node=$1\nsave_path=$2\nshift 2\n"
        "torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \\\n"
        "    -m verl.trainer.fsdp_sft_trainer trainer.default_local_dir=$save_path $@\n"
    )
    launch = read(tmp_path, body, ["2", "/save", "trainer.total_epochs=3"])
    config = verl / "verl" / "trainer" / "config"
    assert launch.config_file == (config / "sft_trainer.yaml").resolve()
    assert launch.overrides == ["trainer.default_local_dir=/save", "trainer.total_epochs=3"]


@pytest.fixture
def checkout(tmp_path, verl_release):
    """A user's verl checkout: verl/ (0.9.1's), a recipe of theirs, scripts in examples/."""
    root = tmp_path / "verl-checkout"
    root.mkdir()
    (root / "verl").symlink_to(verl_release("0.9.1") / "verl", target_is_directory=True)
    recipe = root / "recipe" / "mine"
    (recipe / "config").mkdir(parents=True)
    (root / "recipe" / "__init__.py").write_text("")
    (recipe / "__init__.py").write_text("")
    (recipe / "main_mine.py").write_text(
        "import hydra\n\n\n"
        '@hydra.main(config_path="config", config_name="mine_trainer", version_base=None)\n'
        "def main(config):\n    pass\n"
    )
    (recipe / "config" / "mine_trainer.yaml").write_text("trainer:\n  nnodes: 1\n")
    (recipe / "config" / "mine_megatron.yaml").write_text("trainer:\n  nnodes: 2\n")
    return root


def test_a_recipe_module_of_the_checkout_that_holds_the_script(checkout, tmp_path):
    script = checkout / "examples" / "mine" / "run_mine.sh"
    script.parent.mkdir(parents=True)
    script.write_text("python3 -m recipe.mine.main_mine trainer.nnodes=4\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    launch = LAUNCH.read(script, [], ENV, elsewhere, NOW)
    assert launch.config_file == checkout / "recipe" / "mine" / "config" / "mine_trainer.yaml"
    assert "the checkout that holds the script" in launch.notes[0]
    # run from the checkout's root, as verl's scripts are: python -m finds it there
    named = "python3 -m recipe.mine.main_mine --config-path=config --config-name=mine_megatron\n"
    script.write_text(named)
    launch = LAUNCH.read(script, [], ENV, checkout, NOW)
    assert launch.config_file == checkout / "recipe" / "mine" / "config" / "mine_megatron.yaml"
    assert "the current directory" in launch.notes[0]
    assert detect(script) == "verl"


def test_verls_main_ppo_of_the_checkout_by_its_file(checkout):
    script = checkout / "examples" / "run.sh"
    script.parent.mkdir(parents=True)
    script.write_text(
        "python3 verl/trainer/main_ppo.py --config-path=config --config-name=ppo_trainer\n"
    )
    launch = LAUNCH.read(script, [], ENV, checkout, NOW)
    folder = Path(os.path.realpath(checkout / "verl")) / "trainer" / "config"
    assert launch.config_file == folder / "ppo_trainer.yaml"


@pytest.mark.parametrize("config_path", ["", "--config-path=config "])
def test_a_relative_or_built_in_config_without_verl_is_refused(tmp_path, config_path):
    with pytest.raises(ConfigError) as error:
        read(tmp_path, f"python3 -m verl.trainer.main_ppo {config_path}a=1\n")
    message = str(error.value)
    assert "\n" not in message
    assert "verl.trainer.main_ppo is neither installed nor in a checkout" in message
    assert "pip install --no-deps verl" in message and "absolute --config-path" in message


def test_detect_reads_the_entry_modules():
    assert detect(HERE / "run_grpo.sh") == "verl"
    assert detect(HERE / "run_builtin.sh") == "verl"


# end to end: convert() on fixture scripts


def test_a_launch_script_runs_its_config_with_its_overrides(monkeypatch):
    """Continuations, an array expanded in quotes, ${VAR:-default}, export, a list
    literal, + and ~ overrides, the script's folder from $(cd "$(dirname ...)" && pwd),
    a pipe after the command; then our own override where the script has $@."""
    monkeypatch.delenv("MODEL_PATH", raising=False)
    conversion = convert("verl", HERE / "run_grpo.sh", ["actor_rollout_ref.rollout.n=6"])
    ours = conversion.config
    by_key = {entry.source: entry for entry in conversion.report.entries}
    assert by_key["actor_rollout_ref.model.path"].value == "builtin:tiny-qwen2"  # the default
    assert ours["actor"]["optim"]["lr"] == 1e-6
    assert ours["rollout"]["n"] == 6  # ours after the script's 4
    assert ours["data"]["train_batch_size"] == 64 and ours["data"]["max_prompt_length"] == 512
    assert ours["data"]["val_files"] == ["a.parquet", "b.parquet"]
    assert ours["trainer"]["total_training_steps"] == 3
    assert not any(e.source.startswith("global_profiler") for e in conversion.report.entries)
    assert f"the config {HERE.resolve() / 'grpo.yaml'}" in conversion.report.render()


def test_a_launch_script_needs_what_it_cannot_know(monkeypatch):
    monkeypatch.setenv("HOME", "/home/me")
    monkeypatch.delenv("CKPT_DIR", raising=False)
    with pytest.raises(ConfigError) as error:
        convert("verl", HERE / "run_unresolved.sh")
    message = str(error.value)
    assert "trainer.default_local_dir uses $CKPT_DIR" in message and "export CKPT_DIR" in message
    assert "trainer.experiment_name uses $(git rev-parse --short HEAD)" in message
    assert "$HOME" not in message


def test_verl_091s_built_in_config_from_a_script(monkeypatch, verl_release, tmp_path):
    """No --config-path (verl found on sys.path), $HOME data paths, $(date) in the
    experiment name, $(( )) batch sizes, "$@" before the script's last override."""
    monkeypatch.syspath_prepend(str(verl_release("0.9.1")))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("NNODES", "GPUS_PER_NODE", "DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPUS_PER_NODE", "4")
    today = datetime.now().strftime("%Y%m%d")
    conversion = convert(
        "verl",
        HERE / "run_builtin.sh",
        [
            # verl's `???` keys, and the critic's model rl checks (until sections the
            # config switches off are left unread)
            "actor_rollout_ref.rollout.name=vllm",
            "reward.reward_model.rollout.name=vllm",
            "critic.model.path=builtin:tiny-qwen2",
            "trainer.total_epochs=5",
            "actor_rollout_ref.rollout.n=8",
        ],
    )
    ours = conversion.config
    by_key = {entry.source: entry.value for entry in conversion.report.entries}
    assert ours["trainer"]["experiment_name"] == f"qwen_grpo_{today}"
    assert ours["data"]["train_files"] == [f"{tmp_path}/home/data/gsm8k/train.parquet"]
    assert ours["data"]["val_files"] == [f"{tmp_path}/home/data/gsm8k/test.parquet"]
    assert by_key["data.train_batch_size"] == 8  # $((NNODES * GPUS_PER_NODE * 2))
    assert by_key["actor_rollout_ref.actor.ppo_mini_batch_size"] == 4
    assert ours["actor"]["ppo_max_token_len_per_gpu"] == 3072
    assert ours["data"]["max_response_length"] == 1024
    assert ours["rollout"]["n"] == 8  # the user's, after the script's 4
    assert ours["trainer"]["total_epochs"] == 2  # the script's last word wins, as in bash
    assert "from the installed verl" in conversion.report.render()
