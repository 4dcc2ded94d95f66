"""Where each role runs: one `Placement` model and a parser per seed system's dialect.

    parse_own(placement, ...)            ours: role -> devices
    parse_rlinf(component_placement, ...) RLinf
    parse_roll(device_mappings, ...)     ROLL
    parse_chatlearn(colocation, ...)     ChatLearn
    parse_verl_hybrid(True, ...)         verl
    parse_cpu(num_cpus, ...)             CPU only

Each returns a validated `Placement` or raises `PlacementError` (a `ConfigError`).
"""

from rl.core.placement.colocation import parse_chatlearn, parse_verl_hybrid
from rl.core.placement.cpu import parse_cpu
from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.own import parse_own
from rl.core.placement.rlinf import parse_rlinf
from rl.core.placement.roles import ROLES
from rl.core.placement.roll import parse_device_mapping, parse_roll
from rl.core.placement.validate import build_placement

__all__ = [
    "ROLES",
    "Placement",
    "PlacementError",
    "build_placement",
    "parse_chatlearn",
    "parse_cpu",
    "parse_device_mapping",
    "parse_own",
    "parse_rlinf",
    "parse_roll",
    "parse_verl_hybrid",
]
