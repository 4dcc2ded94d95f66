"""Build the policy, reference and critic models and the tokenizer from `model.*` config.

`model.path` is the built-in tiny model, a local Hugging Face folder (`~` expands) or a
Hub id; `check_model_path` refuses one that cannot load without loading anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from rl.core.config import ConfigError, ModelConfig
from rl.core.config.paths import user_path
from rl.core.models.folder_checks import (
    check_remote_code,
    check_tokenizer_encodes,
    check_tokenizer_folder,
    remote_code_refusal,
)
from rl.core.models.rope import reset_rotary_buffers
from rl.core.models.tiny import build_char_tokenizer, tiny_qwen2_config

BUILTIN_TINY = "builtin:tiny-qwen2"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# What the Hub accepts as a repo id: `name` or `org/name`.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
T = TypeVar("T")


def _hub_offline() -> bool:
    """huggingface_hub's rule, read now (its constant is fixed when it is imported)."""
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return any((flag or "").upper() in {"1", "ON", "YES", "TRUE"} for flag in flags)


def _in_hub_cache(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def check_model_path(path: str, key: str, builtins: tuple[str, ...] = (BUILTIN_TINY,)) -> None:
    """Refuse a model path that cannot load, naming `key`; loads nothing, reaches no network.

    Allowed: one of `builtins`; a local folder holding config.json (`~` expands); a Hub id
    (`org/name`) that is no local path — online it may download, offline (HF_HUB_OFFLINE)
    it must be in the Hugging Face cache.
    """
    if path.startswith("builtin:"):
        if path in builtins:
            return
        only = f"the only built-in model is {builtins[0]!r}" if builtins else "no built-in model"
        raise ConfigError(f"{key} = {path!r} is not allowed: {only}")
    local = user_path(path)
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ConfigError(
                f"{key} = {path!r} has no config.json: not a Hugging Face model folder"
            )
        return
    if local.exists():
        raise ConfigError(f"{key} = {path!r} is a file; point it at a Hugging Face model folder")
    if not _HUB_ID.fullmatch(path):
        raise ConfigError(f"{key} = {path!r} does not exist")
    if _hub_offline() and not _in_hub_cache(path):
        raise ConfigError(
            f"{key} = {path!r} is not a local folder, and with HF_HUB_OFFLINE set it must be "
            "in the Hugging Face cache, which lacks it"
        )


def _source(config: ModelConfig) -> str:
    """Where `from_pretrained` reads the model: the local folder with `~` expanded, else the id."""
    local = user_path(config.path)
    return str(local) if local.is_dir() else config.path


def _pretrained(
    config: ModelConfig, load: Callable[[str], T], key: str = "model.path", path: str = ""
) -> T:
    """`load(source)`, its OSError (no such repo, missing files) as a ConfigError on `key`
    (model.path, or model.tokenizer_path with `path`), and transformers' refusal to run
    remote code as one line naming model.trust_remote_code."""
    value = path or config.path
    try:
        return load(str(user_path(value)) if user_path(value).is_dir() else value)
    except OSError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ConfigError(f"{key} = {value!r} could not be loaded: {reason}") from error
    except ValueError as error:
        refusal = remote_code_refusal(error, value)
        if refusal is None:
            raise
        raise refusal from error


def tokenizer_source(config: ModelConfig) -> tuple[str, str]:
    """(key, value) the tokenizer is read from: model.tokenizer_path when set, else model.path."""
    if config.tokenizer_path is not None:
        return "model.tokenizer_path", config.tokenizer_path
    return "model.path", config.path


def check_model_folder(config: ModelConfig) -> None:
    """Refuse a local model folder without tokenizer files (where model.tokenizer_path does
    not point elsewhere) or whose model needs remote code that is not trusted."""
    if config.path.startswith("builtin:"):
        if config.tokenizer_path is not None:
            raise ConfigError(
                f"model.tokenizer_path = {config.tokenizer_path!r} is for a Hugging Face "
                f"model; {config.path} has its own tokenizer (unset model.tokenizer_path)"
            )
        return
    check_remote_code(user_path(config.path), config.path, config.trust_remote_code)
    key, value = tokenizer_source(config)
    if key == "model.tokenizer_path":
        check_model_path(value, key)
    check_tokenizer_folder(user_path(value), key, value)


def _check_path(config: ModelConfig) -> None:
    if config.path.startswith("builtin:"):
        check_model_path(config.path, "model.path")


def load_tokenizer(config: ModelConfig) -> Any:
    """The tokenizer of `model.path` (left padding, a pad token always set)."""
    _check_path(config)
    if config.path == BUILTIN_TINY:
        return build_char_tokenizer()
    from transformers import AutoTokenizer

    check_model_folder(config)
    key, value = tokenizer_source(config)
    tokenizer = _pretrained(
        config,
        lambda source: AutoTokenizer.from_pretrained(
            source, trust_remote_code=config.trust_remote_code, padding_side="left"
        ),
        key,
        value,
    )
    check_tokenizer_encodes(tokenizer, key, value)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.custom_chat_template is not None:  # verl's model.custom_chat_template
        tokenizer.chat_template = config.custom_chat_template
    return tokenizer


def load_model_config(config: ModelConfig, tokenizer: Any) -> Any:
    """The transformers config of `model.path` (the built-in model's is made in code)."""
    _check_path(config)
    return _model_config(config, tokenizer)


def model_source(config: ModelConfig) -> str | None:
    """The local folder or Hub id of `model.path`; None for a built-in model (no files)."""
    return None if config.path.startswith("builtin:") else _source(config)


def _model_config(config: ModelConfig, tokenizer: Any) -> Any:
    if config.path == BUILTIN_TINY:
        return tiny_qwen2_config(
            config.tiny, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id
        )
    from transformers import AutoConfig

    return _pretrained(
        config,
        lambda source: AutoConfig.from_pretrained(
            source, trust_remote_code=config.trust_remote_code
        ),
    )


def load_causal_lm(
    config: ModelConfig, tokenizer: Any, seed: int = 0, empty: bool = False
) -> torch.nn.Module:
    """The causal LM of `model.path`; the built-in one gets seeded random weights.

    `empty`: the architecture only, on the meta device (no weights read or allocated),
    for ranks that receive their shards from rank 0.
    """
    _check_path(config)
    from rl.core.models.vision_models import model_class

    dtype = DTYPES[config.dtype]
    model_config = _model_config(config, tokenizer)
    auto = model_class(model_config)  # a vision-language folder: image-text-to-text
    if empty:
        with torch.device("meta"):
            model = auto.from_config(
                model_config, dtype=dtype, trust_remote_code=config.trust_remote_code
            )
    elif config.path == BUILTIN_TINY:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = auto.from_config(model_config, dtype=dtype)
    else:
        model = _pretrained(
            config,
            lambda source: auto.from_pretrained(
                source, dtype=dtype, trust_remote_code=config.trust_remote_code
            ),
        )
    if not empty:
        reset_rotary_buffers(model)  # never trust a non-persistent buffer after loading
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model


def allocate_unread(model: torch.nn.Module, device: str | torch.device) -> torch.nn.Module:
    """A model built on the meta device (`load_causal_lm(..., empty=True)`) given storage
    on `device` that is never read nor written here: a rollout engine whose weights the
    first weight sync fills (`rollout.load_format=dummy`) costs no copy of them read from
    disk, and on CPU no resident memory until they are written (or replaced by the
    trainer's own tensors). Tied parameters stay one; rotary frequencies are computed."""
    # imported here: weight_sync (its transports, buckets) is not needed to load a model
    from rl.core.weight_sync.ties import retie, tied_aliases

    aliases = tied_aliases(model)
    model = model.to_empty(device=device)
    retie(model, aliases)
    reset_rotary_buffers(model)
    return model


def load_value_model(
    config: ModelConfig, tokenizer: Any, seed: int = 0, empty: bool = False
) -> torch.nn.Module:
    """A critic: the same backbone with a one-output token-classification (value) head
    (`empty`: on the meta device, as for `load_causal_lm`)."""
    _check_path(config)
    from transformers import AutoModelForTokenClassification

    model_config = _model_config(config, tokenizer)
    from rl.core.models.vision_models import is_vision_language

    if is_vision_language(model_config):
        from rl.core.errors import ConfigError

        raise ConfigError(
            f"a critic of the vision-language model {config.path}: value models of those "
            "are not built yet; use a critic-free estimator (algorithm.adv_estimator: grpo, "
            "rloo, reinforce_plus_plus, ...)"
        )
    model_config.num_labels = 1
    # HF's token-classification head drops 10 % of the hidden state in training by default:
    # values would be noisy in the update and not in the forward pass (verl sets it to 0)
    model_config.classifier_dropout = 0.0
    dtype = DTYPES[config.dtype]
    if empty:
        with torch.device("meta"):
            return AutoModelForTokenClassification.from_config(
                model_config, dtype=dtype, trust_remote_code=config.trust_remote_code
            )
    with torch.random.fork_rng():
        torch.manual_seed(seed + 1)
        if config.path == BUILTIN_TINY:
            model = AutoModelForTokenClassification.from_config(model_config, dtype=dtype)
        else:
            model = _pretrained(
                config,
                lambda source: AutoModelForTokenClassification.from_pretrained(
                    source,
                    config=model_config,
                    dtype=dtype,
                    trust_remote_code=config.trust_remote_code,
                ),
            )
    reset_rotary_buffers(model)  # never trust a non-persistent buffer after loading
    return model
