"""Hugging Face folders <-> megatron-core distributed checkpoints (`rl convert-ckpt`).

A distributed checkpoint stores each tensor in whole-model coordinates, so one written
here in a single process (TP = PP = 1) loads at any TP / PP / EP layout, and one written
by a training run at any layout converts back. The folder holds `dist/` (megatron's
dist-checkpointing files, the model under `model0.`) and the HF `config.json` the model
was built from; `actor.megatron.use_dist_checkpointing` starts training from it, and a
training checkpoint's `actor/` folder is one too. No forward pass runs, so no GPU is
needed (`compat.checkpoint_writes_without_cuda` lets megatron's writer run without one).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from rl.core.file_modes import save_safetensors

MODEL_KEY = "model0"  # the engine's checkpoints name their (first) model chunk so too


def _single_process_model(hf_config: Any) -> torch.nn.Module:
    """The whole model in this process (a world of one; megatron's groups at size 1)."""
    import torch.distributed as dist

    from rl.core.distributed import ensure_process_group
    from rl.megatron.config import MegatronConfig
    from rl.megatron.model import build_gpt_model, resolve_spec
    from rl.megatron.parallel import init_model_parallel

    ensure_process_group("cpu")
    if dist.get_world_size() != 1:
        raise RuntimeError("rl convert-ckpt runs in one process")
    init_model_parallel(MegatronConfig(), seed=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_gpt_model(hf_config, spec=resolve_spec("auto"), use_cpu_initialization=True)


def hf_to_dist(hf_folder: str | Path, out: str | Path) -> Path:
    """Write the HF folder's weights as a megatron distributed checkpoint in `out`."""
    from transformers import AutoConfig

    from megatron.core import dist_checkpointing
    from rl.megatron.layouts import converter_for
    from rl.megatron.model import resolve_spec
    from rl.megatron.weights import checkpoint_tensors, load_hf

    source, target = Path(hf_folder), Path(out)
    hf_config = AutoConfig.from_pretrained(source)
    model = _single_process_model(hf_config)
    load_hf(model, converter_for(hf_config, spec=resolve_spec("auto")), checkpoint_tensors(source))
    from rl.megatron.compat import checkpoint_writes_without_cuda

    (target / "dist").mkdir(parents=True, exist_ok=True)
    with checkpoint_writes_without_cuda():
        dist_checkpointing.save({MODEL_KEY: model.sharded_state_dict()}, str(target / "dist"))
    hf_config.save_pretrained(target)
    return target


def load_dist_model(model: torch.nn.Module, folder: str | Path, critic: bool = False) -> bool:
    """Fill `model` (this rank's part, any layout) from a distributed checkpoint folder.
    A `critic` takes the backbone, and the head only when the checkpoint's output layer
    is a value head (a critic's checkpoint; a language model's is not): returns whether
    the head was loaded (if not, the caller initialises it)."""
    from megatron.core import dist_checkpointing

    path = Path(folder) / "dist"
    if not path.is_dir():
        raise FileNotFoundError(
            f"{folder} is not a megatron checkpoint (no dist/ inside): write one with "
            "`rl convert-ckpt --to megatron HF_FOLDER OUT`"
        )
    sharded = model.sharded_state_dict()
    with_head = True
    if critic:
        saved = dist_checkpointing.load_tensors_metadata(str(path)).get("output_layer.weight")
        with_head = saved is not None and saved.global_shape[0] == 1
        if not with_head:
            sharded = {k: v for k, v in sharded.items() if not k.startswith("output_layer.")}
    loaded = dist_checkpointing.load({MODEL_KEY: sharded}, str(path))
    missing, unexpected = model.load_state_dict(loaded[MODEL_KEY], strict=with_head)
    left = [key for key in missing if not key.startswith("output_layer.")]
    if left or unexpected:
        raise ValueError(f"{folder}: not in the checkpoint {left}; not in the model {unexpected}")
    return with_head


def dist_to_hf(folder: str | Path, out: str | Path) -> Path:
    """Write a distributed checkpoint's model (any layout wrote it) as an HF folder."""
    from transformers import AutoConfig

    from rl.megatron.layouts import converter_for
    from rl.megatron.model import resolve_spec
    from rl.megatron.weights import export_hf, export_plan

    source, target = Path(folder), Path(out)
    if not (source / "config.json").is_file():
        raise FileNotFoundError(f"{source} has no config.json (the HF config of its model)")
    hf_config = AutoConfig.from_pretrained(source)
    model = _single_process_model(hf_config)
    load_dist_model(model, source)
    converter = converter_for(hf_config, spec=resolve_spec("auto"))
    tensors = {
        name: tensor.contiguous()
        for name, tensor in export_hf(model, converter, torch.device("cpu"), export_plan(model))
    }
    target.mkdir(parents=True, exist_ok=True)
    save_safetensors(tensors, target / "model.safetensors", {"format": "pt"})
    hf_config.save_pretrained(target)
    return target
