"""Worker groups: the roles of a run on one process or on many (Ray), behind the contracts."""

from rl.core.workers.launch import LaunchedRoles, launch_roles
from rl.core.workers.local_group import LocalWorkerGroup
from rl.core.workers.roles import RolloutRole, TrainRole
from rl.core.workers.worker import RoleWorker

__all__ = [
    "LaunchedRoles",
    "LocalWorkerGroup",
    "RoleWorker",
    "RolloutRole",
    "TrainRole",
    "launch_roles",
]
