"""Tied word embeddings in weight sync: the shared tensor is sent once, and receivers
refuse a sync that would leave an output layer stale (tiny tied Qwen2 / Qwen3 / Llama)."""

import pytest
import torch
import transformers

from rl.core.weight_sync import WeightSender
from rl.core.weight_sync.ties import TieCheck, Ties, tied_aliases, with_aliases, without_aliases

SHAPE = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=256,
)
FAMILIES = {
    "qwen2": {},
    "qwen3": {},  # q/k norms
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
TIED = {"lm_head.weight": "model.embed_tokens.weight"}


def tiny(family, tie=True, seed=0):
    config = transformers.AutoConfig.for_model(
        family, **SHAPE, **FAMILIES[family], tie_word_embeddings=tie
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_ties_of_tied_and_untied_models(family):
    tied = tiny(family)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    ties = Ties.of(tied)
    assert ties.aliases == TIED and tied_aliases(tied) == TIED
    assert (ties.embedding, ties.output, ties.output_tied) == (
        "model.embed_tokens.weight",
        "lm_head.weight",
        True,
    )
    assert Ties.from_hf_config(tied.config) == ties  # on the meta device
    untied = Ties.of(tiny(family, tie=False))
    assert untied.aliases == {} and untied.output == "lm_head.weight" and not untied.output_tied
    state = tied.state_dict()
    assert "lm_head.weight" in state  # state_dict lists the tied tensor under both names
    unique = dict(without_aliases(state.items(), ties.aliases))
    assert set(unique) == set(state) - {"lm_head.weight"}
    assert (
        with_aliases(unique, ties.aliases)["lm_head.weight"] is unique["model.embed_tokens.weight"]
    )


class Recording:
    """A receiver that loads into a model by name, checked by a TieCheck."""

    def __init__(self, model):
        self.model, self.names = model, []
        self.check = TieCheck(Ties.of(model))
        self.params = dict(model.named_parameters())

    @torch.no_grad()
    def update_weights(self, named_tensors):
        for name, tensor in self.check.stream(named_tensors, self.params.__getitem__):
            self.names.append(name)
            self.params[name].copy_(tensor)


def test_a_tied_state_dict_is_sent_once_and_the_receiver_stays_tied():
    source, target = tiny("qwen3", seed=1), tiny("qwen3", seed=2)
    receiver = Recording(target)
    metrics = WeightSender(bucket_bytes=16 << 10).sync(source.state_dict().items(), receiver)
    assert "lm_head.weight" not in receiver.names
    assert receiver.names.count("model.embed_tokens.weight") == 1
    unique = sum(p.numel() * p.element_size() for p in source.parameters())
    assert metrics["weight_sync/bytes"] == metrics["weight_sync/sent_bytes"] == unique
    assert target.lm_head.weight is target.model.embed_tokens.weight
    assert torch.equal(target.lm_head.weight, source.lm_head.weight)


def test_a_delta_sync_of_the_embedding_alone_moves_the_output_layer():
    source, target = tiny("llama", seed=1), tiny("llama", seed=2)
    receiver = Recording(target)
    sender = WeightSender(bucket_bytes=16 << 10, delta=True)
    sender.sync(source.state_dict().items(), receiver)
    with torch.no_grad():
        source.model.embed_tokens.weight.mul_(1.5)
    receiver.names.clear()
    metrics = sender.sync(source.state_dict().items(), receiver)
    assert receiver.names == ["model.embed_tokens.weight"]
    embedding = source.model.embed_tokens.weight
    assert metrics["weight_sync/sent_bytes"] == embedding.numel() * embedding.element_size()
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(target(ids).logits, source(ids).logits)


def test_dropped_tensors_whose_memory_is_reused_are_all_sent():
    """Only a live tensor can be proved the same memory: fresh same-shape tensors, each
    dropped before the next is made (an all-gathering exporter), all arrive."""
    got = {}

    class Keeping:
        def update_weights(self, named_tensors):
            for name, tensor in named_tensors:
                got[name] = tensor.clone()

    def exporter():
        for i in range(8):
            yield f"w{i}", torch.full((1024,), float(i))

    WeightSender(bucket_bytes=4096).sync(exporter(), Keeping())
    assert sorted(got) == [f"w{i}" for i in range(8)]
    assert all(torch.equal(got[f"w{i}"], torch.full((1024,), float(i))) for i in range(8))


def test_a_tied_receiver_refuses_a_different_output_layer():
    untied, target = tiny("qwen2", tie=False, seed=1), tiny("qwen2", seed=2)
    receiver = Recording(target)
    with pytest.raises(ValueError, match="'lm_head.weight' differs from 'model.embed_tokens"):
        WeightSender().sync(untied.state_dict().items(), receiver)
    # the same values under both names (an exporter that emits both) load fine
    tied = tiny("qwen2", seed=3)
    both = [(n, t.clone()) for n, t in tied.state_dict().items()]  # two tensors
    WeightSender().sync(both, receiver)
    assert torch.equal(target.lm_head.weight, tied.lm_head.weight)
    # an alias alone is compared with what the receiver holds
    check = TieCheck(Ties.of(target))
    alone = [("lm_head.weight", tied.lm_head.weight.detach().clone())]
    assert list(check.stream(alone, receiver.params.__getitem__)) == []
    with pytest.raises(ValueError, match="arrived without 'model.embed_tokens.weight'"):
        list(check.stream(alone))  # a receiver that cannot read its weights (vLLM)


def test_an_untied_receiver_refuses_a_tied_trainers_weights():
    tied, untied = tiny("qwen3", seed=1), tiny("qwen3", tie=False, seed=2)
    receiver = Recording(untied)
    unique = list(without_aliases(tied.state_dict().items(), tied_aliases(tied)))
    with pytest.raises(ValueError, match="'lm_head.weight' never did.*stay stale"):
        WeightSender().sync(unique, receiver)
    # an untied trainer's delta syncs may leave either out once both arrived
    source = tiny("qwen3", tie=False, seed=4)
    fresh = Recording(tiny("qwen3", tie=False, seed=5))
    sender = WeightSender(delta=True)
    sender.sync(source.state_dict().items(), fresh)
    with torch.no_grad():
        source.model.embed_tokens.weight.add_(1.0)
    fresh.names.clear()
    sender.sync(source.state_dict().items(), fresh)
    assert fresh.names == ["model.embed_tokens.weight"]
