"""The verl importer on verl-dialect files written for these tests (`verl/`): Hydra
composition (defaults list with group@package entries, a relative ../group entry, _self_),
verl's override syntax, interpolations, `???`, `_target_`; the report; validation against
our schema; and one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl.cli.dialects import convert, detect
from rl.cli.dialects.mapping import Rule, flatten
from rl.core.config import ConfigError, config_from_mapping

HERE = Path(__file__).parent / "verl"
MODEL = "actor_rollout_ref.model.path=builtin:tiny-qwen2"


def entries(report):
    return {entry.source: entry for entry in report.entries}


def test_a_composed_verl_file_maps_to_our_keys():
    conversion = convert("verl", HERE / "grpo.yaml", [MODEL])
    ours, by_key = conversion.config, entries(conversion.report)
    # the group file, then the relative ../optim group, then the primary file (_self_ last)
    assert ours["actor"]["ppo_mini_batch_size"] == 16  # grpo.yaml over actor.yaml's 256
    assert ours["actor"]["ppo_micro_batch_size_per_gpu"] == 4  # dp_actor.yaml over actor.yaml
    assert ours["actor"]["optim"] == {"lr": 1e-6, "weight_decay": 0.01}  # ../optim@optim
    assert ours["actor"]["clip_ratio_low"] == 0.2  # ${.clip_ratio}, relative
    assert ours["rollout"]["temperature"] == 0.9  # ${oc.select:...,0.9}
    assert ours["rollout"]["tensor_parallel_size"] == 2  # renamed
    assert ours["trainer"]["output_dir"] == "checkpoints/verl_grpo_example/qwen_gsm8k"
    assert ours["cluster"] == {"hybrid_engine": True, "n_gpus_per_node": 8}
    assert ours["data"]["train_files"] == ["~/data/gsm8k/train.parquet"]  # str -> list
    assert by_key["algorithm._target_"].status == "ignored"
    assert by_key["actor_rollout_ref.actor.checkpoint.save_contents"].status == "ignored"
    assert by_key["actor_rollout_ref.rollout.multi_turn.enable"].status == "default"  # off
    assert by_key["actor_rollout_ref.actor.clip_ratio"].status == "default"  # = ours
    unexplained = [
        e.source
        for e in conversion.report.entries
        if e.status in ("unsupported", "ignored") and not e.reason
    ]
    assert not unexplained  # every key not taken over says why
    config = config_from_mapping(ours, "converted")  # validates against our schema
    assert config.actor.optim.lr == 1e-6 and config.rollout.name == "vllm"


def test_verl_overrides_add_delete_and_set_lists():
    conversion = convert(
        "verl",
        HERE / "grpo.yaml",
        [
            MODEL,
            "+trainer.total_training_steps=7",
            "~global_profiler",
            "data.val_files=['a.parquet','b.parquet']",
            "actor_rollout_ref.rollout.n=8",
        ],
    )
    ours, by_key = conversion.config, entries(conversion.report)
    assert ours["trainer"]["total_training_steps"] == 7
    assert not any(key.startswith("global_profiler") for key in by_key)
    assert ours["data"]["val_files"] == ["a.parquet", "b.parquet"]
    assert ours["rollout"]["n"] == 8


@pytest.mark.parametrize(
    "file, overrides, words",
    [
        ("grpo.yaml", [], "actor_rollout_ref.model.path is '???' (mandatory) and was not set"),
        ("missing_group.yaml", [], "Could not find 'actor/no_such_actor'"),
        (
            "bad_interpolation.yaml",
            [],
            "actor_rollout_ref.actor.ppo_mini_batch_size could not be "
            "resolved: Interpolation key 'data.no_such_key' not found",
        ),
        (
            "grpo.yaml",
            [MODEL, "actor_rollout_ref.actor.no_such=3"],
            "To append to your config use +actor_rollout_ref.actor.no_such=3",
        ),
        ("no_such_file.yaml", [], "does not exist"),
    ],
    ids=["mandatory", "missing-defaults-file", "interpolation", "unknown-override", "no-file"],
)
def test_bad_input_is_one_line_naming_the_file_and_key(file, overrides, words):
    with pytest.raises(ConfigError) as error:
        convert("verl", HERE / file, overrides)
    message = str(error.value)
    assert words in message and file in message and "\n" not in message


def test_detection_and_unknown_dialects():
    assert detect(HERE / "grpo.yaml") == "verl"
    with pytest.raises(ConfigError, match="cannot tell which system"):
        detect(HERE / "actor" / "actor.yaml")
    with pytest.raises(ConfigError, match="unknown dialect; known: verl, roll, chatlearn"):
        convert("openrlhf", HERE / "grpo.yaml")
    with pytest.raises(ConfigError, match="runner.task_type"):  # not an RLinf file
        convert("rlinf", HERE / "grpo.yaml", [MODEL])


def test_rules_match_exact_keys_prefixes_and_wildcards():
    assert Rule("a.b", "x.y").match("a.b") == "x.y" and Rule("a.b", "x.y").match("a.bc") is None
    assert Rule("a.", "x.").match("a.b.c") == "x.b.c"
    assert Rule("*.p.", reason="r").match("q.p.z") == ""
    assert Rule("*.opt.lr", "{0}.optim.lr").match("actor.opt.lr") == "actor.optim.lr"
    deep = Rule("**._target_", reason="r")
    assert deep.match("a._target_") == "" and deep.match("a.b.c.d.e._target_") == ""
    assert deep.match("_target_") is None and deep.match("a._target_x") is None
    assert dict(flatten({"a": {"b": 1, "c": {}}, "d": [1]})) == {"a.b": 1, "a.c": {}, "d": [1]}


def test_docs_config_dialects_is_generated_from_the_tables():
    from rl.cli.dialects.docs import render

    committed = Path(__file__).resolve().parents[4] / "docs" / "config-dialects.md"
    assert committed.read_text() == render(), (
        "docs/config-dialects.md is stale: python -m rl.cli.dialects.docs > docs/config-dialects.md"
    )


def test_hydra_searchpath_finds_groups_in_another_folder(tmp_path):
    """A user file elsewhere composes the fixture's groups through `hydra.searchpath`
    (as verl users point at `pkg://verl.trainer.config`)."""
    (tmp_path / "mine.yaml").write_text(
        "hydra:\n  searchpath:\n    - file://" + str(HERE) + "\n"
        "defaults:\n  - actor@actor_rollout_ref.actor: dp_actor\n  - _self_\n"
        "actor_rollout_ref:\n  model:\n    path: builtin:tiny-qwen2\n"
        "  actor:\n    ppo_mini_batch_size: 8\n"
    )
    ours = convert("verl", tmp_path / "mine.yaml").config
    assert ours["actor"]["optim"]["lr"] == 1e-6  # from the fixture's optim/fsdp.yaml
    assert ours["actor"]["ppo_micro_batch_size_per_gpu"] == 4  # its dp_actor.yaml


def test_verls_sft_trainer_config_maps_to_rl_sft():
    conversion = convert("verl", HERE / "sft.yaml", ["trainer.total_training_steps=7"])
    config = config_from_mapping(conversion.config, "converted")
    assert conversion.job == "sft" and config.sft.enable
    assert (config.sft.steps, config.sft.batch_size, config.sft.lr) == (7, 8, 1e-4)
    assert config.actor.ppo_micro_batch_size_per_gpu == 4
    assert config.model.path == "~/models/Qwen2.5-0.5B-Instruct"
    assert config.data.prompt_key == "question" and config.data.answer_key == "answer"
    assert config.trainer.output_dir == "checkpoints/gsm8k-sft/qwen"
    by_key = entries(conversion.report)
    assert config.sft.weight_decay == 0.01 and by_key["optim.weight_decay"].status == "mapped"
    assert by_key["optim.warmup_style"].status == "default"  # constant, as ours
    assert config.sft.max_length == 1024 and config.data.max_prompt_length == 1024
    assert by_key["data.multiturn.enable"].status == "default"  # off
    assert "run it with `rl sft --from verl`" in conversion.report.render()


def test_verls_logger_names_map_to_ours():
    def logger(value):
        conversion = convert("verl", HERE / "grpo.yaml", [MODEL, f"trainer.logger={value}"])
        return entries(conversion.report)["trainer.logger"]

    assert logger("['console','file','swanlab']").value == ["console", "jsonl", "swanlab"]
    refused = logger("['console','clearml']")
    assert refused.status == "unsupported" and "['clearml']" in refused.reason


def test_verls_multi_turn_switch_maps_to_our_agent_loop():
    conversion = convert(
        "verl",
        HERE / "grpo.yaml",
        [
            MODEL,
            "actor_rollout_ref.rollout.multi_turn.enable=true",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
            "+actor_rollout_ref.rollout.multi_turn.tool_config_path=tools.yaml",
        ],
    )
    config = config_from_mapping(conversion.config, "converted")
    assert config.rollout.multi_turn.enable and config.rollout.multi_turn.max_assistant_turns == 3
    tools = entries(conversion.report)["actor_rollout_ref.rollout.multi_turn.tool_config_path"]
    assert tools.status == "mapped"  # verl's tool YAML, read at start (rl.core.agent.verl_tools)
    assert config.rollout.multi_turn.tool_config_path == "tools.yaml"


def test_an_sft_config_without_a_step_count_runs_its_epochs():
    assert detect(HERE / "sft.yaml") == "verl"
    conversion = convert("verl", HERE / "sft.yaml", ["trainer.total_training_steps=null"])
    config = config_from_mapping(conversion.config, "epochs")
    assert not conversion.report.refused()
    assert (config.sft.steps, config.sft.epochs) == (0, 2)


@pytest.mark.parametrize(("value", "ours"), [("true", True), ("false", None)])
def test_verl_prefix_grouper_maps_to_ours_and_its_false_to_our_auto(value, ours):
    """verl's default false becomes our null: rl's shared prompts are exact, so they stay on
    where they apply; true stays true (and is refused where it cannot run)."""
    key = "actor_rollout_ref.actor.use_prefix_grouper"
    conversion = convert("verl", HERE / "grpo.yaml", [MODEL, f"+{key}={value}"])
    config = config_from_mapping(conversion.config, "converted")
    assert config.actor.use_prefix_grouper is ours
    assert entries(conversion.report)[key].status in ("mapped", "default")


def test_verls_multi_turn_sft_switch_reads_conversations():
    """sft_trainer.yaml's data.multiturn: on, rows are whole conversations in its
    messages_key (rl's data.messages_key); off, prompt and answer columns."""
    on = convert(
        "verl",
        HERE / "sft.yaml",
        ["data.multiturn.enable=true", "data.multiturn.messages_key=conversation"],
    )
    assert not on.report.refused()
    assert config_from_mapping(on.config, "on").data.messages_key == "conversation"
    off = config_from_mapping(convert("verl", HERE / "sft.yaml").config, "off")
    assert off.data.messages_key is None
