python3 -m verl.trainer.main_ppo --config-path=. --config-name=grpo \
    actor_rollout_ref.model.path=$HOME/models/qwen trainer.default_local_dir=${CKPT_DIR}
