"""`docs/config-dialects.md` from the dialect tables themselves (a test keeps the file in
sync): `python -m rl.cli.dialects.docs > docs/config-dialects.md`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rl.cli.dialects import coverage
from rl.cli.dialects.mapping import NO_SETTING, Rule
from rl.cli.dialects.record import Table
from rl.cli.dialects.registry import documented_tables
from rl.cli.dialects.switches import Switch

HEADER = """# Config dialects: running verl, ROLL, ChatLearn and RLinf configs

Generated from the importers' tables (`rl.cli.dialects`) by
`python -m rl.cli.dialects.docs`; a test fails when this file is stale.

`rl convert [--from DIALECT] FILE [OVERRIDES...] [-o OUT.yaml]` prints our config and a
report of every upstream key: **mapped** (written to ours), **default** (equal to our
default, or unset upstream), **ignored** (infrastructure rl handles itself: processes,
logging, checkpoint folders, engine internals; with the reason) or **unsupported** (it
would change what is trained and rl cannot honour it). `rl train --from DIALECT FILE
[OVERRIDES...]` converts and runs. The dialect is detected from the file when `--from` is
left out. A key no rule names is moved as it is and kept if our schema has it, else
reported unsupported ("{no_setting}").

Nothing that changes training is dropped silently: an unsupported key stops `rl convert`,
`rl train --from` and `rl sft --from` (exit 2) in one line naming each key and its value;
the report above it gives each one's reason. To run anyway, name them:
`--allow-unsupported KEY[,KEY]` (repeatable; shell patterns such as `rewards.*`, `*` for
all). The run then records them in its `config.yaml` as `trainer.dropped_settings` and
warns about each when it starts. An allowance that matches no refused key is refused too.

The report is ranked by consequence and fits a screen: what changes training (each key,
its value and the reason), then what rl handles itself (one line per reason), then the
count of mapped keys; `--report full` lists every key. A refusal later on (a bad value,
a missing file) names the upstream key beside ours.

Overrides may mix the system's keys and rl's own on one command line (`rl train --from roll
rlvr_config.yaml seed=3 trainer.device=cpu`): an override whose key is not the upstream
system's (not in its composed file, its documented keys or its importer's rules) but is a
key of our schema is applied to the converted config, last.

A section the system does not read while its switch is off (verl: a disabled reward
model, the critic GRPO never builds, the reference model without a KL, profilers, LoRA at
rank 0, ...) is neither validated nor mapped: its `???` keys and paths never matter, and
the report says in one line per switch what it left unread (table per dialect below).

A launch script works too (`rl train --from verl run_qwen2-7b_math.sh [OVERRIDES]`): it
is read as bash would run it, never executed: variables from the script, then the
environment (`${{X:-default}}` and the other operators), `$(pwd)`, `$(date +FMT)`,
`basename` / `dirname` / `realpath` and `$((...))` computed in Python, `if` / `case`
decided from known values, and rl's overrides placed where the script says `"$@"` (else
appended). The config is found as Hydra finds it for the module the script runs
(`verl.trainer.main_ppo`, verl's experimental and recipe entry modules, read with `ast`
from an installed verl or the checkout holding the script): a relative `--config-path` is
read against that module's folder, and without `--config-name` its `@hydra.main` default
applies. A value that cannot be known is reported by name with the override to pass.
"""


# the released versions the tests convert (scripts/fetch-upstream.sh installs them with
# --no-deps; packages/cli/tests/dialects/test_verl_release_defaults.py checks this table)
VERL_RELEASES = ("0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")
TESTED = [
    (
        "verl",
        ", ".join(VERL_RELEASES),
        "each wheel's `ppo_trainer.yaml` and `ppo_megatron_trainer.yaml` with the GSM8K "
        "quickstart's overrides: 0 refused",
    ),
    (
        "ChatLearn",
        "1.2.0 (`pai-chatlearn`); the repository's examples",
        "the wheel holds no config files: its rule reward is the oracle of ours; the "
        "committed upstream example configs and scripts convert",
    ),
    (
        "RLinf",
        "0.3.0; the repository's examples",
        "the wheel holds no training configs: its math verifier is the oracle of ours; the "
        "committed upstream example configs convert",
    ),
    ("ROLL", "the repository's examples", "ROLL publishes no wheel; committed example configs"),
]


# What the committed upstream examples (packages/cli/tests/dialects/<system>/upstream/) still
# refuse, as (system, key patterns, why): test_example_refusals checks that every refusal of
# every example matches a row and that every row is still met
EXAMPLE_REFUSALS = [
    (
        "roll",
        ("rewards.llm_judge.judge_model_type", "reward_model.model_args.*"),
        "ROLL's LLM judge as a client of a served reward_model cluster (judge_model_type "
        "cluster, which ROLL's own worker raises on); its judge served by the run "
        "(inference), its rule workers, their routing by tag, the domain mix and the "
        "sample masks map",
    ),
    (
        "roll",
        (
            "custom_envs.*",
            "train_env_manager.*",
            "val_env_manager.*",
            "env_manager_cls",
            "math_agent_*",
            "reward_normalization.*",
        ),
        "ROLL's agentic environments, env managers and their reward normalisation do not "
        "load in rl (rl's environments are classes with reset / step)",
    ),
    (
        "roll",
        ("model_download_type",),
        "ROLL downloads a model id from ModelScope; rl reads model.path from disk",
    ),
    (
        "roll",
        ("async_generation_ratio",),
        "ROLL's ratio of generation run ahead; rl's is trainer.mode: async with "
        "trainer.max_staleness, set by hand (they count staleness differently)",
    ),
    (
        "rlinf",
        ("actor.fsdp_config.amp_autocast.enabled",),
        "autocast beside FSDP mixed precision, which RLinf refuses too (qwen2.5-1.5b-grpo-fsdp "
        "as shipped); with mixed_precision.* null it trains in fp16 autocast",
    ),
    ("rlinf", ("cluster.auto_scheduler",), "RLinf's dynamic scheduler is not in rl"),
    (
        "rlinf",
        ("algorithm.adv_type",),
        "gae in RLinf's reasoning runner puts the reward on the last padded position",
    ),
    (
        "rlinf",
        ("algorithm.loss_agg_func",),
        "a token mean per micro-batch of several sequences (or of dynamic batches), which "
        "weighs tokens by their micro-batch",
    ),
    (
        "rlinf",
        ("actor.optim.use_precision_aware_optimizer", "actor.optim.bf16"),
        "megatron's precision-aware optimizer; bf16 weights without fp32 master copies",
    ),
    (
        "verl",
        ("actor_rollout_ref.model.override_config.*",),
        "changes to the Hugging Face model config at load (the DAPO script's "
        "max_position_embeddings): rl builds the model as model.path's config says",
    ),
]


def _example_refusals() -> list[str]:
    lines = [
        "\n## What the upstream examples still refuse\n",
        "The upstream example configs and launch scripts committed with the tests convert "
        "with nothing refused but these settings (`python scripts/count_refusals.py --keys` "
        "counts them per file; a test keeps this table exact):\n",
        "| system | settings | why |",
        "|---|---|---|",
    ]
    for system, patterns, why in EXAMPLE_REFUSALS:
        keys = ", ".join(f"`{p}`" for p in patterns)
        lines.append(f"| {system} | {keys} | {why} |")
    return lines


def _tested() -> list[str]:
    lines = [
        "\n## Versions tested\n",
        "| system | versions | what is converted |",
        "|---|---|---|",
    ]
    lines += [f"| {system} | {versions} | {what} |" for system, versions, what in TESTED]
    return lines


def _rows(rules: Sequence[Rule]) -> list[str]:
    lines = ["| upstream key | rl key | note |", "|---|---|---|"]
    for rule in rules:
        target = f"`{rule.target}`" if rule.target else "—"
        note = rule.reason or ("value converted" if rule.convert else "")
        if not rule.target:
            note = f"{rule.status}: {note}"
        lines.append(f"| `{rule.source}` | {target} | {note} |")
    return lines


def _coverage(table: Table) -> list[str]:
    rows = coverage.rows(table)
    counts = Counter(row.status for row in rows)
    lines = [
        f"\n### Coverage of {table.name}'s documented keys\n",
        f"{len(rows)} keys ({table.documented}): "
        + ", ".join(f"{counts[s]} {s}" for s in ("mapped", "unsupported", "ignored"))
        + ". A mapped key whose value equals our default is reported as default.\n",
        "| upstream key | rl key | status / reason |",
        "|---|---|---|",
    ]
    for row in rows:
        target = f"`{row.target}`" if row.status == "mapped" else "—"
        note = row.status if row.status == "mapped" else f"{row.status}: {row.reason}"
        lines.append(f"| `{row.key}` | {target} | {note} |")
    return lines


def _switches(switches: Sequence[Switch]) -> list[str]:
    if not switches:
        return []
    lines = [
        "\nSections read only while their switch is on (off: neither validated nor mapped):\n",
        "| sections | switch | read whatever the switch says |",
        "|---|---|---|",
    ]
    for switch in switches:
        sections = ", ".join(f"`{section}`" for section in switch.sections)
        kept = ", ".join(f"`{key}`" for key in switch.always_read) or "—"
        lines.append(f"| {sections} | {switch.switch} | {kept} |")
    return lines


def render() -> str:
    lines = [HEADER.format(no_setting=NO_SETTING), *_tested(), *_example_refusals()]
    for dialect, table in documented_tables():
        lines.append(f"\n## {table.title or table.name}\n")
        lines.append(table.description.strip() + "\n")
        lines.append(
            "Rules, first match wins (`.` ends a prefix, `*` is the rest of one segment, "
            "`**` one or more segments):\n"
        )
        lines += _rows(table.rules)
        lines.append(
            "\nWhy a key that would move to a name our schema lacks is not supported (first "
            'match; otherwise "' + NO_SETTING + '"):\n'
        )
        lines += _rows(table.reasons)
        # the switches are the dialect's, read before its table is chosen: under its main one
        lines += _switches(dialect.switches if table is dialect.table else ())
        lines += _coverage(table)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
