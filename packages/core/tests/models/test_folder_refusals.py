"""Model folders that cannot train are refused in one line naming the folder and the key
that fixes it: no tokenizer files (model.tokenizer_path points elsewhere; the run died in
its first forward with "cannot reshape tensor of 0 elements") and a model needing its own
code (model.trust_remote_code), before any model loads and again where it loads."""

import json
import shutil

import pytest

from rl.core.config import ConfigError, ModelConfig, load_config
from rl.core.errors import UserError
from rl.core.models.loading import load_model_config, load_tokenizer
from rl.core.trainer.preflight import preflight

SMALL = {"hidden_size": 256, "intermediate_size": 512}  # shared with test_model_folders


@pytest.fixture(scope="module")
def full(model_folder):
    return model_folder("qwen3-0.6b", **SMALL)


@pytest.fixture
def bare(full, tmp_path):
    """The model folder as some exports leave it: config, no tokenizer files."""
    folder = tmp_path / "exported"
    folder.mkdir()
    for name in ("config.json", "generation_config.json"):
        shutil.copy(full / name, folder / name)
    return folder


def one_line(error):
    message = str(error.value)
    assert isinstance(error.value, UserError) and "\n" not in message, message
    return message


def test_a_folder_without_tokenizer_files_is_refused_at_preflight_and_load(bare):
    with pytest.raises(ConfigError) as error:
        preflight(load_config(overrides=[f"model.path={bare}"]))
    message = one_line(error)
    assert f"the folder {bare} has no tokenizer files" in message
    assert "set model.tokenizer_path" in message
    with pytest.raises(ConfigError) as error:
        load_tokenizer(ModelConfig(path=str(bare)))
    assert f"model.path = {str(bare)!r}" in one_line(error)


def test_model_tokenizer_path_points_elsewhere(bare, full):
    config = ModelConfig(path=str(bare), tokenizer_path=str(full))
    preflight(load_config(overrides=[f"model.path={bare}", f"model.tokenizer_path={full}"]))
    tokenizer = load_tokenizer(config)
    assert tokenizer("Hello world").input_ids  # the real tokenizer, not an empty one
    with pytest.raises(ConfigError) as error:
        load_tokenizer(ModelConfig(path=str(full), tokenizer_path=str(bare)))
    assert one_line(error).startswith(f"model.tokenizer_path = {str(bare)!r}: the folder")


def test_an_empty_tokenizer_is_refused_when_it_loads(bare):
    """What a Hub id without tokenizer files gives (no folder to look into first)."""
    from transformers import AutoTokenizer

    from rl.core.models.folder_checks import check_tokenizer_encodes

    empty = AutoTokenizer.from_pretrained(str(bare))
    with pytest.raises(ConfigError) as error:
        check_tokenizer_encodes(empty, "model.path", "org/exported")
    assert "its tokenizer is empty" in one_line(error)


def test_the_builtin_model_takes_no_tokenizer_path(full):
    with pytest.raises(ConfigError) as error:
        preflight(load_config(overrides=[f"model.tokenizer_path={full}"]))
    assert "unset model.tokenizer_path" in one_line(error)


@pytest.fixture
def remote(full, tmp_path):
    """A folder whose config class is its own code (config.json auto_map)."""
    folder = tmp_path / "remote"
    shutil.copytree(full, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    config |= {
        "model_type": "my_remote_lm",
        "auto_map": {"AutoConfig": "configuration_my.MyConfig"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_my.py").write_text(
        "from transformers import Qwen3Config\n\n\n"
        "class MyConfig(Qwen3Config):\n"
        '    model_type = "my_remote_lm"\n'
    )
    return folder


def test_a_model_needing_remote_code_names_trust_remote_code(remote):
    with pytest.raises(ConfigError) as error:
        preflight(load_config(overrides=[f"model.path={remote}"]))
    message = one_line(error)
    assert "auto_map: AutoConfig" in message and "model.trust_remote_code=true" in message
    # where it loads (a path that skipped preflight): transformers' refusal, as one line
    with pytest.raises(ConfigError) as error:
        load_model_config(ModelConfig(path=str(remote)), None)
    assert "set model.trust_remote_code=true" in one_line(error)


def test_trust_remote_code_runs_the_folders_code(remote):
    preflight(load_config(overrides=[f"model.path={remote}", "model.trust_remote_code=true"]))
    config = load_model_config(ModelConfig(path=str(remote), trust_remote_code=True), None)
    assert type(config).__name__ == "MyConfig" and config.model_type == "my_remote_lm"
