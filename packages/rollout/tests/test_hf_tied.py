"""Tied word embeddings between the FSDP trainer and the HF rollout engine (tiny tied
Qwen2 / Qwen3 / Llama): a sync sends the shared tensor once and the rollout stays tied,
a delta sync of the embedding alone moves the rollout's output layer, shared weights keep
the tie, and mismatched ties are refused instead of leaving an output layer stale."""

import pytest
import torch
import transformers

from rl.core.config import OptimConfig
from rl.core.engines import SamplingParams
from rl.core.models import build_char_tokenizer
from rl.core.trainer.rollout_batch import build_batch
from rl.core.weight_sync import WeightSender, sync_weights
from rl.rollout.hf import HFRolloutEngine

EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"
FAMILIES = {
    "qwen2": {},
    "qwen3": {},
    "llama": dict(
        rope_scaling=dict(
            rope_type="llama3",
            factor=32.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=64,
        )
    ),
}


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


def model(tokenizer, family="qwen2", tie=True, seed=0):
    config = transformers.AutoConfig.for_model(
        family,
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **FAMILIES[family],
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def trainer(tokenizer, family="qwen2", tie=True, seed=1):
    from rl.core.role_spec import RoleSpec
    from rl.fsdp.engine import FSDPTrainEngine

    return FSDPTrainEngine(
        model(tokenizer, family, tie, seed),
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=3e-2),
            mini_batch_size=8,
            micro_batch_size=8,
            temperature=0.9,
        ),
    )


def rollout_gap(engine, actor, tokenizer, rollouts=None):
    """Generate (unless given rollouts) and compare the rollout's log-probs with the
    trainer's recomputation; returns (rollouts, largest gap)."""
    sampling = SamplingParams(n=2, temperature=0.9, max_new_tokens=5, seed=3)
    prompts = [tokenizer(text).input_ids for text in ("3+4=", "12*3=", "9-1=")]
    rollouts = rollouts or engine.generate(prompts, sampling)
    batch = build_batch(rollouts, tokenizer.pad_token_id, 5)
    mask = batch["response_mask"].bool()
    recomputed = actor.compute_logprobs(batch, calculate_entropy=False).logprobs
    return rollouts, batch, float((recomputed - batch["rollout_logprobs"])[mask].abs().max())


def tied(engine):
    return engine.model.lm_head.weight is engine.model.model.embed_tokens.weight


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_sync_keeps_the_rollout_tied_and_an_embedding_change_reaches_its_output_layer(
    tokenizer, family
):
    actor = trainer(tokenizer, family)
    engine = HFRolloutEngine(model(tokenizer, family, seed=2), tokenizer)
    metrics = sync_weights(actor.export_weights(), engine, bucket_bytes=16 << 10)
    assert tied(engine)
    weights = dict(actor.export_weights())
    assert HEAD not in weights
    assert metrics["weight_sync/bytes"] == sum(t.numel() * 4 for t in weights.values())
    assert torch.equal(engine.model.lm_head.weight, weights[EMBED])
    rollouts, _, gap = rollout_gap(engine, actor, tokenizer)
    assert gap < 1e-4

    sender = WeightSender(bucket_bytes=16 << 10, delta=True)
    sender.sync(actor.export_weights(), engine)
    with torch.no_grad():  # the trainer moves its embedding only (= its output layer)
        actor.model.model.embed_tokens.weight.mul_(1.3)
    _, batch, stale = rollout_gap(engine, actor, tokenizer, rollouts)
    metrics = sender.sync(actor.export_weights(), engine)
    assert metrics["weight_sync/sent_bytes"] == weights[EMBED].numel() * 4  # it alone
    assert tied(engine)
    # the rollout's log-probs of the same tokens now equal the trainer's new ones
    with torch.no_grad():
        ids, mask = batch["input_ids"], batch["attention_mask"]
        logits = engine.model(input_ids=ids, attention_mask=mask).logits
    width = batch["responses"].shape[1]
    logp = torch.log_softmax(logits[:, -width - 1 : -1].double() / 0.9, -1)
    rollout_now = logp.gather(-1, batch["responses"].unsqueeze(-1)).squeeze(-1)
    trainer_now = actor.compute_logprobs(batch, calculate_entropy=False).logprobs
    response = batch["response_mask"].bool()
    moved = (trainer_now - batch["rollout_logprobs"])[response].abs().max()
    assert stale > 1e-2 and moved > 1e-2  # the change moved the trainer's log-probs
    assert (rollout_now - trainer_now.double())[response].abs().max() < 1e-4


def test_shared_weights_keep_the_tie_and_follow_the_trainers_updates(tokenizer):
    actor = trainer(tokenizer, "qwen3")
    engine = HFRolloutEngine(model(tokenizer, "qwen3", seed=2), tokenizer)
    assert actor.exports_views
    assert engine.share_weights(list(actor.export_weights()))
    assert tied(engine)
    embedding = actor.model.model.embed_tokens.weight
    assert engine.model.lm_head.weight.data_ptr() == embedding.data_ptr()
    _, batch, gap = rollout_gap(engine, actor, tokenizer)
    assert gap < 1e-4

    def nll(output, micro, mini):
        mask = micro["response_mask"]
        return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}

    before = embedding.detach().clone()
    actor.train_step(batch, nll)
    assert not torch.equal(before, embedding)
    assert tied(engine) and torch.equal(engine.model.lm_head.weight, embedding)
    _, _, after = rollout_gap(engine, actor, tokenizer)  # new samples, new weights
    assert after < 1e-4


def test_an_untied_trainer_and_a_tied_rollout_are_refused(tokenizer):
    actor = trainer(tokenizer, tie=False)
    engine = HFRolloutEngine(model(tokenizer, seed=2), tokenizer)
    assert not engine.share_weights(list(actor.export_weights()))
    with pytest.raises(ValueError, match="'lm_head.weight' differs from 'model.embed_tokens"):
        sync_weights(actor.export_weights(), engine)


def test_a_tied_trainer_and_an_untied_rollout_are_refused(tokenizer):
    actor = trainer(tokenizer)
    engine = HFRolloutEngine(model(tokenizer, tie=False, seed=2), tokenizer)
    assert not engine.share_weights(list(actor.export_weights()))
    with pytest.raises(ValueError, match="'lm_head.weight' never did.*stay stale"):
        sync_weights(actor.export_weights(), engine)
    # an untied trainer gives the untied rollout its head
    untied = trainer(tokenizer, tie=False, seed=4)
    assert HEAD in dict(untied.export_weights())
    sync_weights(untied.export_weights(), engine)
    assert torch.equal(engine.model.lm_head.weight, untied.model.lm_head.weight)


def test_a_tied_state_dict_loads_directly_with_lm_head_among_its_names(tokenizer):
    """`update_weights(state_dict())` of a tied model (lm_head.weight listed too) loads:
    it raised KeyError('lm_head.weight'), the name the deduplicated parameters lack."""
    engine = HFRolloutEngine(model(tokenizer, "llama", seed=2), tokenizer)
    source = model(tokenizer, "llama", seed=5)
    assert HEAD in source.state_dict()
    engine.update_weights(iter(source.state_dict().items()))
    assert tied(engine)
    for name, tensor in source.state_dict().items():
        assert torch.equal(engine.model.state_dict()[name], tensor), name
