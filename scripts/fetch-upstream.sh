#!/usr/bin/env bash
# Fetch the upstream systems' released packages that the tests read as they are: verl's
# config files (composed by `rl convert --from verl`) and its reward functions (the oracle
# for rl's verl-compatible scorers). Each release goes into .upstream/<name>-<version>/ with
# pip's --target and --no-deps: nothing of it is imported by rl itself, and its
# dependencies are not installed. Run by scripts/install-dev.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# every release a user may be on, 0.4.1 to the newest (tests/dialects/test_verl_releases.py)
VERL_VERSIONS=(0.4.1 0.5.0 0.6.0 0.6.1 0.7.0 0.7.1 0.8.0 0.9.0 0.9.1)
for version in "${VERL_VERSIONS[@]}"; do
  target=".upstream/verl-$version"
  if [ -f "$target/verl/trainer/config/ppo_trainer.yaml" ]; then
    continue
  fi
  rm -rf "$target"
  python -m pip install --quiet --no-deps --no-compile --target "$target" "verl==$version"
done
# RLinf's math verifier (the oracle of rl's rlinf_math scorer), with the two packages it
# imports that rl does not install (its LaTeX parser and word2number)
target=".upstream/rlinf-0.3.0"
if [ ! -f "$target/rlinf/algorithms/rewards/math/math_verifier/verify.py" ]; then
  rm -rf "$target"
  python -m pip install --quiet --no-deps --no-compile --target "$target" \
    "rlinf==0.3.0" "rlinf_latex2sympy2==1.9.0" "word2number==1.1"
fi
# ChatLearn's release: its rule reward (chatlearn/utils/rule_reward_score), the oracle for
# rl.core.rewards.chatlearn_rule
CHATLEARN_VERSION=1.2.0
target=".upstream/pai-chatlearn-$CHATLEARN_VERSION"
if [ ! -f "$target/chatlearn/utils/rule_reward_score/math.py" ]; then
  rm -rf "$target"
  python -m pip install --quiet --no-deps --no-compile --target "$target" \
    "pai-chatlearn==$CHATLEARN_VERSION"
fi
