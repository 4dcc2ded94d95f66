#!/usr/bin/env bash
# A verl-style launch script written for rl's importer tests: verl's built-in config (no
# --config-path: it comes from the installed verl), data under $HOME, the date in the
# experiment name, batch sizes from $(( )), and "$@" before the script's last word.
set -xeuo pipefail

NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
n_resp=4
train_prompt_bsz=$((NNODES * GPUS_PER_NODE * 2))
max_prompt_length=$((256 * 2))
max_response_length=$((1024 * 1))
DATA_DIR=${DATA_DIR:-$HOME/data/gsm8k}
project_name=verl_grpo_example_gsm8k
experiment_name="qwen_grpo_$(date +%Y%m%d)"

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$DATA_DIR/train.parquet" \
    data.val_files="$DATA_DIR/test.parquet" \
    data.train_batch_size=${train_prompt_bsz} \
    data.max_prompt_length=$max_prompt_length \
    data.max_response_length=$max_response_length \
    actor_rollout_ref.model.path=builtin:tiny-qwen2 \
    actor_rollout_ref.actor.ppo_mini_batch_size=$((train_prompt_bsz / 2)) \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$(((max_prompt_length + max_response_length) * 2)) \
    actor_rollout_ref.rollout.n=$n_resp \
    trainer.project_name="$project_name" \
    trainer.experiment_name="$experiment_name" \
    trainer.nnodes=$NNODES \
    "$@" \
    trainer.total_epochs=2 2>&1 | tee "verl_demo_$(date +%s).log"
