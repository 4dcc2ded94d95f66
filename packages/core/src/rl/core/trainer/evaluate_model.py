"""Online evaluation (`rl eval --model PATH`): a model generates on the validation set
(`data.val_files`, sampled with `rollout.val_kwargs`) through the configured rollout engine
and launcher, its responses are scored by the run's reward, and the metrics are reported
per data source: `test_score/<source>` (mean over prompts of each prompt's mean score, as
the offline `rl eval` and verl's `main_eval`), `pass@<k>/<source>` (unbiased, needs
`val_kwargs.n >= k`), and the trainer's `val/*` metrics.

PATH is a Hugging Face folder, a run's output folder (its `hf/` export and `config.yaml`),
or one of its checkpoints (`checkpoints/global_step_N`: the actor's saved state is loaded over the
run's model)."""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl.core.config import Config
from rl.core.errors import ConfigError
from rl.core.evaluation import pass_at_k


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: the config file to start from (a run's), the
    overrides that point `model.path` at them, and a checkpoint's actor state to load."""

    config_file: Path | None
    overrides: tuple[str, ...]
    actor_state: Path | None = None


# Only the actor (to hold the weights) and the rollout engine are built.
EVAL_OVERRIDES = (
    "actor.use_kl_loss=false",
    "algorithm.use_kl_in_reward=false",
    "algorithm.adv_estimator=grpo",
    "sft.enable=false",
)


def model_source(path: Path) -> ModelSource:
    """What `rl eval --model PATH` evaluates; ConfigError when PATH is none of the three."""
    if (path / "config.json").is_file():
        return ModelSource(None, (f"model.path={path}",))
    if (path / "hf" / "config.json").is_file():
        run_config = path / "config.yaml"
        return ModelSource(
            run_config if run_config.is_file() else None, (f"model.path={path / 'hf'}",)
        )
    if (path / "actor").is_dir():
        run_config = path.parent.parent / "config.yaml"
        if not run_config.is_file():
            raise ConfigError(
                f"{path} looks like a checkpoint, but its run's config ({run_config}) is "
                "missing: pass the run's config file with --config"
            )
        return ModelSource(run_config, (), actor_state=path / "actor")
    raise ConfigError(
        f"--model {path}: not a Hugging Face folder (config.json), a run's output folder "
        "(hf/) or a checkpoint (actor/)"
    )


def run_online_eval(
    config: Config,
    actor_state: Path | None = None,
    ks: Sequence[int] = (1,),
    correct_score: float = 1.0,
    generations: Path | None = None,
) -> dict[str, float]:
    """Generate on the validation set with the model of `config` (and `actor_state`), score
    it and return the metrics; every response goes to `generations` (JSON Lines) if set."""
    from rl.core.rng import seed_everything
    from rl.core.trainer.build import build_context
    from rl.core.trainer.preflight import preflight
    from rl.core.trainer.validate import generate_scored, val_sampling

    sampling = val_sampling(config)
    if max(ks) > sampling.n:
        raise ConfigError(
            f"pass@{max(ks)} needs rollout.val_kwargs.n >= {max(ks)} responses per prompt "
            f"(it is {sampling.n})"
        )
    seed_everything(config.trainer.seed)
    preflight(config)
    with tempfile.TemporaryDirectory(prefix="rl-eval-") as scratch:  # the run's folder stays
        ctx = build_context(config, Path(scratch))
        try:
            if actor_state is not None:
                ctx.actor.load(str(actor_state))
            ctx.sync_weights(0)
            items, scores, texts = generate_scored(ctx, sampling)
        finally:
            ctx.close()
    if generations is not None:
        with generations.open("w") as handle:
            for row, (score, text) in enumerate(zip(scores, texts, strict=True)):
                item = items[row // sampling.n]
                record = {
                    "data_source": item.data_source,
                    "prompt": item.prompt_text,
                    "response": text,
                    "ground_truth": str(item.ground_truth),
                    "score": score,
                }
                handle.write(json.dumps(record) + "\n")
    return metrics_by_source(
        [it.data_source for it in items], scores, sampling.n, ks, correct_score
    )


def metrics_by_source(
    sources: Sequence[str],
    scores: Sequence[float],
    n: int,
    ks: Sequence[int] = (1,),
    correct_score: float = 1.0,
) -> dict[str, float]:
    """`test_score/<source>`, `pass@<k>/<source>` and the overall `val/reward_mean`,
    `val/accuracy`, from `n` scores per prompt (prompt-major)."""
    per_prompt: dict[str, list[list[float]]] = defaultdict(list)
    for index, source in enumerate(sources):
        per_prompt[source].append(list(scores[index * n : (index + 1) * n]))
    metrics: dict[str, float] = {}
    for source, rows in sorted(per_prompt.items()):
        metrics[f"test_score/{source}"] = sum(sum(r) / len(r) for r in rows) / len(rows)
    for source, rows in sorted(per_prompt.items()):
        for k in ks:
            values = [pass_at_k(n, sum(s >= correct_score for s in r), k) for r in rows]
            metrics[f"pass@{k}/{source}"] = sum(values) / len(values)
    total = max(len(scores), 1)
    metrics["val/reward_mean"] = sum(scores) / total
    metrics["val/accuracy"] = sum(s > 0 for s in scores) / total
    metrics["eval/prompts"] = float(len(sources))
    metrics["eval/responses"] = float(len(scores))
    return metrics
