"""What a local Hugging Face folder must hold to load, checked before anything loads.

- A tokenizer: a model folder exported without one (only config.json and weights) loads
  in transformers 5 as an empty tokenizer that encodes every prompt to no tokens, and
  the run died in its first forward. Refused naming the folder and `model.tokenizer_path`
  (verl's `actor_rollout_ref.model.tokenizer_path`), which points elsewhere.
- Remote code: a config.json whose `auto_map` names classes transformers does not ship
  runs the folder's own Python only with `model.trust_remote_code: true` (verl's
  `actor_rollout_ref.model.trust_remote_code`). Refused in one line naming that key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rl.core.config import ConfigError

# any one of these makes a tokenizer transformers can build (fast, sentencepiece, BPE
# vocab + merges, WordPiece, tiktoken)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
    "tokenizer.tiktoken",
)
TOKENIZER_HINT = (
    "copy the tokenizer files (tokenizer.json, tokenizer_config.json, ...) of the base model "
    "into it, or set model.tokenizer_path to a folder or Hub id that has them"
)


def has_tokenizer_files(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES) or any(
        folder.glob("*.tiktoken")
    )


def check_tokenizer_folder(folder: Path, key: str, value: str) -> None:
    """Refuse a local folder `folder` (the value of `key`) that holds no tokenizer files."""
    if folder.is_dir() and not has_tokenizer_files(folder):
        raise ConfigError(
            f"{key} = {value!r}: the folder {folder} has no tokenizer files (none of "
            f"{', '.join(TOKENIZER_FILES)}); {TOKENIZER_HINT}"
        )


def check_tokenizer_encodes(tokenizer: Any, key: str, value: str) -> None:
    """Refuse a loaded tokenizer that encodes plain text to no tokens (an empty one)."""
    if not tokenizer("Hello world", add_special_tokens=False).input_ids:
        raise ConfigError(
            f"{key} = {value!r}: its tokenizer is empty (it encodes text to no tokens); "
            f"{TOKENIZER_HINT}"
        )


def remote_code_classes(folder: Path) -> dict[str, Any]:
    """config.json's `auto_map` when its `model_type` is one transformers does not ship."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}  # no or unreadable config.json: check_model_path and the loader say so
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    if not isinstance(auto_map, dict) or not auto_map:
        return {}
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return {} if config.get("model_type") in CONFIG_MAPPING_NAMES else auto_map


def check_remote_code(folder: Path, value: str, trust_remote_code: bool) -> None:
    """Refuse a folder whose model needs its own code unless `model.trust_remote_code`."""
    if trust_remote_code or not folder.is_dir():
        return
    classes = remote_code_classes(folder)
    if classes:
        raise ConfigError(
            f"model.path = {value!r} needs the Python code in its folder "
            f"(config.json auto_map: {', '.join(sorted(classes))}); set "
            "model.trust_remote_code=true if you trust that code"
        )


def remote_code_refusal(error: Exception, value: str) -> ConfigError | None:
    """transformers' refusal to run a model's own code, as one line naming the key."""
    if "trust_remote_code" not in str(error):
        return None
    return ConfigError(
        f"model.path = {value!r} needs the Python code in its folder (or repo); set "
        "model.trust_remote_code=true if you trust that code"
    )
