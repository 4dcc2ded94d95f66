"""A discriminative reward model served by vLLM (its pooling runner), as verl's reward loop
serves one: each text's last label's score without the activation (`use_activation`
off: the raw logit, what verl reads from `/classify`). In this process, like the rollout
engine; its tokenizer tokenizes the texts (adding the special tokens it adds)."""

from __future__ import annotations

from typing import Any

from rl.rollout.vllm.options import engine_args
from rl.rollout.vllm.version import import_vllm


class VLLMClassifier:
    def __init__(self, config: Any) -> None:
        vllm = import_vllm()
        from transformers import AutoConfig

        path = str(config.model.path)
        hf_config = AutoConfig.from_pretrained(
            path, trust_remote_code=config.model.trust_remote_code
        )
        on_cpu = config.trainer.device == "cpu"
        dtype = config.model.dtype if config.rollout.dtype == "auto" else config.rollout.dtype
        args = engine_args(config, path, dtype, on_cpu=on_cpu, hf_config=hf_config)
        args.pop("logprobs_mode", None)
        args.update(runner="pooling", skip_tokenizer_init=False)
        self.llm = vllm.LLM(**args)
        self.params = vllm.PoolingParams(use_activation=False)

    def __call__(self, texts: list[str]) -> list[float]:
        outputs = self.llm.classify(texts, pooling_params=self.params, use_tqdm=False)
        return [float(output.outputs.probs[-1]) for output in outputs]
