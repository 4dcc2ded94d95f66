"""What rl-megatron registers in the `rl.engines` entry-point group."""

from rl.core.registry import EngineSpec

MEGATRON_ENGINE = EngineSpec(
    name="megatron",
    role="train",
    factory="rl.megatron.engine:MegatronTrainEngine",
    requires=("megatron.core",),
    install="rl-megatron",
    description="megatron-core GPT models with tensor/pipeline/expert/context parallelism",
    config_key="megatron",
    config_section="rl.megatron.config:MegatronConfig",
)
