"""On-policy distillation in the step, on the tiny model: the teacher (a model folder of
its own) scores the student's samples as an independent forward of that folder does, the
loss the actor's update receives is verl's formula, the advantages ROLL's, a teacher with
another vocabulary is refused, and flipping `distillation.enabled` changes the run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.config.schema import ModelConfig, TinyModelConfig
from rl.core.demo import DEMO_CONFIG
from rl.core.engines import LogprobOutput
from rl.core.models import build_char_tokenizer, load_causal_lm
from rl.core.trainer import algorithm_setup, run_training
from rl.core.trainer.build import build_context
from rl.core.trainer.step import _prepare, generate, score
from rl.core.trainer.timers import PhaseTimer


def save_teacher(folder, seed=7, tokenizer=None):
    """A tiny Qwen2 of another shape and init than the student, with the char tokenizer."""
    tokenizer = tokenizer or build_char_tokenizer()
    tiny = TinyModelConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=1)
    model = load_causal_lm(ModelConfig(tiny=tiny), tokenizer, seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return save_teacher(tmp_path_factory.mktemp("teacher"))


def distill(teacher, *overrides):
    return [
        "distillation.enabled=true",
        f"distillation.teacher_model.model_path={teacher}",
        *overrides,
    ]


def test_teacher_logprobs_are_the_teacher_folder_s_on_the_student_samples(
    teacher, tmp_path, one_tiny_step
):
    config = load_config(
        DEMO_CONFIG, [*one_tiny_step, f"trainer.output_dir={tmp_path}", *distill(teacher)]
    )
    ctx = build_context(config, tmp_path)
    try:
        ctx.sync_weights(0)  # as the trainer does before anything is generated
        items = [ctx.train_data[i] for i in range(4)]
        collected = score(ctx, generate(ctx, items, 0))
        batch = collected.batch
        metrics = _prepare(ctx, batch, PhaseTimer())
    finally:
        ctx.launched.shutdown()
    assert ctx.teacher is not None
    # independent: the folder through transformers, float64, one row at a time, unpadded
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(teacher, torch_dtype=torch.float64).eval()
    temperature = config.rollout.temperature
    mask = batch["response_mask"]
    for row in range(batch["responses"].shape[0]):
        prompt = batch["prompts"][row][
            batch["attention_mask"][row, : batch["prompts"].shape[1]] > 0
        ]
        length = int(mask[row].sum())
        response = batch["responses"][row, :length]
        ids = torch.cat([prompt, response])[None]
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1 : -1] / temperature
        expected = torch.log_softmax(logits, -1).gather(-1, response[:, None])[:, 0]
        got = batch["teacher_logprobs"][row, :length].double()
        assert torch.allclose(got, expected, atol=2e-4), (row, got, expected)
    student = batch.get("old_logprobs", batch["rollout_logprobs"])
    reverse_kl = float(((student - batch["teacher_logprobs"]) * mask).sum() / mask.sum())
    assert metrics["distillation/reverse_kl"] == pytest.approx(reverse_kl, rel=1e-5)
    assert metrics["distillation/reverse_kl"] > 0.1  # another model: far from the student


def loss_case(seed=0, rows=3, width=5):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(rows, width, generator=g) * 3
    micro = {
        "old_logprobs": logp + 0.05 * torch.randn(rows, width, generator=g),
        "teacher_logprobs": logp + torch.randn(rows, width, generator=g),
        "advantages": torch.randn(rows, width, generator=g),
        "response_mask": (torch.rand(rows, width, generator=g) > 0.3).float(),
        "rollout_logprobs": logp.clone(),
    }
    micro["response_mask"][:, 0] = 1
    return logp, micro


def k3(a, b):
    return min(max(math.exp(b - a) - (b - a) - 1, -10), 10)


def test_the_actor_s_loss_is_verl_s_distillation_loss(teacher):
    logp, micro = loss_case()
    output = LogprobOutput(logp.clone().requires_grad_(True), None)
    base = load_config(DEMO_CONFIG, [])
    pure = load_config(
        DEMO_CONFIG, distill(teacher, "distillation.distillation_loss.use_task_rewards=false")
    )
    mixed = load_config(
        DEMO_CONFIG, distill(teacher, "distillation.distillation_loss.distillation_loss_coef=0.3")
    )
    mask = micro["response_mask"]
    terms = [
        k3(a, b) * m
        for a, b, m in zip(
            logp.flatten().tolist(),
            micro["teacher_logprobs"].flatten().tolist(),
            mask.flatten().tolist(),
            strict=True,
        )
    ]
    expected = sum(terms) / float(mask.sum())  # token-mean over the mini-batch
    got, metrics = algorithm_setup.actor_loss_fn(pure)(output, micro, micro)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    assert metrics["actor/distillation_loss"] == pytest.approx(expected, rel=1e-6)
    policy, _ = algorithm_setup.actor_loss_fn(base)(output, micro, micro)
    got, _ = algorithm_setup.actor_loss_fn(mixed)(output, micro, micro)
    assert got.item() == pytest.approx(policy.item() + 0.3 * expected, rel=1e-6)
    # as_advantage: the loss is the policy loss alone (the estimate is in the advantages)
    roll = load_config(DEMO_CONFIG, distill(teacher, "distillation.as_advantage=true"))
    got, _ = algorithm_setup.actor_loss_fn(roll)(output, micro, micro)
    assert got.item() == pytest.approx(policy.item(), rel=1e-9)


def test_the_advantages_are_roll_s_opd_advantages(teacher):
    _, micro = loss_case(1, rows=4, width=3)
    batch = {
        **micro,
        "token_level_scores": torch.zeros(4, 3),
        "token_level_rewards": torch.tensor([[0, 0, 1.0], [0, 0, 0], [0, 0, 2.0], [0, 0, 0]]),
        "responses": torch.zeros(4, 3, dtype=torch.long),
    }
    batch["response_mask"] = torch.ones(4, 3)
    uids = ["a", "a", "b", "b"]
    common = ["algorithm.adv_estimator=grpo", "distillation.as_advantage=true"]
    task_only = load_config(DEMO_CONFIG, ["algorithm.adv_estimator=grpo"])
    algorithm_setup.assign_advantages(task_only, batch, uids)
    task = batch["advantages"].clone()
    kl = micro["old_logprobs"] - micro["teacher_logprobs"]
    mixed = load_config(
        DEMO_CONFIG,
        distill(
            teacher,
            *common,
            "distillation.distillation_loss.loss_mode=k1",
            "distillation.distillation_loss.distillation_loss_coef=0.5",
        ),
    )
    algorithm_setup.assign_advantages(mixed, batch, uids)
    assert torch.allclose(batch["advantages"], task - 0.5 * kl, atol=1e-6)
    pure = load_config(
        DEMO_CONFIG,
        distill(
            teacher,
            *common,
            "distillation.distillation_loss.loss_mode=k1",
            "distillation.distillation_loss.use_task_rewards=false",
        ),
    )
    algorithm_setup.assign_advantages(pure, batch, uids)
    assert torch.allclose(batch["advantages"], -kl, atol=1e-6)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["distillation.distillation_loss.loss_mode=k1"], "use_policy_gradient"),
        (["distillation.distillation_loss.loss_mode=forward_kl_topk"], "top-k"),
        (["distillation.distillation_loss.policy_loss_mode=gspo"], "policy_loss_mode"),
        (["distillation.teacher_model.model_path=null"], "distillation.teacher_model.model_path"),
    ],
)
def test_what_rl_cannot_run_is_refused_by_name(teacher, overrides, needle):
    with pytest.raises(ConfigError, match="distillation") as error:
        load_config(DEMO_CONFIG, distill(teacher, *overrides))
    assert needle in str(error.value)


def permuted_char_tokenizer():
    """The char tokenizer with two characters' ids swapped."""
    from tokenizers import Regex, Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = dict(build_char_tokenizer().get_vocab())
    vocab["1"], vocab["2"] = vocab["2"], vocab["1"]
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>"
    )


def test_a_teacher_with_another_vocabulary_is_refused(tmp_path, one_tiny_step):
    folder = save_teacher(tmp_path / "teacher", tokenizer=permuted_char_tokenizer())
    config = load_config(
        DEMO_CONFIG, [*one_tiny_step, f"trainer.output_dir={tmp_path / 'out'}", *distill(folder)]
    )
    with pytest.raises(ConfigError, match="distillation.teacher_model.model_path") as error:
        run_training(config)
    assert "vocabulary differs" in str(error.value)
    assert "2 of the student's" in str(error.value)


def _last_row(tiny, tmp_path, name, *overrides):
    out = tmp_path / name
    config = load_config(DEMO_CONFIG, [*tiny, f"trainer.output_dir={out}", *overrides])
    run_training(config)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows[-1]


def test_flipping_enabled_changes_the_run(teacher, tmp_path, one_tiny_step):
    off = _last_row(
        one_tiny_step, tmp_path, "off", f"distillation.teacher_model.model_path={teacher}"
    )
    on = _last_row(
        one_tiny_step,
        tmp_path,
        "on",
        *distill(teacher, "distillation.distillation_loss.use_task_rewards=false"),
    )
    assert "distillation/reverse_kl" not in off
    assert on["reward/mean"] == pytest.approx(off["reward/mean"])  # same samples
    assert on["actor/loss"] != pytest.approx(off["actor/loss"], abs=1e-6)
    assert on["actor/loss"] == pytest.approx(on["actor/distillation_loss"], rel=1e-6)
    pure = _last_row(
        one_tiny_step,
        tmp_path,
        "roll",
        *distill(
            teacher,
            "distillation.as_advantage=true",
            "distillation.distillation_loss.loss_mode=k1",
            "distillation.distillation_loss.use_task_rewards=false",
        ),
    )
    # every valid token's advantage is -(log p - log q): their mean is minus the reverse KL
    assert pure["advantages/mean"] == pytest.approx(-pure["distillation/reverse_kl"], rel=1e-4)
