"""Is an installed engine's version inside the range an rl-rollout engine supports?

One PEP 440 check for every engine (vLLM, SGLang): local tags (`0.32.0+cpu`) and
pre-releases of a supported version (`0.5.1rc0`) count as inside; a string that is not
a version number is outside.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def version_in_range(installed: str, supported: str) -> bool:
    """True when version string `installed` satisfies specifier `supported` (">=0.32,<0.35")."""
    try:
        version = Version(installed)
    except InvalidVersion:
        return False
    return SpecifierSet(supported).contains(version, prereleases=True)
