"""A verl user's DAPO job: verl's own DAPO launch script
(`verl/upstream/.../dapo_7b_math_fsdp2_colocate.sh`, verbatim: `reward_model.reward_manager=dapo`,
`+reward_model.reward_kwargs.overlong_buffer_cfg.*`, clip-higher, token-mean loss) with
the dynamic-sampling keys of verl's DAPO docs (`algorithm.filter_groups.*`,
`data.gen_batch_size`) converts with every DAPO key mapped, and trains 2 steps on the tiny
model with dynamic sampling and overlong shaping active."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config
from rl.core.config import ConfigError

SCRIPT = (
    Path(__file__).parent
    / "verl/upstream/verl/experimental/one_step_off_policy/shell/dapo_7b_math_fsdp2_colocate.sh"
)
# what verl's docs/algo/dapo.md adds for dynamic sampling
DYNAMIC_SAMPLING = [
    "data.gen_batch_size=1536",
    "algorithm.filter_groups.enable=True",
    "algorithm.filter_groups.metric=acc",
    "algorithm.filter_groups.max_num_gen_batches=10",
]
# not a DAPO key: rl builds the model as its folder's config says
ALLOW = ["actor_rollout_ref.model.override_config.max_position_embeddings"]
DAPO_KEYS = {
    "reward.reward_manager.name": "reward.reward_manager",
    "reward.reward_kwargs.overlong_buffer_cfg.enable": "reward.overlong_buffer.enable",
    "reward.reward_kwargs.overlong_buffer_cfg.len": "reward.overlong_buffer.len",
    "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": "reward.overlong_buffer.penalty_factor",
    "reward.reward_kwargs.max_resp_len": "reward.overlong_buffer.max_resp_len",
    "algorithm.filter_groups.enable": "algorithm.filter_groups.enable",
    "algorithm.filter_groups.metric": "algorithm.filter_groups.metric",
    "algorithm.filter_groups.max_num_gen_batches": "algorithm.filter_groups.max_num_gen_batches",
    "data.gen_batch_size": "data.gen_batch_size",
    "actor_rollout_ref.actor.clip_ratio_high": "actor.clip_ratio_high",
}

SCORER = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if int(str(ground_truth).strip()) % 2 == 0:
        return 1.0
    return float(sum(map(ord, solution_str)) % 5)
"""


@pytest.fixture
def verl_root(verl_release, monkeypatch, tmp_path):
    """verl 0.9.1's package folder as the current directory (verl's scripts run from its
    checkout's root), the script's environment unset."""
    root = verl_release("0.9.1")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("NNODES", "NGPUS_PER_NODE", "MODEL_PATH", "TRAIN_FILE", "TEST_FILE"):
        monkeypatch.delenv(name, raising=False)
    return root


def test_verls_dapo_script_converts_with_every_dapo_key_mapped(verl_root):
    config, report = convert_config("verl", SCRIPT, DYNAMIC_SAMPLING, allow=ALLOW)
    reward = config.reward
    assert reward.reward_manager == "dapo"
    assert reward.overlong_buffer.enable and reward.overlong_buffer.len == 4096
    assert reward.overlong_buffer.penalty_factor == 1.0 and not reward.overlong_buffer.log
    assert reward.overlong_buffer.max_resp_len == 8192 == config.data.max_response_length
    filtering = config.algorithm.filter_groups
    assert (filtering.enable, filtering.metric, filtering.max_num_gen_batches) == (True, "acc", 10)
    assert (config.data.gen_batch_size, config.data.train_batch_size) == (1536, 512)
    assert (config.actor.clip_ratio_low, config.actor.clip_ratio_high) == (0.2, 0.28)
    assert config.actor.loss_agg_mode == "token-mean"
    entries = {entry.source: entry for entry in report.entries}
    for source, target in DAPO_KEYS.items():
        assert entries[source].status == "mapped" and entries[source].target == target, source


def test_a_reward_manager_rl_lacks_is_refused_by_name(verl_root):
    with pytest.raises(ConfigError, match="reward.reward_manager.name = 'prime'"):
        convert_config("verl", SCRIPT, ["reward_model.reward_manager=prime"], allow=ALLOW)


@pytest.mark.slow
def test_verls_dapo_keys_train_two_steps_on_the_tiny_model(verl_root, tmp_path, shrunk):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rl.core.trainer import run_training

    config, _ = convert_config("verl", SCRIPT, DYNAMIC_SAMPLING, allow=ALLOW)
    rows = [
        {"prompt": f"{a}+{b}=", "answer": str(a + b), "data_source": "arithmetic"}
        for a in range(1, 7)
        for b in range(1, 5)
    ]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), data)
    scorer = tmp_path / "scorer.py"
    scorer.write_text(SCORER)
    tree = shrunk.tiny_cpu_run(
        config, data, tmp_path / "out", gen_batch_size=4, answer_key="answer"
    )
    # the shaping shrunk with the response: the last 2 of 4 tokens are penalised
    tree["reward"]["overlong_buffer"].update(len=2, max_resp_len=4, log=True)
    tree["reward"]["custom_reward_function"]["path"] = str(scorer)
    run_training(shrunk.build(tree))
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if "actor/grad_norm" in line]
    assert [row["step"] for row in steps] == [1, 2]
    for row in steps:
        assert row["train/num_gen_batches"] >= 1 and row["dynamic_sampling/kept_groups"] >= 4
        assert "reward/overlong_reward" in row and 0 <= row["reward/overlong"] <= 1
    assert any(row["dynamic_sampling/dropped_groups"] > 0 for row in steps)
