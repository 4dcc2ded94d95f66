"""LoRA adapters on a Hugging Face causal LM, with PEFT (`model.lora_rank` > 0).

The adapters are injected into the model in place (`peft.inject_adapter_in_model`, no
`PeftModel` wrapper), before FSDP2 wraps it: the model keeps its class, its decoder
layers and its Hugging Face names except inside each adapted linear layer, where
`q_proj.weight` becomes `q_proj.base_layer.weight` beside `q_proj.lora_A.default.weight`
and `q_proj.lora_B.default.weight`. Only the adapters train; the base weights are frozen.

- `merged_weights`: the weights under their Hugging Face names with each adapted layer's
  `W + (alpha / r) B A` (what a rollout engine loads: no PEFT name reaches it);
- `adapters_disabled`: the base model's forward (the reference log-probs);
- `save_adapter` / `load_adapter`: PEFT's own format (adapter_config.json +
  adapter_model.safetensors), loadable with `peft.PeftModel.from_pretrained`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rl.core.config import ConfigError
from rl.core.models.vision_models import is_vision_language

BASE, LORA_A, LORA_B = ".base_layer.", ".lora_A.default.", ".lora_B.default."
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


class PeftMissing(ConfigError):
    """LoRA configured where `peft` is not installed."""


@dataclass(frozen=True)
class LoraSettings:
    """`model.lora_*` as the engine uses them."""

    rank: int
    alpha: float
    target_modules: str | tuple[str, ...] = "all-linear"
    exclude_modules: tuple[str, ...] | None = None
    adapter_path: str | None = None
    base_path: str | None = None  # the base model's folder, recorded in adapter_config.json

    @classmethod
    def of(cls, model: Any) -> LoraSettings | None:
        """From `config.model`; None when LoRA is off (lora_rank = 0)."""
        if model.lora_rank <= 0:
            return None
        base = model.path if Path(str(model.path)).expanduser().is_dir() else None
        return cls(
            model.lora_rank,
            model.lora_alpha,
            model.target_modules,
            model.exclude_modules,
            model.lora_adapter_path,
            base,
        )

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank

    def peft_config(self, language_only: bool = False) -> Any:
        """PEFT's config; `language_only` (a vision-language model without exclude_modules
        of its own): the vision tower's linear layers are left out, the adapters go on the
        language model (verl's VL LoRA examples adapt the language model)."""
        peft = import_peft()
        targets = self.target_modules
        exclude: Any = list(self.exclude_modules) if self.exclude_modules else None
        if language_only and exclude is None:
            exclude = r".*\.visual\..*"
        return peft.LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,
            lora_dropout=0.0,
            bias="none",
            target_modules=targets if isinstance(targets, str) else list(targets),
            exclude_modules=exclude,
            base_model_name_or_path=self.base_path,
            task_type="CAUSAL_LM",
        )


def import_peft() -> Any:
    try:
        import peft
    except ImportError as error:
        raise PeftMissing(
            "model.lora_rank > 0 needs PEFT: pip install 'rl-fsdp[lora]' (or pip install peft)"
        ) from error
    return peft


def apply_lora(
    model: torch.nn.Module, lora: LoraSettings, gradient_checkpointing: bool, seed: int = 0
) -> None:
    """Inject the adapters into `model` (in place), freeze everything else, and load
    `lora.adapter_path`'s weights when given. A's random start is drawn from `seed` (the
    same on every rank and in every run with that seed); B starts at zero (PEFT's)."""
    peft = import_peft()
    model.requires_grad_(False)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            config = lora.peft_config(language_only=is_vision_language(model.config))
            peft.inject_adapter_in_model(config, model)
    except ValueError as error:  # e.g. target modules not found in the model
        raise ConfigError(f"model.target_modules = {lora.target_modules!r}: {error}") from None
    output = model.get_output_embeddings()  # type: ignore[operator]
    if output is not None and hasattr(output, "lora_A"):
        # the fused log-prob path reads the output layer's weight itself (and a tied one is
        # the embedding): an adapter there would be skipped
        raise ConfigError(
            f"model.target_modules = {lora.target_modules!r} adapts the output layer "
            "(lm_head): LoRA there is not in rl; name the decoder's linear layers, or all-linear"
        )
    for name, param in model.named_parameters():
        param.requires_grad_(LORA_A in name or LORA_B in name)
    if gradient_checkpointing:  # reentrant checkpoints need an input that requires grad
        model.enable_input_require_grads()  # type: ignore[operator]
    if lora.adapter_path is not None:
        load_adapter(model, lora.adapter_path)


def load_adapter(model: torch.nn.Module, path: str) -> None:
    """The adapter weights of a PEFT folder into the injected adapters (shapes must match)."""
    from safetensors.torch import load_file

    peft = import_peft()
    file = Path(path).expanduser() / ADAPTER_FILES[1]
    if not file.is_file():
        raise ConfigError(
            f"model.lora_adapter_path = {path!r}: no {ADAPTER_FILES[1]} there (a folder "
            "written by PEFT's save_pretrained)"
        )
    result = peft.set_peft_model_state_dict(model, load_file(str(file)))
    missing = [k for k in result.missing_keys if LORA_A in k or LORA_B in k]
    if missing or result.unexpected_keys:
        raise ConfigError(
            f"model.lora_adapter_path = {path!r} does not fit model.target_modules / "
            f"lora_rank: missing {missing[:3]}, unexpected {list(result.unexpected_keys)[:3]}"
        )


def adapter_names(model: torch.nn.Module) -> list[str]:
    return [name for name, p in model.named_parameters() if p.requires_grad]


def lora_layers(model: torch.nn.Module) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


@contextmanager
def adapters_disabled(model: torch.nn.Module) -> Iterator[None]:
    """The base model's forward inside the block (every adapter bypassed)."""
    layers = lora_layers(model)
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        # peft's enable_adapters(True) makes the adapters trainable again, and only them
        for name, param in model.named_parameters():
            param.requires_grad_(LORA_A in name or LORA_B in name)


def merged_weights(
    named: Iterable[tuple[str, torch.Tensor]], scaling: float
) -> Iterator[tuple[str, torch.Tensor]]:
    """`(name, tensor)` of a LoRA-injected model's state dict -> its Hugging Face names, each
    adapted layer's weight merged: `W + scaling * B @ A` (computed in float32, returned in
    W's dtype). A layer's three tensors are held until the last of them arrives."""
    pending: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in named:
        part = next((p for p in (BASE, LORA_A, LORA_B) if p in name), None)
        if part is None:
            yield name, tensor
            continue
        prefix, leaf = name.split(part, 1)
        if part == BASE and leaf != "weight":  # the base layer's bias: its own name
            yield f"{prefix}.{leaf}", tensor
            continue
        held = pending.setdefault(prefix, {})
        held[part] = tensor
        if len(held) == 3:
            del pending[prefix]
            yield f"{prefix}.weight", merge(held[BASE], held[LORA_A], held[LORA_B], scaling)
    if pending:
        raise RuntimeError(f"LoRA layers without all three weights: {sorted(pending)[:3]}")


def merge(
    weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor, scaling: float
) -> torch.Tensor:
    delta = (lora_b.float() @ lora_a.float()) * scaling
    return (weight.float() + delta).to(weight.dtype)


def base_name(name: str) -> str:
    """A LoRA-injected model's name of a base weight -> its Hugging Face name."""
    return name.replace(BASE, ".")


def injected_name(model_names: Iterable[str]) -> dict[str, str]:
    """`{hf_name: injected_name}` for every base weight whose name the injection changed."""
    return {base_name(n): n for n in model_names if BASE in n}


def adapter_state(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """PEFT's saved names of the adapter weights: `...q_proj.lora_A.weight` (no adapter
    name), prefixed `base_model.model.` as `PeftModel.save_pretrained` writes them."""
    return {
        "base_model.model." + name.replace(".default.", "."): tensor.detach().contiguous()
        for name, tensor in named
        if LORA_A in name or LORA_B in name
    }


def save_adapter(path: str | Path, lora: LoraSettings, state: dict[str, torch.Tensor]) -> None:
    """adapter_config.json + adapter_model.safetensors in `path`: PEFT's format."""
    from safetensors.torch import save_file

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    lora.peft_config().save_pretrained(str(folder))
    save_file({k: v.cpu() for k, v in state.items()}, str(folder / ADAPTER_FILES[1]))


def base_weights(model: torch.nn.Module, tensors: dict[str, Any]) -> dict[str, Any]:
    """Hugging Face-named weights -> the injected model's names of its base weights; a name
    the model does not have is an error (a partial load would go unnoticed)."""
    names = {n for n in model.state_dict() if LORA_A not in n and LORA_B not in n}
    renamed = injected_name(names)
    out = {renamed.get(name, name): tensor for name, tensor in tensors.items()}
    unknown = sorted(set(out) - names)
    if unknown:
        raise KeyError(f"weights the LoRA model does not have: {unknown[:3]}")
    return out


def save_merged(
    model: torch.nn.Module, merged: dict[str, torch.Tensor], path: Path, tokenizer: Any = None
) -> None:
    """The merged weights as a Hugging Face folder (config.json + model.safetensors):
    `AutoModelForCausalLM.from_pretrained` loads it without PEFT."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(model.config)
    plain.save_pretrained(str(path), state_dict=merged)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(path))
