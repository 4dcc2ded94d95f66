"""Loading `model.path`: `~` expands, and a folder or Hub id that does not load is a one-line
ConfigError naming the key (not an OSError with a traceback)."""

import json

import pytest

from rl.core.config import ConfigError, ModelConfig
from rl.core.models import build_char_tokenizer, load_causal_lm, load_tokenizer


def test_a_folder_without_weights_names_the_key(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    with pytest.raises(ConfigError) as error:
        load_causal_lm(ModelConfig(path=str(tmp_path)), build_char_tokenizer())
    message = str(error.value)
    assert message.startswith(f"model.path = '{tmp_path}' could not be loaded: ")
    assert "\n" not in message


def test_home_expands(tmp_path, monkeypatch):
    tokenizer = build_char_tokenizer()
    model = load_causal_lm(ModelConfig(), tokenizer)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    monkeypatch.setenv("HOME", str(tmp_path))
    config = ModelConfig(path="~/m")
    assert load_tokenizer(config).pad_token_id is not None
    assert load_causal_lm(config, tokenizer).config.model_type == "qwen2"
