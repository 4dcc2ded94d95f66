# A launch script whose command needs values rl cannot know: a variable set nowhere
# (CKPT_DIR, unless exported) and a command rl does not run (git). $HOME comes from the
# environment, as in bash.
RUN_ID=$(git rev-parse --short HEAD)
python3 -m verl.trainer.main_ppo --config-path=/opt/verl/config --config-name=grpo \
    actor_rollout_ref.model.path=$HOME/models/qwen trainer.default_local_dir=${CKPT_DIR} \
    trainer.experiment_name=grpo-$RUN_ID
