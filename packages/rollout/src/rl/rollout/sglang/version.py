"""Which SGLang releases the engine is written against, and the checked import of SGLang.

The range starts at 0.5.0: the first release line whose `Engine.update_weights_from_tensor`
takes `load_format="flattened_bucket"` (sgl-project/sglang#8079, July 2025) together with
`release_memory_occupation` / `resume_memory_occupation` and token-in/token-out generation
(`skip_tokenizer_init`). It stops before 0.6 because SGLang changes its Engine and
ServerArgs between minor lines; widen it after running the engine against a newer one.
"""

from __future__ import annotations

from types import ModuleType

from packaging.version import InvalidVersion, Version

from rl.core.errors import UserError
from rl.core.imports import require
from rl.rollout.versions import version_in_range

SUPPORTED_SGLANG = ">=0.5.0,<0.6"
INSTALL_EXTRA = "rl-rollout[sglang]"


class UnsupportedSGLangError(UserError, ImportError):
    """The installed SGLang is outside `SUPPORTED_SGLANG`; the message names the range."""


def check_sglang_version(installed: str, supported: str = SUPPORTED_SGLANG) -> None:
    """Raise `UnsupportedSGLangError` unless version string `installed` is in `supported`.

    Pre-releases of a supported version (0.5.1rc0) count as inside the range.
    """
    hint = f"the SGLang rollout engine supports sglang{supported}: pip install 'sglang{supported}'"
    try:
        version = Version(installed)
    except InvalidVersion:
        raise UnsupportedSGLangError(
            f"sglang reports version {installed!r}, which is not a version number; {hint}"
        ) from None
    if not version_in_range(str(version), supported):
        raise UnsupportedSGLangError(f"sglang {installed} is installed; {hint}")


def import_sglang() -> ModuleType:
    """`import sglang`, with the one-line install hint when absent and the version check."""
    sglang = require("sglang", INSTALL_EXTRA, "the SGLang rollout engine")
    check_sglang_version(str(getattr(sglang, "__version__", "unknown")))
    return sglang
