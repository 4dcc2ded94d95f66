#!/usr/bin/env bash
# A verl-style launch script written for rl's importer tests: continuations, an array,
# defaults, exports, the config folder as the script's own (absolute, as Hydra needs it
# when verl is not installed), a variable the script never sets (OUTPUT_ROOT) only in a
# comment, "$@" where the user's overrides go.
set -x
export VLLM_USE_V1=1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODEL=${MODEL_PATH:-builtin:tiny-qwen2}
N_RESP=4
lr="1e-6"
data_args=(
    data.train_batch_size=64   # rows per step
    data.max_prompt_length=512
)

PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \
    --config-path="$HERE" \
    --config-name=grpo \
    actor_rollout_ref.model.path=$MODEL \
    actor_rollout_ref.actor.optim.lr=${lr} \
    actor_rollout_ref.rollout.n=$N_RESP \
    "${data_args[@]}" \
    "data.val_files=['a.parquet','b.parquet']" \
    +trainer.total_training_steps=3 \
    ~global_profiler $@ 2>&1 | tee log.txt
