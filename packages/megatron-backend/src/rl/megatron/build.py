"""This rank's model chunks (one per virtual pipeline stage) and their first weights.

`build_chunks` builds the chunks with the layout's parallelism (megatron's
`TransformerConfig` from the HF config and `megatron.*`); `load_initial_weights` fills them
from a safetensors folder (each rank reads only its slices), a stream of HF tensors (a
built-in model) or, with `megatron.use_dist_checkpointing`, a distributed checkpoint.
`hf_folder` and `hf_weights` say where a run's weights come from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch

from rl.core.config import ConfigError
from rl.megatron.config import MegatronConfig
from rl.megatron.convert import load_dist_model
from rl.megatron.layouts import LayoutConverter
from rl.megatron.logprobs import unwrap
from rl.megatron.model import build_gpt_model, transformer_config
from rl.megatron.slices import load_hf_slices
from rl.megatron.weights import initial_value_head, load_hf, set_value_head

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def known_fields(cls: type, values: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`values` if every key is a field of the megatron dataclass `cls`, else ConfigError."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(
            f"{key}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not "
            f"{cls.__name__} field(s) of megatron-core"
        )
    return dict(values)


def transformer_overrides(
    m: MegatronConfig, dtype: torch.dtype, device: torch.device, section: str
) -> dict[str, Any]:
    """The `TransformerConfig` fields the layout sets, `override_transformer_config` last."""
    from megatron.core.transformer import TransformerConfig

    tp = m.tensor_model_parallel_size
    options: dict[str, Any] = dict(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=m.pipeline_model_parallel_size,
        virtual_pipeline_model_parallel_size=m.virtual_pipeline_model_parallel_size,
        context_parallel_size=m.context_parallel_size,
        sequence_parallel=m.sequence_parallel and tp > 1,
        expert_model_parallel_size=m.expert_model_parallel_size,
        expert_tensor_parallel_size=m.expert_tensor_parallel_size or tp,
        # packed micro-batches differ in length: pipeline stages send shapes first
        variable_seq_lengths=m.pipeline_model_parallel_size > 1,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        use_cpu_initialization=device.type != "cuda",
    )
    # ranks' micro-batches differ in tokens; megatron's (default) allgather dispatcher
    # assumes they do not (dense models ignore the setting)
    options["moe_token_dispatcher_type"] = "alltoall"
    key = f"{section}.megatron.override_transformer_config"
    options.update(known_fields(TransformerConfig, m.override_transformer_config, key))
    dispatcher = options.get("moe_token_dispatcher_type")
    if dispatcher == "allgather" and m.expert_model_parallel_size > 1:
        raise ConfigError(
            f"{key}.moe_token_dispatcher_type = 'allgather' gathers equal token counts from "
            "every expert-parallel rank, but RL micro-batches differ in length: use alltoall"
        )
    return options


def build_chunks(
    hf_config: Any,
    m: MegatronConfig,
    spec: str,
    dtype: torch.dtype,
    device: torch.device,
    critic: bool,
    section: str,
) -> tuple[list[torch.nn.Module], Any]:
    """This rank's model chunks (one per virtual pipeline stage; a critic's end in a
    `ValueHead`), in `dtype` on `device`, and their `TransformerConfig`. The model
    parallel groups must exist (`rl.megatron.parallel.init_model_parallel`)."""
    from megatron.core import parallel_state as ps

    vpp = m.virtual_pipeline_model_parallel_size
    overrides = transformer_overrides(m, dtype, device, section)
    tf_config = transformer_config(hf_config, dtype, **overrides)
    chunks = []
    for stage in range(vpp or 1):
        vp_stage = stage if vpp else None
        model = build_gpt_model(
            hf_config,
            spec=spec,
            params_dtype=dtype,
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
            vp_stage=vp_stage,
            value_head=critic,
            **overrides,
        ).to(device)
        if dtype != torch.float32:
            from megatron.core.transformer.module import Float16Module

            model = Float16Module(model.config, model)
        chunks.append(model)
    return chunks, tf_config


def load_initial_weights(
    chunks: list[torch.nn.Module],
    m: MegatronConfig,
    converter: LayoutConverter,
    hf_config: Any,
    seed: int,
    critic: bool,
    folder: Path | None,
    stream: Callable[[], Iterable[tuple[str, torch.Tensor]]],
) -> list[tuple[str, tuple[int, ...]]]:
    """Fill each chunk with its layers' weights: from `m.dist_checkpointing_path`
    (resharded to this layout as it loads), else from the safetensors `folder`, else from
    the HF tensors `stream()` yields. A critic without a head in its source gets a new one
    (`initial_value_head`). Returns the HF blocks read from `folder` (name, shape)."""
    head = partial(initial_value_head, hf_config, seed)
    read: list[tuple[str, tuple[int, ...]]] = []
    for chunk in chunks:  # each virtual stage takes its own layers
        model = unwrap(chunk)
        if m.use_dist_checkpointing:
            path = str(m.dist_checkpointing_path)
            if not load_dist_model(model, path, critic=critic):
                set_value_head(dict(model.named_parameters()), head())
        elif folder is not None:
            read += load_hf_slices(model, converter, folder, critic, head)
        else:
            load_hf(model, converter, stream(), critic, head)
    return read


def hf_folder(model: Any) -> Path | None:
    """`model.path` when it is a folder of safetensors files (read slice by slice)."""
    from rl.core.models import model_source

    source = model_source(model)
    if source is not None and any(Path(source).glob("*.safetensors")):
        return Path(source)
    return None


def hf_weights(
    model_config: Any, seed: int, tokenizer: Any, critic: bool = False
) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors of `model.path` loaded whole (the built-in model, or a checkpoint
    without safetensors; `hf_folder` covers the rest), one at a time; for the `critic`
    the FSDP engine's value model, so both engines start from the same weights. A tied
    tensor comes once, under its first name (as `save_pretrained` writes it)."""
    from rl.core.models import load_causal_lm, load_value_model
    from rl.core.weight_sync.ties import tied_aliases, without_aliases

    load = load_value_model if critic else load_causal_lm
    model = load(model_config, tokenizer, seed=seed)
    yield from without_aliases(model.state_dict().items(), tied_aliases(model))
