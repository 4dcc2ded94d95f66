"""What rl-fsdp registers in the `rl.engines` entry-point group."""

from rl.core.registry import EngineSpec

FSDP_ENGINE = EngineSpec(
    name="fsdp",
    role="train",
    factory="rl.fsdp.engine:FSDPTrainEngine",
    requires=("torch", "transformers"),
    install="rl-fsdp",
    description="PyTorch FSDP2 (fully_shard) over Hugging Face causal LMs; gloo on CPU, NCCL on GPU",
    config_key="fsdp_config",
    config_section="rl.fsdp.config:FSDPConfig",
)
