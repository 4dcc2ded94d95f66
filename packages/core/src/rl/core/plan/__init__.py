"""`rl plan`: a run's placement, batch arithmetic per rank and peak memory per device,
worked out before any worker starts (and checked by the preflight of `rl train`).

    model_dims      the model's shapes and parameter counts, from config.json alone
    batches         global → mini → micro per rank, what each rollout replica draws
    memory          the per-device memory formulas (parameters, gradients, optimizer,
                    activations, logits, KV cache) and colocated roles taking turns
    device_memory   the device's memory: cluster.device_memory_gb, the GPU's, or the RAM
    layout          the train ranks, the rollout's devices, devices grouped by roles
    build           make_plan: the figures put together
    fit             check_plan: every refusal, each naming the key to change
    summary         the plan in one line, for rl train's log

docs/plan.md has the formulas and a worked example.
"""

from rl.core.plan.batches import RolloutBatches, TrainBatches
from rl.core.plan.build import DeviceGroup, Plan, make_plan
from rl.core.plan.fit import check_plan
from rl.core.plan.memory import RoleMemory
from rl.core.plan.model_dims import ModelDims, ParameterCounts, model_dims, parameter_counts

__all__ = [
    "DeviceGroup",
    "ModelDims",
    "ParameterCounts",
    "Plan",
    "RoleMemory",
    "RolloutBatches",
    "TrainBatches",
    "check_plan",
    "make_plan",
    "model_dims",
    "parameter_counts",
]
