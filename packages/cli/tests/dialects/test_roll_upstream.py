"""ROLL's own example configs and launch scripts (`roll/upstream/`, verbatim from ROLL
8eb27cc2): each converts with only shrink overrides in ROLL's keys, or is refused in one
line naming the keys it cannot honour; what is refused is pinned per file, and allowing
exactly those keys gives a config our schema accepts. The launch scripts resolve their
config as ROLL's entry script does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config
from rl.cli.dialects import convert, detect
from rl.core.config import ConfigError

UPSTREAM = Path(__file__).parent / "roll" / "upstream"
EXAMPLES = UPSTREAM / "examples"
ONE_DEVICE = [
    "num_gpus_per_node=1",
    "actor_train.device_mapping='list(range(0,1))'",
    "actor_infer.device_mapping='list(range(0,1))'",
    "reference.device_mapping='list(range(0,1))'",
    "rollout_batch_size=4",
    "num_return_sequences_in_group=2",
    "actor_train.training_args.per_device_train_batch_size=2",
    "actor_train.training_args.gradient_accumulation_steps=1",
    "prompt_length=64",
    "response_length=64",
]
# what each file is refused for (every other key maps or is rl's own business): the five
# domains, their mix and ROLL's masks all map; an empty set: the file converts
REFUSED = {
    "qwen2.5-7B-rlvr_megatron/rlvr_config.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_config_8gpus.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_config_amd.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_config_dynamic_batching.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_config_sequence_packing.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_fsdp2_sp2.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_qwen2.5_7B_seperate.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_config_8gpus_llm_as_judge.yaml": set(),
    # ROLL's judge as a client of a served reward_model cluster (judge_model_type
    # cluster, which ROLL's own worker raises on)
    "qwen2.5-7B-rlvr_megatron/rlvr_config_8gpus_llm_as_judge_server.yaml": {
        "rewards.llm_judge.judge_model_type",
        "reward_model.model_args.model_name_or_path",
    },
    "qwen2.5-7B-rlvr_megatron/rlvr_config_async.yaml": {"async_generation_ratio"},
    "qwen2.5-7B-rlvr_megatron/rlvr_config_amd_async.yaml": {"async_generation_ratio"},
    "qwen2.5-7B-rlvr_megatron/rlvr_rollout_mock_dump.yaml": set(),
    # LoRA maps (model.lora_rank / lora_alpha / target_modules: test_roll_semantics.py)
    "qwen2.5-7B-rlvr_megatron/rlvr_config_lora.yaml": set(),
    "qwen2.5-7B-rlvr_megatron/rlvr_lora_fsdp2.yaml": set(),
    "qwen3-8B-rlvr_fsdp2/rlvr_config.yaml": set(),
    "qwen3-8B-rlvr_fsdp2/rlvr_config_wo_cpuoffload.yaml": set(),
    "qwen3-30BA3B-rlvr_megatron/rlvr_config.yaml": set(),
    "qwen3-30BA3B-rlvr_megatron/rlvr_config_amd.yaml": set(),
    "qwen3-30BA3B-rlvr_megatron/rlvr_config_amd_seperate.yaml": set(),
    "qwen3-30BA3B-rlvr_megatron/rlvr_config_lora.yaml": {"model_download_type"},
    # flash_attn and validation.eval_steps: no fields of ROLL's, dropped by it (ignored)
    "qwen3-30BA3B-rlvr_megatron/rlvr_config_ppu_sglang.yaml": set(),
    "qwen3-30BA3B-rlvr_megatron/rlvr_config_sglang.yaml": set(),
    # ROLL's documentation's GRPO example: its reward_clip 10 cannot bind on the
    # group-normalised rewards of 8 samples (ignored: test_roll_semantics.py)
    "docs_examples/example_grpo.yaml": set(),
}
ALGORITHM_KEYS = ("adv_estimator", "reward_clip", "advantage_clip", "whiten_advantages")


def _refused_keys(message: str) -> set[str]:
    named = message.split("the reason): ", 1)[1].split("; remove them", 1)[0]
    return {part.split(" = ", 1)[0] for part in named.split(", ") if " = " in part}


def test_every_upstream_config_is_pinned():
    files = {
        str(p.relative_to(EXAMPLES))
        for p in EXAMPLES.rglob("*.yaml")
        if p.parent.name not in ("config", "qwen3_agentic_gem")
    }
    assert files == set(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_an_upstream_config_converts_or_is_refused_in_one_line(name):
    path = EXAMPLES / name
    assert detect(path) == "roll"
    keys: set[str] = set()
    if REFUSED[name]:
        with pytest.raises(ConfigError) as refused:
            convert_config("roll", path, ONE_DEVICE)
        message = str(refused.value)
        assert "\n" not in message
        assert _refused_keys(message) >= REFUSED[name]
        keys = _refused_keys(message)
    # keys that are not exact names (a value with ", " in it) stay out of the pin
    assert {k for k in keys if k not in REFUSED[name]} <= {k for k in keys if "'" in k or "[" in k}
    # ROLL's estimator and shaping map (reinforce or grpo + whitening + both clips)
    assert not keys & set(ALGORITHM_KEYS)
    config, _ = convert_config("roll", path, ONE_DEVICE, allow=sorted(REFUSED[name]))
    grpo = name.startswith("docs_examples/")  # ROLL's documentation example is grpo's
    assert config.algorithm.adv_estimator == ("grpo" if grpo else "reinforce")
    assert config.algorithm.whiten_advantages and config.algorithm.advantage_clip == 2.0
    assert config.algorithm.reward_clip == (None if grpo else 10)  # grpo's: cannot bind
    assert config.data.answer_key == "ground_truth" and config.data.data_source_key == "tag"
    assert config.data.filter_overlong_prompts
    assert set(config.trainer.dropped_settings) == {f"roll:{k}" for k in REFUSED[name]}


def test_the_templates_of_the_examples_map():
    fsdp, _ = convert_config("roll", EXAMPLES / "qwen3-8B-rlvr_fsdp2/rlvr_config.yaml", ONE_DEVICE)
    assert fsdp.data.chat_template == "native"
    assert fsdp.data.apply_chat_template_kwargs == {"enable_thinking": True}  # qwen3
    assert fsdp.actor.strategy == "fsdp"
    megatron, _ = convert_config(
        "roll", EXAMPLES / "qwen2.5-7B-rlvr_megatron/rlvr_config.yaml", ONE_DEVICE
    )
    assert megatron.data.chat_template == "native" and not megatron.data.apply_chat_template_kwargs
    assert megatron.actor.strategy == "megatron"


def test_rolls_llm_judge_is_served_by_rl_as_roll_configures_it():
    """qwen3-8B-rlvr_fsdp2's judge: ROLL's RLVR judge prompt, its model, vLLM on devices
    12-15 (four replicas), its sampling and batch."""
    config, _ = convert_config(
        "roll", EXAMPLES / "qwen3-8B-rlvr_fsdp2/rlvr_config.yaml", ONE_DEVICE
    )
    domain = config.reward.domains["llm_judge"]
    judge = domain.judge
    assert (domain.scorer, domain.tag_included) == ("llm_judge", ("RLVR",))
    assert judge.model_path == "virtuoussy/Qwen2.5-7B-Instruct-RLVR"
    assert (judge.prompt, judge.parse) == ("Qwen2.5-7B-Instruct-RLVR-prompt", "yes_no")
    assert (judge.engine, judge.placement, judge.replicas) == ("vllm", "ray", 4)
    assert (judge.max_new_tokens, judge.temperature, judge.top_p, judge.top_k) == (
        100,
        0.8,
        0.8,
        50,
    )
    assert (judge.batch_size, judge.max_model_len, judge.dtype) == (4, 8000, "bfloat16")
    # rlvr_config_8gpus_llm_as_judge.yaml leaves top_p / top_k out: ROLL's defaults apply
    name = "qwen2.5-7B-rlvr_megatron/rlvr_config_8gpus_llm_as_judge.yaml"
    judge = convert_config("roll", EXAMPLES / name, ONE_DEVICE)[0].reward.domains["llm_judge"].judge
    assert (judge.top_p, judge.top_k) == (0.7, 50)


def test_the_agentic_gem_config_is_refused_by_name():
    with pytest.raises(ConfigError) as refused:
        convert_config("roll", EXAMPLES / "qwen3_agentic_gem" / "gem_math_dapo.yaml", [])
    keys = _refused_keys(str(refused.value))
    assert {"env_manager_cls", "custom_envs.dapo_17k.env_type"} <= keys
    assert "reward_normalization.method" in keys


@pytest.mark.parametrize("example", ["qwen2.5-7B-rlvr_megatron", "qwen3-8B-rlvr_fsdp2"])
def test_a_launch_script_runs_its_folders_rlvr_config(example, monkeypatch):
    monkeypatch.chdir(UPSTREAM)  # where ROLL's examples run from: its checkout root
    script = Path("examples") / example / "run_rlvr_pipeline.sh"
    assert detect(script) == "roll"
    conversion = convert("roll", script, ["rollout_batch_size=4", *ONE_DEVICE[:4]])
    assert any(
        f"--config_path {example} --config_name rlvr_config" in note
        and note.endswith(
            f"{example}/rlvr_config.yaml (Hydra's config_path, relative to the entry script)"
        )
        for note in conversion.report.notes
    )
    assert conversion.config["data"]["train_batch_size"] == 4


def test_a_launch_script_read_from_elsewhere_finds_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = EXAMPLES / "qwen3-8B-rlvr_fsdp2" / "run_rlvr_pipeline.sh"
    conversion = convert("roll", script, ONE_DEVICE)
    assert conversion.config["data"]["apply_chat_template_kwargs"] == {"enable_thinking": True}


def test_the_agentic_launch_script_is_refused_in_one_line(monkeypatch):
    monkeypatch.chdir(UPSTREAM)
    with pytest.raises(ConfigError, match="start_agentic_pipeline.py; rl reads ROLL's RLVR"):
        convert("roll", Path("examples/qwen3_agentic_gem/run_agentic_pipeline_gem.sh"))


def test_a_config_path_rl_cannot_know_says_what_to_export(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        "python examples/start_rlvr_pipeline.py --config_path $EXP --config_name rlvr_config\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "EXP"}
    from rl.cli.dialects.roll.launch import LAUNCH

    with pytest.raises(ConfigError, match="export EXP"):
        LAUNCH.read(script, [], environ=env, cwd=UPSTREAM)
    launch = LAUNCH.read(script, [], environ={**env, "EXP": "qwen3-8B-rlvr_fsdp2"}, cwd=UPSTREAM)
    assert launch.config_file == EXAMPLES / "qwen3-8B-rlvr_fsdp2" / "rlvr_config.yaml"


def test_the_separate_example_places_training_and_generation_apart():
    """ROLL's rlvr_qwen2.5_7B_seperate.yaml: actor_train and reference on devices 0-3 and
    8-11, actor_infer on 4-5 and 12-13 of 8-GPU nodes; ROLL derives num_nodes = 2 from the
    highest device. rl's placement is the same split, the rollout on devices of its own."""
    from rl.core.workers.launch import cluster_placement

    name = "qwen2.5-7B-rlvr_megatron/rlvr_qwen2.5_7B_seperate.yaml"
    config, _ = convert_config("roll", EXAMPLES / name, [], allow=sorted(REFUSED[name]))
    trainer = [0, 1, 2, 3, 8, 9, 10, 11]
    assert config.cluster.placement == {"actor": trainer, "ref": trainer, "rollout": [4, 5, 12, 13]}
    assert (config.cluster.nnodes, config.cluster.n_gpus_per_node) == (2, 8)
    assert config.trainer.launcher == "ray"
    placement = cluster_placement(config)
    assert placement.colocation == (("actor", "ref"),)
    assert placement.nodes_of("rollout") == (0, 1)
