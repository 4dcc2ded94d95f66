"""Value conversions from RLinf's settings to ours (names, units, derived values)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import NULL, Unsupported

_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "float32": "float32"}
_DTYPES.update({"float16": "float16", "bfloat16": "bfloat16", "16": "float16", "32": "float32"})


def dtype(value: Any) -> Any:
    if value is None:
        return None
    return _DTYPES.get(str(value), Unsupported(f"precision {value!r}: fp16, bf16 or fp32"))


def mixed_precision(value: Any) -> Any:
    return "float32" if value is None else dtype(value)  # RLinf's null: no mixed precision


def amp_autocast(section: str) -> Any:
    """RLinf's autocast switch; RLinf itself refuses it beside FSDP mixed precision (its
    validate_fsdp_cfg: any of param/reduce/buffer dtype set and not all fp32)."""

    def derive(flat: Mapping[str, Any]) -> Any:
        enabled = bool(flat.get(f"{section}.fsdp_config.amp_autocast.enabled"))
        mixed = [
            flat.get(f"{section}.fsdp_config.mixed_precision.{key}")
            for key in ("param_dtype", "reduce_dtype", "buffer_dtype")
        ]
        if enabled and not (all(d is None for d in mixed) or all(d == "fp32" for d in mixed)):
            return Unsupported(
                f"amp_autocast beside FSDP mixed_precision {mixed}: RLinf refuses the pair "
                "itself (validate_fsdp_cfg); set fsdp_config.mixed_precision.* to null for "
                "autocast, or allow this key to train with the mixed precision alone"
            )
        return enabled

    return derive


def mini_batch(flat: Mapping[str, Any]) -> Any:
    """Ours in prompts: RLinf's rollout_batch_size × group_size / n_minibatches sequences
    per optimizer step are rollout_batch_size / n_minibatches prompts."""
    minibatches = int(flat.get("algorithm.n_minibatches") or 1)
    return int(flat["data.rollout_batch_size"]) // minibatches


def backend(value: Any) -> Any:
    known = {"megatron": "megatron", "fsdp": "fsdp"}
    return known.get(value, Unsupported(f"training_backend {value!r}: megatron or fsdp"))


def rollout_backend(value: Any) -> Any:
    """vLLM or SGLang, as RLinf; null leaves rl's default, its HF engine (CPU runs)."""
    if value is None:
        return None
    known = {"vllm": "vllm", "sglang": "sglang"}
    return known.get(value, Unsupported(f"rollout_backend {value!r}: vllm or sglang"))


def estimator(flat: Mapping[str, Any]) -> Any:
    """RLinf's rlinf/algorithms/advantages.py as rl's estimators: grpo is (r - group mean) /
    (unbiased group std + 1e-6), as ours; reinpp is the return-to-go of the reward at the
    last response token minus reinpp_kl_beta × KL per token, whitened over the batch, as
    our reinforce_plus_plus with the KL in the reward; its baseline variant subtracts the
    group mean first, which ours does without a KL return-to-go."""
    kind = flat.get("algorithm.adv_type")
    if kind == "reinpp":
        if not flat.get("algorithm.use_reinpp_baseline"):
            return "reinforce_plus_plus"
        if float(flat.get("algorithm.reinpp_kl_beta") or 0.0) > 0:
            return Unsupported(
                "adv_type reinpp with use_reinpp_baseline and reinpp_kl_beta > 0: RLinf "
                "accumulates the per-token KL as a return-to-go after the group baseline; rl's "
                "reinforce_plus_plus_baseline puts one score on every token (set "
                "reinpp_kl_beta: 0, or use_reinpp_baseline: false)"
            )
        return "reinforce_plus_plus_baseline"
    if kind == "grpo":
        return "grpo"
    if kind == "gae":
        return Unsupported(
            "adv_type gae: RLinf's reasoning GAE puts the reward on the last padded position "
            "and bootstraps through the critic's values on the padding; rl's gae puts it on "
            "the last response token"
        )
    return Unsupported(f"adv_type {kind!r}: rl has RLinf's grpo and reinpp")


def whiten_advantages(flat: Mapping[str, Any]) -> Any:
    """RLinf's normalize_advantages: after the estimator, the advantages of the step's whole
    batch (every data-parallel rank) become (x - mean) / (population std + 1e-5), in float64
    (rlinf.utils.distributed.masked_normalization), which is rl's whiten_advantages with
    whiten_style rlinf (`whiten_style` below). Its FSDP actor in a disaggregated placement
    (run_training_pipeline) whitens each mini-batch apart instead: that differs from the
    whole batch once there are several. Its megatron actor, when it computes the advantages
    itself, whitens them a first time with the Bessel-corrected std before this: the second
    pass then scales them by sqrt(N / (N - 1)) over N valid tokens (1 + 1e-4 at N = 5000),
    which rl does not repeat."""
    if not flat.get("algorithm.normalize_advantages"):
        return None
    minibatches = int(flat.get("algorithm.n_minibatches") or 1)
    if flat.get("actor.training_backend") == "fsdp" and _pipelined(flat) and minibatches > 1:
        return Unsupported(
            f"normalize_advantages with the FSDP actor in a disaggregated placement and "
            f"n_minibatches {minibatches}: RLinf whitens each mini-batch apart there; rl "
            "whitens the step's batch (set n_minibatches: 1, or place actor and rollout "
            "together)"
        )
    return True


def whiten_style(flat: Mapping[str, Any]) -> Any:
    return "rlinf" if flat.get("algorithm.normalize_advantages") else None


def _pipelined(flat: Mapping[str, Any]) -> bool:
    """Whether the actor has devices of its own (RLinf's is_disaggregated placement)."""
    prefix = "cluster.component_placement."
    for key in flat:
        if key.startswith(prefix):
            names = [name.strip() for name in key[len(prefix) :].split(",")]
            if "actor" in names:
                return "rollout" not in names
    return False


_SWAPPED_KL = ("kl", "k1", "low_var_kl", "k3")


def kl_loss_type(flat: Mapping[str, Any]) -> Any:
    """RLinf's KL loss calls kl_penalty(ref_logprobs, logprobs): the policy and the
    reference swapped against its own definition (and ours). The symmetric estimators
    (mse / k2, abs) are the same; k1 and k3 are not."""
    kind = flat.get("algorithm.kl_penalty_type")
    if float(flat.get("algorithm.kl_beta") or 0.0) <= 0:
        return None  # no KL loss: not read by the loss
    if kind in _SWAPPED_KL:
        return Unsupported(
            f"kl_penalty_type {kind!r} with kl_beta > 0: RLinf's KL loss passes the "
            "reference log-probs as the policy's (kl_penalty(ref, logprobs)), so its "
            f"{kind} is rl's with the two swapped; mse / k2 and abs are the same in both"
        )
    return kind


def in_reward_kl_type(flat: Mapping[str, Any]) -> Any:
    """reinpp's KL in the reward calls kl_penalty(logprob, ref_logprob): ours as it is."""
    if in_reward_kl(flat) is None:
        return None
    return flat.get("algorithm.kl_penalty_type")


def loss_agg(flat: Mapping[str, Any]) -> Any:
    """RLinf aggregates each micro-batch on its own (`loss_agg_func(loss, mask)`) and
    averages the micro-batches (loss / gradient accumulation steps) and the ranks. The
    sequence means are then the mini-batch's, as ours; its token-mean is the mean of each
    micro-batch's token mean: with one sequence per micro-batch
    (`training_batch_size_per_gpu: 1`) that is our seq-mean-token-mean."""
    mode = flat.get("algorithm.loss_agg_func")
    if mode in ("seq-mean-token-sum", "seq-mean-token-mean"):
        return mode
    if mode != "token-mean":
        return Unsupported(f"loss_agg_func {mode!r}: RLinf has token-mean and the seq-mean ones")
    micro = int(flat.get("algorithm.training_batch_size_per_gpu") or 1)
    if micro == 1 and not flat.get("runner.enable_dynamic_batch_size"):
        return "seq-mean-token-mean"
    return Unsupported(
        "loss_agg_func token-mean: RLinf averages the token mean of each micro-batch "
        f"({micro} sequence(s), or a token budget with enable_dynamic_batch_size); rl's "
        "token-mean is over the whole mini-batch (with training_batch_size_per_gpu: 1 it is "
        "rl's seq-mean-token-mean)"
    )


def one_is_off(value: Any) -> Any:
    """1 (one pipeline stage, one generation batch) is what rl does: not in use."""
    return None if value is None or int(value) == 1 else value


def weight_reload(value: Any) -> Any:
    return None if value == "sync" else value


def constant_weight_decay(section: str) -> Any:
    """megatron's start/end weight decay: rl's optim.weight_decay when both equal it (the
    constant style), else not expressible."""

    def derive(flat: Mapping[str, Any]) -> Any:
        start = flat.get(f"{section}.lr_sched.start_weight_decay")
        end = flat.get(f"{section}.lr_sched.end_weight_decay")
        decay = flat.get(f"{section}.optim.weight_decay")
        known = [float(v) for v in (start, end, decay) if v is not None]
        if len(set(known)) <= 1:
            return None if decay is not None or not known else known[0]
        return Unsupported(
            f"{section}.lr_sched start/end_weight_decay {start} -> {end} besides "
            f"optim.weight_decay {decay}: rl's weight decay is optim.weight_decay (constant, "
            "or rising with weight_decay_incr_style from it)"
        )

    return derive


def policy_loss(value: Any) -> Any:
    if value in ("actor", "actor_critic"):
        return "vanilla"  # the PPO clip loss, with or without a value head
    return Unsupported(f"loss_type {value!r}: rl's PPO clip loss is RLinf's actor")


def loggers(value: Any) -> Any:
    known = {"tensorboard", "wandb", "swanlab"}
    unknown = [name for name in value or [] if name not in known]
    if unknown:
        return Unsupported(f"logger_backends {unknown}: rl logs to tensorboard, wandb, swanlab")
    return ["console", "jsonl", *(value or [])]


def output_dir(flat: Mapping[str, Any]) -> Any:
    """RLinf checkpoints under <output_dir>/<experiment_name>."""
    root = flat.get("runner.output_dir")
    name = flat.get("runner.experiment_name")
    return os.path.join(str(root), str(name)) if root and name else root


def steps(value: Any) -> Any:
    return None if value is None or int(value) < 0 else int(value)


def freq(value: Any) -> Any:
    return -1 if value is None or int(value) <= 0 else int(value)


def resume_mode(value: Any) -> Any:
    if value in (None, ""):
        return "disable"
    return "auto" if value == "auto" else "path"


def resume_path(flat: Mapping[str, Any]) -> Any:
    value = flat.get("runner.resume_dir")
    return None if value in (None, "", "auto") else value


def top_k(value: Any) -> Any:
    """RLinf's 1000000 (or <= 0) means off: ours is -1."""
    return -1 if value is None or int(value) <= 0 or int(value) >= 100_000 else int(value)


def temperature(flat: Mapping[str, Any]) -> Any:
    if flat.get("algorithm.sampling_params.do_sample") is False:
        return 0.0  # greedy
    return flat.get("algorithm.sampling_params.temperature")


def clip_ratio_c(value: Any) -> Any:
    return NULL if value is None else value  # null: no dual clip, in RLinf and in ours


def kl_loss(flat: Mapping[str, Any]) -> Any:
    return float(flat.get("algorithm.kl_beta") or 0.0) > 0


def entropy(flat: Mapping[str, Any]) -> Any:
    """RLinf applies entropy_bonus only when calculate_entropy is on."""
    if not flat.get("algorithm.calculate_entropy"):
        return None
    return flat.get("algorithm.entropy_bonus")


def tis_cap(flat: Mapping[str, Any]) -> Any:
    """RLinf's importance_sampling_fix: advantages × min(exp(recomputed - rollout), clip)."""
    if not flat.get("algorithm.importance_sampling_fix"):
        return None
    return flat.get("algorithm.importance_sampling_clip")


def in_reward_kl(flat: Mapping[str, Any]) -> Any:
    """REINFORCE++ folds `reinpp_kl_beta` × KL into the token rewards; other estimators
    do not read it (None: unset)."""
    if flat.get("algorithm.adv_type") != "reinpp":
        return None
    return flat.get("algorithm.reinpp_kl_beta")


def chat_template(value: Any) -> Any:
    """RLinf's apply_chat_template: true renders the prompt column's chat messages through
    the tokenizer's template (add_generation_prompt); false takes the prompt text as it is."""
    return "auto" if value else "none"


def data_type(flat: Mapping[str, Any]) -> Any:
    """RLinf's reasoning dataset types: math (prompt / answer columns of json or jsonl)."""
    kind = flat.get("data.type")
    if kind == "math":
        return chat_template(flat.get("data.apply_chat_template"))
    return Unsupported(f"data.type {kind!r}: rl reads RLinf's math dataset (prompt/answer rows)")


def reward_function(value: Any) -> Any:
    """RLinf's reward_type math: rl's RLinf math scorer (rl.core.rewards.rlinf_math)."""
    if value != "math":
        return Unsupported(f"reward_type {value!r}: rl has RLinf's math reward")
    return "pkg://rl.core.rewards.rlinf_math"  # by module: the config holds on any machine


def latex_note(values: Mapping[str, Any]) -> list[str]:
    """RLinf compares LaTeX answers symbolically through latex2sympy2 (its dependency
    rlinf_latex2sympy2); rl's scorer does when it is installed, as RLinf would without."""
    if (values.get("reward") or {}).get("reward_type") != "math":
        return []
    try:
        import latex2sympy2  # noqa: F401
    except Exception:
        return [
            "RLinf's math reward compares LaTeX answers (\\frac{1}{2} against 0.5) through "
            "latex2sympy2, which is not installed here: pip install rlinf_latex2sympy2 to "
            "score as RLinf does (without it such answers are compared as text)"
        ]
    return []


def unless(default: float) -> Any:
    """A setting whose `default` is what rl does: not in use at that value."""
    return lambda value: None if value is None or float(value) == default else value


def load_format(value: Any) -> Any:
    return "auto" if value else "dummy"


def betas(section: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return [
            float(flat.get(f"{section}.optim.adam_beta1", 0.9)),
            float(flat.get(f"{section}.optim.adam_beta2", 0.999)),
        ]

    return derive


def min_lr_ratio(section: str) -> Any:
    """megatron merges model, optim, lr_sched and megatron into one namespace: lr_sched's
    min_lr wins over optim's; FSDP reads optim.min_lr_rate."""

    def derive(flat: Mapping[str, Any]) -> Any:
        if flat.get(f"{section}.optim.min_lr_rate") is not None:
            return float(flat[f"{section}.optim.min_lr_rate"])
        lr = float(flat.get(f"{section}.optim.lr") or 0.0)
        low = flat.get(f"{section}.lr_sched.min_lr", flat.get(f"{section}.optim.min_lr"))
        return None if not lr or low is None else float(low) / lr

    return derive


def scheduler(value: Any) -> Any:
    known = {"constant": "constant", "linear": "linear", "cosine": "cosine", "WSD": "wsd"}
    known["wsd"] = "wsd"
    return known.get(value, Unsupported(f"lr_decay_style {value!r}: constant, linear, cosine, WSD"))


def warmup_steps(value: Any) -> Any:
    return 0 if value is None or int(value) < 0 else int(value)


def model_path(flat: Mapping[str, Any]) -> Any:
    return flat.get("rollout.model.model_path") or flat.get("actor.model.model_path")


def offload_for(backend_name: str, key: str, section: str = "actor") -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        if flat.get(f"{section}.training_backend") != backend_name:
            return None
        return flat.get(key)

    return derive


def sharding(value: Any) -> Any:
    """RLinf's full_shard is ours (fsdp_size -1: shard over every rank)."""
    if value in (None, "full_shard"):
        return -1
    return Unsupported(
        f"sharding_strategy {value!r}: rl shards fully, or hybrid with fsdp_config.fsdp_size"
    )


def optim_precision(section: str, flag: str) -> Any:
    """megatron's optim.fp16 / optim.bf16, which RLinf derives from model.precision when
    unset: set against the precision, megatron trains in the flag's dtype, which rl's
    model.dtype (from the precision) would not. None: it agrees (or FSDP, which does not
    read it)."""

    def derive(flat: Mapping[str, Any]) -> Any:
        value = flat.get(f"{section}.optim.{flag}")
        if value is None or flat.get(f"{section}.training_backend") != "megatron":
            return None
        precision = dtype(flat.get(f"{section}.model.precision"))
        implied = precision == {"fp16": "float16", "bf16": "bfloat16"}[flag]
        if bool(value) == implied:
            return None
        return Unsupported(
            f"{section}.optim.{flag} = {value} against model.precision "
            f"{flat.get(f'{section}.model.precision')!r}: rl trains in the precision's dtype "
            "(set both alike)"
        )

    return derive
