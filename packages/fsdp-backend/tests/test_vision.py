"""A vision-language policy on the FSDP engine and the HF rollout engine: the images reach
every pass (changing the image, same text, changes both engines' log-probs), the trainer's
log-probs equal the rollout's and an unpadded reference forward in which the model places
the images itself, padded or packed, and an update trains through the vision tower unless
`freeze_vision_tower`; LoRA adapts the language model only; the HF export of the trained
model loads with transformers' auto class and generates from an image."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from rl.core.config import ModelConfig, OptimConfig
from rl.core.data.dataset import PromptDataset
from rl.core.data.visual_tasks import geometry_rows, square_rows
from rl.core.engines import SamplingParams
from rl.core.models import load_causal_lm
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.core.vision.inputs import image_batch
from rl.fsdp.engine import FSDPTrainEngine
from rl.rollout.hf import HFRolloutEngine

pytest.importorskip("PIL")


@pytest.fixture(scope="module")
def setup(vl_model_folder):
    from transformers import AutoTokenizer

    from rl.core.vision.processing import VisionProcessor

    folder = vl_model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vision = VisionProcessor.from_folder(str(folder), tokenizer)
    rows = [*square_rows(3, "train", seed=4), *geometry_rows(1, "train")]
    items = PromptDataset(rows, tokenizer, max_prompt_length=512, vision=vision).items
    model_config = ModelConfig(path=str(folder))
    rollout = HFRolloutEngine(load_causal_lm(model_config, tokenizer), tokenizer)
    sampling = SamplingParams(n=2, max_new_tokens=5, prompt_seeds=(1, 2, 3, 4))
    rollouts = rollout.generate_with_images(
        [it.prompt_ids for it in items], [it.images for it in items], sampling
    )
    batch = build_batch(rollouts, tokenizer.pad_token_id)
    return tokenizer, model_config, items, rollout, rollouts, batch


def _engine(model_config, tokenizer, role="ref", **spec):
    model = load_causal_lm(model_config, tokenizer)
    return FSDPTrainEngine(model, RoleSpec(role, model=model_config, micro_batch_size=3, **spec))


def _reference(model, rollouts):
    """Each row alone, unpadded, the model placing its images itself (transformers'
    positions from mm_token_type_ids): log p of the response tokens."""
    image_token = model.config.image_token_id
    out = []
    for prompt, response, images in zip(
        rollouts.prompt_ids, rollouts.response_ids, rollouts.images, strict=True
    ):
        ids = torch.tensor([prompt + response])
        with torch.no_grad():
            logits = model(
                input_ids=ids,
                pixel_values=images.pixel_values,
                image_grid_thw=images.image_grid_thw,
                mm_token_type_ids=(ids == image_token).int(),
            ).logits[0]
        logp = torch.log_softmax(logits.float(), -1)[len(prompt) - 1 : -1]
        out.append(logp.gather(-1, torch.tensor(response)[:, None])[:, 0])
    return out


@pytest.mark.parametrize(
    ("packed", "fused"),
    [(True, True), (False, True), (True, False)],
    ids=["packed-fused", "padded-fused", "packed-logits"],
)
def test_trainer_logprobs_equal_the_rollouts_and_a_reference_forward(setup, packed, fused):
    tokenizer, model_config, _, rollout, rollouts, batch = setup
    engine = _engine(model_config, tokenizer, use_remove_padding=packed, use_fused_kernels=fused)
    output = engine.compute_logprobs(batch)
    mask = batch["response_mask"].bool()
    rollout_logprobs = batch["rollout_logprobs"][mask]
    assert (output.logprobs[mask] - rollout_logprobs).abs().max() < 1e-4
    reference = torch.cat(_reference(copy.deepcopy(rollout.model), rollouts))
    assert (output.logprobs[mask] - reference).abs().max() < 1e-4
    # the check can fail: without the images the same tokens score otherwise
    blind = {k: v for k, v in batch.items() if k not in ("pixel_values", "image_grid_thw")}
    assert (engine.compute_logprobs(blind).logprobs[mask] - rollout_logprobs).abs().max() > 1e-2


def test_changing_the_image_changes_both_engines_logprobs(setup):
    tokenizer, model_config, items, rollout, rollouts, batch = setup
    first, second = items[0], items[1]  # two square pictures: the same text, other images
    assert first.prompt_ids == second.prompt_ids
    assert not torch.equal(first.images.pixel_values, second.images.pixel_values)
    sampling = SamplingParams(n=1, max_new_tokens=4, temperature=0.0, prompt_seeds=(7,))
    a = rollout.generate_with_images([first.prompt_ids], [first.images], sampling)
    b = rollout.generate_with_images([first.prompt_ids], [second.images], sampling)
    assert a.logprobs[0][0] != pytest.approx(b.logprobs[0][0], abs=1e-4)
    engine = _engine(model_config, tokenizer)
    flipped = dict(batch)  # rows 0-1 show image 1's picture, rows 2-3 image 0's
    order = [2, 3, 0, 1, *range(4, len(rollouts.images))]
    flipped.update(image_batch([rollouts.images[i] for i in order]))
    mask = batch["response_mask"].bool()
    same = engine.compute_logprobs(batch).logprobs
    other = engine.compute_logprobs(flipped).logprobs
    assert (same[:4][mask[:4]] - other[:4][mask[:4]]).abs().max() > 1e-3
    assert torch.equal(same[4:], other[4:])  # rows whose image did not change


def _nll(output, micro, mini):
    mask = micro["response_mask"]
    return -(output.logprobs * mask).sum() / mini["response_mask"].sum(), {}


def _vision_weights(engine):
    return {
        name: p.detach().clone()
        for name, p in engine.model.named_parameters()
        if ".visual." in name
    }


@pytest.mark.parametrize("frozen", [False, True], ids=["trained", "frozen"])
def test_an_update_trains_through_the_vision_tower_unless_frozen(setup, frozen):
    tokenizer, model_config, _, _, _, batch = setup
    engine = _engine(
        model_config,
        tokenizer,
        role="actor",
        optim=OptimConfig(lr=1e-3),
        mini_batch_size=len(batch["responses"]),
        freeze_vision_tower=frozen,
    )
    before = _vision_weights(engine)
    head = engine.model.get_input_embeddings().weight.detach().clone()
    engine.train_step(batch, _nll)
    after = _vision_weights(engine)
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert not engine.model.get_input_embeddings().weight.detach().equal(head)
    if frozen:
        assert changed == []
    else:  # the patch embedding, every block and the merger learn from the loss
        assert any("patch_embed" in n for n in changed) and any("merger" in n for n in changed)
        assert len(changed) > len(before) // 2


def test_freezing_the_vision_tower_of_a_text_model_is_refused(model_folder):
    from rl.core.config import ConfigError
    from rl.core.models import load_tokenizer

    config = ModelConfig(path=str(model_folder("qwen2.5-0.5b", hidden_size=128)))
    tokenizer = load_tokenizer(config)
    with pytest.raises(ConfigError, match="freeze_vision_tower = true, but .* is a text model"):
        _engine(config, tokenizer, role="actor", optim=OptimConfig(), freeze_vision_tower=True)


def test_lora_adapts_the_language_model_only(setup):
    pytest.importorskip("peft")
    from rl.core.models.lora import LoraSettings

    tokenizer, model_config, _, _, _, batch = setup
    engine = _engine(
        model_config,
        tokenizer,
        role="actor",
        optim=OptimConfig(lr=1e-3),
        lora=LoraSettings(rank=4, alpha=8),
        mini_batch_size=len(batch["responses"]),
    )
    adapted = [n for n, p in engine.model.named_parameters() if p.requires_grad]
    assert adapted and all("lora_" in n and ".language_model." in n for n in adapted)
    engine.train_step(batch, _nll)
    assert engine.compute_logprobs(batch).logprobs.isfinite().all()


def test_the_exported_folder_loads_and_generates_from_an_image(setup, tmp_path):
    from transformers import AutoModelForImageTextToText

    tokenizer, model_config, items, rollout, _, _ = setup
    engine = _engine(model_config, tokenizer, role="actor", optim=OptimConfig())
    engine.save_hf(str(tmp_path / "hf"), tokenizer)
    exported = AutoModelForImageTextToText.from_pretrained(tmp_path / "hf")
    for (name, tensor), (_, original) in zip(
        exported.state_dict().items(), rollout.model.state_dict().items(), strict=True
    ):
        assert torch.equal(tensor, original), name
    item = items[0]
    ids = torch.tensor([item.prompt_ids])
    out = exported.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        pixel_values=item.images.pixel_values,
        image_grid_thw=item.images.image_grid_thw,
        mm_token_type_ids=(ids == exported.config.image_token_id).int(),
        max_new_tokens=3,
        do_sample=False,
    )
    assert out.shape[1] == ids.shape[1] + 3
    greedy = replace(SamplingParams(n=1, max_new_tokens=3, temperature=0.0), prompt_seeds=(0,))
    ours = rollout.generate_with_images([item.prompt_ids], [item.images], greedy)
    assert ours.response_ids[0] == out[0, ids.shape[1] :].tolist()


def test_a_checkpoint_resumes_the_trained_vision_language_model_exactly(setup, tmp_path):
    tokenizer, model_config, _, _, _, batch = setup
    spec = {"optim": OptimConfig(lr=1e-3), "mini_batch_size": len(batch["responses"])}
    trained = _engine(model_config, tokenizer, role="actor", **spec)
    trained.train_step(batch, _nll)
    trained.save(str(tmp_path / "ckpt"))
    resumed = _engine(model_config, tokenizer, role="actor", **spec)
    resumed.load(str(tmp_path / "ckpt"))
    for (name, a), (_, b) in zip(
        trained.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        assert torch.equal(a.detach(), b.detach()), name
    # the next update is the same update: optimizer state and schedule came back too
    trained.train_step(batch, _nll)
    resumed.train_step(batch, _nll)
    assert torch.equal(
        trained.compute_logprobs(batch).logprobs, resumed.compute_logprobs(batch).logprobs
    )


def test_text_and_image_prompts_mix_in_one_call(setup):
    """Chunks without images and chunks with them: every row keeps its own (or none)."""
    tokenizer, _, items, rollout, _, _ = setup
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "How many?"}], add_generation_prompt=True, tokenize=False
    )
    text = tokenizer(rendered, add_special_tokens=False).input_ids
    small = HFRolloutEngine(rollout.model, tokenizer, max_batch_size=2)  # a prompt a chunk
    sampling = SamplingParams(n=2, max_new_tokens=2, prompt_seeds=(1, 2, 3))
    out = small.generate_with_images(
        [text, items[0].prompt_ids, text], [None, items[0].images, None], sampling
    )
    assert [image is None for image in out.images] == [True, True, False, False, True, True]
    assert out.images[2] is items[0].images


def test_gradient_checkpointing_trains_as_without_it(setup):
    tokenizer, model_config, _, _, _, batch = setup
    spec = {"optim": OptimConfig(lr=1e-3), "mini_batch_size": len(batch["responses"])}
    plain = _engine(model_config, tokenizer, role="actor", **spec)
    checkpointed_config = replace(model_config, gradient_checkpointing=True)
    checkpointed = _engine(checkpointed_config, tokenizer, role="actor", **spec)
    assert checkpointed.model.is_gradient_checkpointing
    first, second = plain.train_step(batch, _nll), checkpointed.train_step(batch, _nll)
    assert second["actor/grad_norm"] == pytest.approx(first["actor/grad_norm"], rel=1e-4)
    mask = batch["response_mask"].bool()
    after = plain.compute_logprobs(batch).logprobs[mask]
    assert torch.allclose(checkpointed.compute_logprobs(batch).logprobs[mask], after, atol=1e-5)


def test_a_qwen2_vl_policy_agrees_with_its_rollout(vl_model_folder):
    """The other family's layout (Qwen2-VL: LayerNorm vision blocks, a ratio-sized MLP)."""
    from transformers import AutoTokenizer

    from rl.core.vision.processing import VisionProcessor

    folder = vl_model_folder("qwen2-vl-2b")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vision = VisionProcessor.from_folder(str(folder), tokenizer)
    items = PromptDataset(
        geometry_rows(2, "train"), tokenizer, max_prompt_length=512, vision=vision
    ).items
    model_config = ModelConfig(path=str(folder))
    rollout = HFRolloutEngine(load_causal_lm(model_config, tokenizer), tokenizer)
    sampling = SamplingParams(n=2, max_new_tokens=4, prompt_seeds=(5, 6))
    rollouts = rollout.generate_with_images(
        [it.prompt_ids for it in items], [it.images for it in items], sampling
    )
    batch = build_batch(rollouts, tokenizer.pad_token_id)
    output = _engine(model_config, tokenizer).compute_logprobs(batch)
    mask = batch["response_mask"].bool()
    assert (output.logprobs[mask] - batch["rollout_logprobs"][mask]).abs().max() < 1e-4
