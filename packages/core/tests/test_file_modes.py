"""Weights the run writes follow the user's umask like any file: safetensors writes its
files 0600 through a private temporary file, so exports and checkpoints were unreadable
to the user's group whatever the umask."""

import os
import stat

import pytest
import torch

from rl.core.checkpoint_io import load_weights, save_weights
from rl.core.file_modes import current_umask, file_mode, follow_umask, save_safetensors


@pytest.fixture(params=[(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def umask(request):
    mask, expected = request.param
    previous = os.umask(mask)
    try:
        yield expected
    finally:
        os.umask(previous)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_umask_is_read_without_changing_it(umask):
    before = os.umask(0o022)
    os.umask(before)
    assert current_umask() == before and file_mode() == umask
    assert current_umask() == before


def test_safetensors_files_follow_the_umask(umask, tmp_path):
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2)}, str(tmp_path / "raw.safetensors"))
    plain = tmp_path / "plain.txt"
    plain.write_text("a")
    assert mode(plain) == umask  # what any file gets
    assert mode(tmp_path / "raw.safetensors") == 0o600  # what safetensors does on its own
    save_safetensors({"x": torch.ones(2)}, tmp_path / "ours.safetensors", {"format": "pt"})
    assert mode(tmp_path / "ours.safetensors") == umask


def test_checkpoint_weights_follow_the_umask(umask, tmp_path):
    save_weights({"w": torch.arange(3.0)}, tmp_path / "model.safetensors")
    assert mode(tmp_path / "model.safetensors") == umask
    assert torch.equal(load_weights(tmp_path / "model.safetensors")["w"], torch.arange(3.0))


def test_an_hf_export_folder_follows_the_umask(umask, tmp_path):
    from rl.core.config import ModelConfig
    from rl.core.models import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(ModelConfig())
    folder = tmp_path / "hf"
    load_causal_lm(ModelConfig(), tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert mode(folder / "model.safetensors") == 0o600  # transformers through safetensors
    follow_umask(folder)
    assert {p.name: mode(p) for p in folder.iterdir()} == {p.name: umask for p in folder.iterdir()}
