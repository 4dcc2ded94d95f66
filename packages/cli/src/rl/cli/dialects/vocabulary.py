"""What the dialect tables say the same way: one wording per reason, whichever system a key
comes from (the report of `rl convert` and docs/config-dialects.md read alike across
dialects), and the rules more than one table holds."""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, off_when

CRITIC_WARMUP = "critic warm-up steps are not in rl yet"
DATACLASS_PATH = "verl's dataclass class path"
DECODER_LAYER_WRAP = "rl wraps each decoder layer itself"
ENGINE_INTERNAL = "an engine-internal setting rl chooses itself"
LORA = "LoRA is not in rl yet (full-parameter only)"
LORA_MERGED_SYNC = (
    "rl syncs LoRA to the rollout engine as merged weights (W + alpha/r B A) and checks "
    "each sync (docs/lora.md)"
)
LORA_VARIANTS = "only plain LoRA is in rl (DoRA, canonical and VLM LoRA are not)"
MEGATRON_LORA = "LoRA on the megatron engine is not in rl (the FSDP engine's is: model.lora_rank)"
MEGATRON_LORA_SECTION = (
    "verl's megatron LoRA section, read only with lora.rank > 0 (refused); rl's LoRA is "
    "lora_rank / lora_alpha / target_modules"
)
MBRIDGE = "rl converts HF <-> megatron weights itself (rl.megatron.layouts)"
MODEL_FROM_DISK = "rl reads model.path from disk"
MTP = "multi-token prediction is not in rl"
OUTPUT_DIR_LOGS = "rl logs under trainer.output_dir"
PROFILING = "profiling is not configured in rl's config (use the torch profiler directly)"
REF_LAYOUT = "rl runs the reference with the actor's model, dtype and parallel layout"
ROLLOUT_TP_ONLY = "rl's rollout is tensor-parallel only"
ROUTER_REPLAY = (
    "rl replays MoE routes in the actor only (actor.router_replay.mode); the reference and "
    "the critic route as the model does"
)
ROUTE_FILES = "rl keeps recorded routes in the batch and writes or reads no route files"
ROLLOUT_ROUTES = "rl's rollout engine records routes exactly when actor.router_replay.mode=R3"
SEEDED_BY_TRAINER = "rl seeds every role from trainer.seed"
TOKENIZER_FROM_MODEL = "rl reads the tokenizer from model.path"
VAL_GENERATIONS = "rl keeps validation generations in val_generations.jsonl"
WEIGHT_SYNC_EVERY_UPDATE = "rl syncs the rollout weights after every update"


# megatron-core's parallel layout, as ROLL's and RLinf's megatron blocks name it
MEGATRON_PARALLEL_KEYS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "sequence_parallel",
)


def schedule_shape_rules(optim: str) -> list[Rule]:
    """verl's LR-schedule shape keys under `optim` (a prefix): rl's schedule is verl's
    default one (the half cosine, steps counted from 0); another shape is refused."""
    return [
        Rule(
            optim + "num_cycles",
            reason="rl's cosine schedule is the half cosine (num_cycles 0.5)",
            convert=off_when(0.5),
        ),
        Rule(
            optim + "zero_indexed_step",
            reason="rl's schedule counts steps from 0, as verl's default",
            convert=off_when(True),
        ),
    ]


def ddp_overlap_rules(prefix: str, ours: str) -> list[Rule]:
    """Megatron's DDP overlap switches under `prefix` (a role's megatron block upstream),
    as `<ours>.megatron.override_ddp_config.*`."""
    return [
        Rule(prefix + key, f"{ours}.megatron.override_ddp_config.{key}")
        for key in ("overlap_grad_reduce", "overlap_param_gather")
    ]
