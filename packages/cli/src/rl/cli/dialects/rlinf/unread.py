"""What RLinf does not read in a role's section, given its training backend and precision.

RLinf's example files carry both backends' keys: an FSDP actor has megatron's `optim.*`
loss-scale keys, a megatron actor has `fsdp_config`; megatron reads its static
`optim.loss_scale*` only in fp16 (`optim.fp16`, else from `model.precision`), FSDP reads
`amp_autocast.precision` only while `amp_autocast.enabled`, and its schedule from `optim`
(megatron's `lr_sched` section is not read). These are removed before
mapping (`REWRITES`), with one note each, so that they are neither mapped nor refused.
"""

from __future__ import annotations

from typing import Any

_FP16 = ("fp16", "float16", "16", "half")


def _megatron_fp16(role: dict[str, Any]) -> bool:
    """RLinf's validate_megatron_cfg: optim.fp16, else model.precision is fp16."""
    optim = role.get("optim") or {}
    if optim.get("fp16") is not None:
        return bool(optim["fp16"])
    return str((role.get("model") or {}).get("precision")) in _FP16


def unread_keys(values: dict[str, Any]) -> list[str]:
    """Removes what RLinf does not read from `actor` and `critic`; the report's notes."""
    notes: list[str] = []
    for name in ("actor", "critic"):
        role = values.get(name)
        if not isinstance(role, dict):
            continue
        backend = role.get("training_backend")
        found = role.get("optim")
        optim: dict[str, Any] = found if isinstance(found, dict) else {}
        scale_keys = [key for key in optim if key.startswith("loss_scale")]
        if scale_keys and (backend == "fsdp" or not _megatron_fp16(role)):
            for key in scale_keys:
                optim.pop(key)
            why = "FSDP scales by fsdp_config.grad_scaler" if backend == "fsdp" else "not fp16"
            notes.append(
                f"{name}.optim.{{{', '.join(scale_keys)}}}: not read by RLinf ({why}: "
                "megatron's static loss scale applies under fp16 only)"
            )
        if backend == "fsdp" and isinstance(role.get("lr_sched"), dict):
            role.pop("lr_sched")
            notes.append(
                f"{name}.lr_sched: not read by RLinf's FSDP backend (its schedule is "
                "optim.lr_scheduler, lr_warmup_steps(_ratio), min_lr / min_lr_rate)"
            )
        fsdp = role.get("fsdp_config")
        if backend == "megatron" and isinstance(fsdp, dict):
            role.pop("fsdp_config")
            notes.append(f"{name}.fsdp_config: not read by RLinf (the backend is megatron)")
        elif isinstance(fsdp, dict):
            amp = fsdp.get("amp_autocast")
            if isinstance(amp, dict) and not amp.get("enabled") and "precision" in amp:
                amp.pop("precision")
                notes.append(
                    f"{name}.fsdp_config.amp_autocast.precision: not read by RLinf "
                    "(amp_autocast is off)"
                )
    return notes
