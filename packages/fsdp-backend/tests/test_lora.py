"""LoRA on the FSDP2 engine (PEFT adapters injected before the wrap), at world size 1 on CPU,
against hand-computed float64 references, plain models and PEFT's own loader."""

import sys

import pytest
import torch

from rl.core.config import ConfigError, OptimConfig, load_config
from rl.core.engines import Rollouts
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.models.lora import LoraSettings
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.engine import FSDPTrainEngine

pytest.importorskip("peft")

LORA = LoraSettings(rank=4, alpha=16)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(load_config().model)


def make_model(tokenizer, seed=0, gradient_checkpointing=False):
    config = load_config(overrides=[f"model.gradient_checkpointing={gradient_checkpointing}"])
    return load_causal_lm(config.model, tokenizer, seed=seed)


def make_batch(tokenizer, rows=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    prompts = [tokenizer(f"{i}+{2 * i}=").input_ids for i in range(rows)]
    responses = [
        torch.randint(3, len(tokenizer), (1 + i % 4,), generator=generator).tolist()
        for i in range(rows)
    ]
    return build_batch(
        Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]), tokenizer.pad_token_id, 5
    )


def nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def lora_actor(tokenizer, lora=LORA, **options):
    options = {"optim": OptimConfig(lr=1e-2), "mini_batch_size": 6, **options}
    return FSDPTrainEngine(make_model(tokenizer), RoleSpec("actor", lora=lora, **options))


def randomise_b(engine, seed=1):
    """PEFT starts B at zero (the adapter adds nothing): give it values, as training would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in engine.model.named_parameters():
            if ".lora_B." in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)


def test_a_lora_layer_computes_w_x_plus_alpha_over_r_b_a_x_in_float64(tokenizer):
    engine = lora_actor(tokenizer, lora=LoraSettings(rank=4, alpha=12))
    randomise_b(engine)
    layer = engine.model.get_submodule("model.layers.0.self_attn.q_proj")
    weight, bias = layer.base_layer.weight.double(), layer.base_layer.bias.double()
    a, b = layer.lora_A["default"].weight.double(), layer.lora_B["default"].weight.double()
    x = torch.randn(3, weight.shape[1], dtype=torch.float64)
    expected = x @ weight.T + bias + (12 / 4) * (x @ a.T @ b.T)
    with torch.no_grad():
        got = layer(x.float()).double()
    assert (b != 0).any() and torch.allclose(got, expected, atol=1e-5)


def test_only_the_adapters_train_and_the_optimizer_holds_only_them(tokenizer):
    engine = lora_actor(tokenizer)
    adapters = {n: p for n, p in engine.model.named_parameters() if ".lora_" in n}
    optimized = [p for group in engine.optimizer.param_groups for p in group["params"]]
    assert len(optimized) == len(adapters) > 0
    assert {id(p) for p in optimized} == {id(p) for p in adapters.values()}
    assert sum(p.numel() for p in optimized) == sum(p.numel() for p in adapters.values())
    before = {n: p.detach().clone() for n, p in engine.model.named_parameters()}
    engine.train_step(make_batch(tokenizer), nll)
    after = dict(engine.model.named_parameters())
    for name, tensor in before.items():
        changed = not torch.equal(tensor, after[name])
        # B starts at zero, A's gradient is then zero in the first step: B must move
        if ".lora_B." in name:
            assert changed, name
        elif ".lora_" not in name:
            assert not changed, name
    assert len(engine.optimizer.state) == len(adapters)


def test_merged_export_has_the_base_names_and_w_plus_scaled_b_a(tokenizer):
    engine = lora_actor(tokenizer)
    randomise_b(engine)
    exported = dict(engine.export_weights())
    plain_names = {
        n for n, _ in FSDPTrainEngine(make_model(tokenizer), RoleSpec("ref")).export_weights()
    }
    assert list(exported) and set(exported) == plain_names  # no PEFT name reaches a rollout engine
    layer = engine.model.get_submodule("model.layers.1.mlp.down_proj")
    w, a, b = (
        layer.base_layer.weight.double(),
        layer.lora_A["default"].weight.double(),
        layer.lora_B["default"].weight.double(),
    )
    expected = w + (LORA.alpha / LORA.rank) * (b @ a)
    assert torch.allclose(
        exported["model.layers.1.mlp.down_proj.weight"].double(), expected, atol=1e-6
    )
    # the merged weights in a plain model give the adapted model's log-probs
    plain = make_model(tokenizer)
    plain.load_state_dict(exported, strict=False)
    merged = FSDPTrainEngine(plain, RoleSpec("ref"))
    batch = make_batch(tokenizer)
    assert torch.allclose(
        merged.compute_logprobs(batch).logprobs, engine.compute_logprobs(batch).logprobs, atol=1e-5
    )
    assert not engine.exports_views  # merged copies: a rollout engine must not adopt them


@pytest.mark.parametrize("use_fused_kernels", [False, True])
def test_base_logprobs_are_the_base_models_after_training(tokenizer, use_fused_kernels):
    batch = make_batch(tokenizer)
    base = FSDPTrainEngine(
        make_model(tokenizer), RoleSpec("ref", use_fused_kernels=use_fused_kernels)
    )
    engine = lora_actor(tokenizer, use_fused_kernels=use_fused_kernels)
    engine.train_step(batch, nll)
    engine.train_step(batch, nll)
    adapted = engine.compute_logprobs(batch).logprobs
    reference = engine.compute_base_logprobs(batch).logprobs
    assert torch.equal(reference, base.compute_logprobs(batch).logprobs)
    assert not torch.allclose(adapted, reference, atol=1e-4)  # the adapters moved it
    # the adapters are on (and trainable) again afterwards
    assert torch.equal(engine.compute_logprobs(batch).logprobs, adapted)
    assert all(p.requires_grad == (".lora_" in n) for n, p in engine.model.named_parameters())


def test_gradient_checkpointing_and_padded_rows_train_the_adapters(tokenizer):
    """Checkpointed (the input made to require grad, base frozen) and padded forwards give
    the packed one's loss and gradient; each run's adapters learn. (Only the first step
    is compared: Adam's first steps are sign steps, so rounding noise in near-zero
    gradients becomes full-size differences afterwards.)"""
    batch = make_batch(tokenizer)
    runs = []
    for checkpointing, packed in ((False, True), (True, True), (False, False)):
        engine = FSDPTrainEngine(
            make_model(tokenizer, gradient_checkpointing=checkpointing),
            RoleSpec(
                "actor",
                optim=OptimConfig(lr=1e-2),
                mini_batch_size=6,
                use_remove_padding=packed,
                lora=LORA,
            ),
        )
        runs.append([engine.train_step(batch, nll) for _ in range(2)])
    first = runs[0]
    for run in runs:
        assert run[0]["actor/grad_norm"] > 0
        assert run[0]["actor/loss"] == pytest.approx(first[0]["actor/loss"], rel=1e-5)
        assert run[0]["actor/grad_norm"] == pytest.approx(first[0]["actor/grad_norm"], rel=1e-4)
        assert run[1]["actor/loss"] < run[0]["actor/loss"]


def test_save_load_keeps_adapters_and_their_optimizer_state(tokenizer, tmp_path):
    batch = make_batch(tokenizer)
    first = lora_actor(tokenizer, mini_batch_size=3)
    first.train_step(batch, nll)
    first.save(str(tmp_path / "actor"))
    second = lora_actor(tokenizer, mini_batch_size=3)
    second.load(str(tmp_path / "actor"))
    assert len(second.optimizer.state) == len(first.optimizer.state) > 0
    first.train_step(batch, nll)
    second.train_step(batch, nll)
    a, b = dict(first.export_weights()), dict(second.export_weights())
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_save_hf_writes_a_peft_adapter_that_peft_loads_on_the_base_folder(tokenizer, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base_dir = tmp_path / "base"
    make_model(tokenizer).save_pretrained(base_dir)
    engine = lora_actor(tokenizer, lora=LoraSettings(4, 16, base_path=str(base_dir)))
    batch = make_batch(tokenizer)
    engine.train_step(batch, nll)
    engine.lora_save_merged = True
    engine.save_hf(str(tmp_path / "hf"), tokenizer)
    names = {p.name for p in (tmp_path / "hf").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "merged"} <= names
    peft_model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir), tmp_path / "hf"
    )
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "hf" / "merged")
    expected = engine.compute_logprobs(batch).logprobs
    for model in (peft_model, merged):
        got = FSDPTrainEngine(model, RoleSpec("ref")).compute_logprobs(batch).logprobs
        assert torch.allclose(got, expected, atol=1e-5)

    # and a new run starts from it (model.lora_adapter_path)
    resumed = lora_actor(tokenizer, lora=LoraSettings(4, 16, adapter_path=str(tmp_path / "hf")))
    assert torch.allclose(resumed.compute_logprobs(batch).logprobs, expected, atol=1e-6)


def test_lora_without_peft_is_refused_with_the_pip_command(tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(ConfigError, match=r"pip install 'rl-fsdp\[lora\]'"):
        lora_actor(tokenizer)


@pytest.mark.parametrize(
    ("targets", "message"),
    [(("no_such_proj",), "model.target_modules"), (("q_proj", "lm_head"), "output layer")],
)
def test_target_modules_rl_cannot_adapt_are_refused_by_name(tokenizer, targets, message):
    with pytest.raises(ConfigError, match=message):
        lora_actor(tokenizer, lora=LoraSettings(4, 16, target_modules=targets))


def test_sft_with_lora_trains_the_adapter_only(tokenizer):
    """`rl sft` and the warm start build the actor's engine: with model.lora_rank it is a
    LoRA engine, the NLL falls and no base weight moves."""
    from rl.core.trainer.build import build_dataset, build_sft_engine
    from rl.core.trainer.sft import run_sft_steps

    config = load_config(overrides=["model.lora_rank=4", "sft.steps=4", "sft.lr=1e-2"])
    engine = build_sft_engine(config, tokenizer)
    assert engine.has_adapters
    base = {n: p.detach().clone() for n, p in engine.model.named_parameters() if ".lora_" not in n}
    data = build_dataset(config, config.data.train_files, 64, 1, tokenizer)
    losses = run_sft_steps(engine, data, tokenizer, config)
    assert losses[-1] < losses[0]
    after = dict(engine.model.named_parameters())
    assert all(torch.equal(tensor, after[name]) for name, tensor in base.items())
