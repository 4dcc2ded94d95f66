"""Value conversions from ROLL's settings to ours (names, units, derived values)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import NULL, Ignored, Unsupported
from rl.cli.dialects.roll import batch
from rl.cli.dialects.roll.defaults import INFER_STRATEGIES, TRAIN_STRATEGIES

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_DTYPES.update({name: name for name in ("bfloat16", "float16", "float32")})


def dtype(value: Any) -> Any:
    return _DTYPES.get(str(value), Unsupported(f"dtype {value!r}: one of bf16, fp16, fp32"))


def train_strategy(value: Any) -> Any:
    if value in TRAIN_STRATEGIES:
        return TRAIN_STRATEGIES[value]
    return Unsupported(
        f"{value!r}: rl trains with megatron_train (megatron) or fsdp2_train (fsdp); "
        "ROLL 0.3 removed deepspeed"
    )


def infer_strategy(value: Any) -> Any:
    return INFER_STRATEGIES.get(
        value, Unsupported(f"{value!r}: rl rolls out with vllm, sglang or hf")
    )


def scheduler(value: Any) -> Any:
    known = {"linear": "linear", "cosine": "cosine", "constant": "constant"}
    known["constant_with_warmup"] = "constant"  # ours warms up by lr_warmup_* too
    return known.get(
        value, Unsupported(f"lr_scheduler_type {value!r}: rl has constant, cosine, linear")
    )


def reference_strategy(flat: Mapping[str, Any]) -> Any:
    """The reference runs on the actor's backend and layout in rl: fine when ROLL's does."""
    actor = train_strategy(batch.strategy_of(flat, "actor_train"))
    reference = batch.strategy_of(flat, "reference").replace("_infer", "_train")
    if reference and train_strategy(reference) != actor:
        return Unsupported(
            f"the reference runs on the actor's backend in rl ({actor}), not "
            f"{batch.strategy_of(flat, 'reference')}"
        )
    return actor


def _normalisation(flat: Mapping[str, Any]) -> tuple[Any, Any]:
    """ROLL's reward normalisation (norm_mean_type, norm_std_type); grpo forces group/group
    (roll/utils/functionals.py reward_postprocess)."""
    if flat.get("adv_estimator") == "grpo":
        return "group", "group"
    return flat.get("norm_mean_type"), flat.get("norm_std_type")


def grouped(flat: Mapping[str, Any]) -> bool:
    """Whether ROLL's run is a group-normalised REINFORCE that rl runs as its grpo."""
    return flat.get("adv_estimator") in ("grpo", "reinforce") and _normalisation(flat)[0] == "group"


def estimator(flat: Mapping[str, Any]) -> Any:
    """ROLL's estimator with its reward normalisation, as rl's estimator.

    ROLL: the sequence reward is normalised (norm_mean_type / norm_std_type: batch, group,
    running or none; grpo forces group/group), then gae, or for reinforce and grpo the
    discounted return of the token rewards (`compute_reinforce_return`). So reinforce
    without normalisation is rl's `reinforce`; group mean (and std) with gamma 1 and no
    token-level KL is rl's grpo (Dr.GRPO without the std); GAE without normalisation is
    rl's gae, which whitens its advantages as ROLL does with whiten_advantages."""
    name = flat.get("adv_estimator")
    mean, std = _normalisation(flat)
    if name in ("gigpo", "step_reinforce", "agentic_reinforce"):
        return Unsupported(
            f"adv_estimator {name!r}: ROLL's agentic estimators are not in rl (its "
            "estimators: gae, grpo, reinforce, rloo, remax, reinforce_plus_plus[_baseline])"
        )
    if name not in ("gae", "grpo", "reinforce"):
        return Unsupported(f"adv_estimator {name!r}: ROLL has gae, reinforce, grpo")
    if (mean, std) == (None, None):
        if name == "gae" and not flat.get("whiten_advantages"):
            return Unsupported(
                "adv_estimator 'gae' with whiten_advantages false: ROLL leaves GAE advantages "
                "unwhitened, rl's gae whitens them over the batch (verl's); set "
                "whiten_advantages: true to train as rl does"
            )
        return name
    shown = f"norm_mean_type {mean!r}, norm_std_type {std!r}"
    if name == "gae" or mean != "group" or std not in ("group", None):
        return Unsupported(
            f"{name} with reward normalisation {shown}: rl normalises rewards per prompt "
            "group only (grpo; Dr.GRPO without the std), before no estimator but its own"
        )
    if float(flat.get("gamma", 1.0)) != 1.0 or flat.get("add_token_level_kl"):
        return Unsupported(
            f"{name} with {shown}, gamma {flat.get('gamma')} and add_token_level_kl "
            f"{flat.get('add_token_level_kl')}: ROLL discounts the normalised reward plus "
            "the token KL; rl's grpo puts the normalised score on every token (gamma 1, "
            "no token-level KL)"
        )
    return "grpo"


def norm_by_std(flat: Mapping[str, Any]) -> Any:
    """grpo divides by the group std unless ROLL's norm_std_type is unset (Dr.GRPO)."""
    return _normalisation(flat)[1] == "group" if grouped(flat) else None


def whiten_advantages(flat: Mapping[str, Any]) -> Any:
    """ROLL whitens after any estimator; rl's gae whitens already (once, as ROLL)."""
    on = bool(flat.get("whiten_advantages"))
    return None if flat.get("adv_estimator") == "gae" else on


def reward_clip(flat: Mapping[str, Any]) -> Any:
    """ROLL clamps the reward after normalising it (`if reward_clip`: 0 is off). Normalised
    by its group's mean and (unbiased) std, a reward is at most (n - 1) / sqrt(n) from 0
    for n samples (one sample apart from the n - 1 others), so a bound at least that never
    binds: ignored, as it changes nothing."""
    bound = flat.get("reward_clip") or None
    if bound is not None and grouped(flat):
        n = int(
            flat.get("actor_infer.generating_args.num_return_sequences")
            or flat.get("num_return_sequences_in_group")
            or 1
        )
        reach = (n - 1) / math.sqrt(n)
        if _normalisation(flat)[1] == "group" and float(bound) >= reach:
            return Ignored(
                f"reward_clip {bound} on group-normalised rewards of {n} samples, which "
                f"reach at most {reach:.3g}: the clamp never binds"
            )
        return Unsupported(
            f"reward_clip {bound} with a group-normalised estimator: ROLL clamps the "
            "normalised reward, rl's algorithm.reward_clip clamps the score before grpo"
        )
    return bound


def whiten_rewards(flat: Mapping[str, Any]) -> Any:
    on = bool(flat.get("whiten_rewards"))
    if on and grouped(flat):
        return Unsupported(
            "whiten_rewards with a group-normalised estimator: ROLL whitens the token rewards "
            "before its return-to-go, rl's grpo sums them into one score per sequence"
        )
    return on


# ROLL's named chat templates (roll/datasets/chat_template.py): how rl renders each.
# ROLL renders the messages with add_generation_prompt and tokenizes the text.
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEMPLATES: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "native": ("native", {}, None),
    "qwen2_5": ("native", {}, None),  # ROLL: the tokenizer's own template
    "qwen3": ("native", {"enable_thinking": True}, None),
    "chatml": ("native", {}, CHATML),
}


def _template(flat: Mapping[str, Any]) -> Any:
    name = flat.get("global_template") or flat.get("actor_train.data_args.template")
    if name is None:
        return None
    if name not in TEMPLATES:
        return Unsupported(
            f"template {name!r}: rl renders ROLL's native, qwen2_5, qwen3 and chatml "
            "templates; its base/empty/longCOT/longcot_V3 templates rewrite the text "
            "(set model.custom_chat_template to a Jinja template of your own)"
        )
    return TEMPLATES[name]


def template_mode(flat: Mapping[str, Any]) -> Any:
    found = _template(flat)
    return found if found is None or isinstance(found, Unsupported) else found[0]


def template_kwargs(flat: Mapping[str, Any]) -> Any:
    found = _template(flat)
    return found[1] or None if isinstance(found, tuple) else None


def custom_template(flat: Mapping[str, Any]) -> Any:
    found = _template(flat)
    return found[2] if isinstance(found, tuple) else None


def pg_variant(value: Any) -> Any:
    known = {"ppo": "vanilla", "cispo": "cispo"}  # ROLL's ppo is verl's vanilla PPO clip
    return known.get(
        value,
        Unsupported(
            f"pg_variant {value!r}: ROLL's unclipped/TIS/TOPR/Kimi variants are not in rl "
            "(its ppo and cispo are)"
        ),
    )


def placement(value: Any) -> Any:
    from rl.core.placement import parse_device_mapping

    return list(parse_device_mapping(value, "device_mapping"))


def nnodes(flat: Mapping[str, Any]) -> Any:
    """ROLL's `num_nodes`, which it computes itself: the highest device of any worker's
    `device_mapping` (the roles' and each reward's), over `num_gpus_per_node`, rounded up
    (1 without a mapping). A role split over devices 0-3 and 8-11 of 8-GPU nodes is 2 nodes."""
    from rl.core.placement import parse_device_mapping

    per_node = int(flat.get("num_gpus_per_node") or 1)
    devices = [
        device
        for key, value in flat.items()
        if key.endswith(".device_mapping") and value is not None
        for device in parse_device_mapping(value, key.removesuffix(".device_mapping"))
    ]
    if not devices:
        return None
    return max(1, -(-(max(devices) + 1) // per_node))


def fsdp_size(value: Any) -> Any:
    return -1 if value is None or int(value) <= 1 else int(value)  # ROLL's 1: full shard


def loggers(value: Any) -> Any:
    known = {"tensorboard": "tensorboard", "wandb": "wandb", "stdout": "console"}
    known["swanlab"] = "swanlab"
    if value not in known:
        return Unsupported(f"track_with {value!r}: rl logs to console, tensorboard, wandb, swanlab")
    return ["console", "jsonl", known[value]] if known[value] != "console" else ["console", "jsonl"]


def resume_mode(value: Any) -> Any:
    if isinstance(value, str):
        return "path"
    return "auto" if value else "disable"


def resume_path(flat: Mapping[str, Any]) -> Any:
    value = flat.get("resume_from_checkpoint")
    return value if isinstance(value, str) else None


def betas(role: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return [
            float(flat[f"{role}.training_args.adam_beta1"]),
            float(flat[f"{role}.training_args.adam_beta2"]),
        ]

    return derive


def model_path(flat: Mapping[str, Any]) -> Any:
    """ROLL: `pretrain` fills the policy roles' paths when any of them is unset."""
    own = [
        flat.get(f"{r}.model_args.model_name_or_path")
        for r in ("actor_train", "actor_infer", "reference")
    ]
    return own[0] if all(own) else flat.get("pretrain")


def clip(side: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return flat.get(f"pg_clip_{side}") if flat.get("use_pg_clip_range") else None

    return derive


def dual_clip(flat: Mapping[str, Any]) -> Any:
    """ROLL's dual clip bound is 1 + 2·pg_clip when on; off is our null."""
    return 1 + 2 * float(flat["pg_clip"]) if flat.get("dual_clip_loss") else NULL


def kl_type(flat: Mapping[str, Any]) -> Any:
    return "adaptive" if flat.get("target_kl") is not None else "fixed"


def rollout_is(flat: Mapping[str, Any]) -> Any:
    """ROLL's train/infer IS weights: per token or per sequence, when enabled."""
    if not flat.get("train_infer_correction.is_weight.enabled"):
        return None
    kind = flat.get("train_infer_correction.is_weight.weight_type") or "token"
    return "token" if kind == "token" else "sequence"


def router_replay(value: Any) -> Any:
    """ROLL's `router_replay.mode` (disable | R2 | R3) as ours; ROLL itself refuses R2."""
    if value in (None, "disable"):
        return "disabled"
    if value == "R2":
        return Unsupported("ROLL refuses router_replay.mode=R2 (not implemented there)")
    return value
