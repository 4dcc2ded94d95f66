"""verl's vision-language GRPO example as its users run it: verl's own launch script
(`examples/grpo_trainer/run_qwen2_5_vl-7b.sh`, verbatim) over verl's `ppo_trainer.yaml`,
run from a checkout laid out as verl's. It converts with nothing refused (its image key,
and the freeze-vision variant's `freeze_vision_tower`, mapped), and trains 2 steps shrunk
on a Qwen2.5-VL-shaped folder with rows laid out as verl's geo3k preprocessing writes them
(figures as image structs, `<image>` in the problem), scored by verl's geo3k rule; the
images reach the trainer (its log-probs equal the rollout's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rl.cli.convert_cmd import convert_config

UPSTREAM = Path(__file__).parent / "verl/upstream"
SCRIPT = "examples/grpo_trainer/run_qwen2_5_vl-7b.sh"
FROZEN = "examples/grpo_trainer/run_qwen2_5_vl-7b_freeze_vision.sh"

pytest.importorskip("PIL")


@pytest.fixture
def checkout(verl_release, tmp_path, monkeypatch):
    """verl's checkout as its scripts expect it: the package (0.9.0's) beside examples/."""
    root = tmp_path / "verl"
    root.mkdir()
    (root / "verl").symlink_to(verl_release("0.9.0") / "verl")
    shutil.copytree(UPSTREAM / "examples", root / "examples")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return root


def test_verls_vl_example_converts_with_nothing_refused(checkout):
    config, report = convert_config("verl", checkout / SCRIPT, [])
    assert [e.source for e in report.entries if e.status == "unsupported"] == []
    assert config.data.image_key == "images" and not config.actor.freeze_vision_tower
    assert config.algorithm.adv_estimator == "grpo" and config.rollout.n == 5
    assert config.actor.use_kl_loss and config.actor.kl_loss_type == "low_var_kl"
    frozen, report = convert_config("verl", checkout / FROZEN, [])
    assert [e.source for e in report.entries if e.status == "unsupported"] == []
    assert frozen.actor.freeze_vision_tower


def test_its_vllm_rollout_is_refused_by_name_for_a_vision_language_model(
    checkout, vl_model_folder, tmp_path, shrunk
):
    """vLLM's CPU build cannot load Qwen2.5-VL here (its model module imports transformers'
    torchvision image processor, and no CPU torchvision exists for this torch), and rl's
    vllm engine does not pass images: the run is refused, never trained blind."""
    from rl.core.config import ConfigError
    from rl.core.models.loading import load_tokenizer
    from rl.core.workers.build import build_rollout_engine

    config, _ = convert_config("verl", checkout / SCRIPT, [])
    assert config.rollout.name == "vllm"
    tree = shrunk.tiny_cpu_run(config, tmp_path / "unused.parquet", tmp_path / "out")
    tree["model"].update(path=str(vl_model_folder()))
    tree["rollout"].update(name="vllm")
    small = shrunk.build(tree)
    with pytest.raises(ConfigError, match="rollout.name = vllm with the vision-language model"):
        build_rollout_engine(small, load_tokenizer(small.model))


def test_its_megatron_variant_is_refused_by_name_for_a_vision_language_model(
    checkout, vl_model_folder, tmp_path, shrunk
):
    """verl runs the example on megatron too (run_qwen2_5_vl-7b-megatron.sh); rl's megatron
    engine is text-only, so the actor is refused before any weight loads."""
    pytest.importorskip("megatron.core")
    from rl.core.config import ConfigError
    from rl.core.models.loading import load_tokenizer
    from rl.core.workers.build import build_train_engine

    config, _ = convert_config("verl", checkout / SCRIPT, [])
    tree = shrunk.tiny_cpu_run(config, tmp_path / "unused.parquet", tmp_path / "out")
    tree["model"].update(path=str(vl_model_folder()))
    tree["actor"].update(strategy="megatron")
    small = shrunk.build(tree)
    with pytest.raises(ConfigError, match="actor.strategy = megatron with the vision-language"):
        build_train_engine(small, "actor", load_tokenizer(small.model), 2)


@pytest.mark.slow
def test_verls_vl_example_trains_two_steps_on_geo3k_rows(
    checkout, vl_model_folder, tmp_path, shrunk
):
    from rl.core.data.verl_layout import write_parquet
    from rl.core.data.visual_tasks import GEO3K_SOURCE, geometry_rows
    from rl.core.models.loading import load_tokenizer
    from rl.core.trainer import run_training
    from rl.core.trainer.build import build_dataset

    config, _ = convert_config("verl", checkout / FROZEN, [])
    data = write_parquet(geometry_rows(8, "train"), tmp_path / "geo3k" / "train.parquet")
    tree = shrunk.tiny_cpu_run(config, data, tmp_path / "out")
    tree["model"].update(path=str(vl_model_folder()))
    tree["data"].update(chat_template="auto", max_prompt_length=256, max_response_length=8)
    assert tree["rollout"]["dtype"] == "bfloat16"  # verl's rollout default
    tree["rollout"]["dtype"] = "auto"  # the trainer's float32: log-probs compared exactly
    run_training(shrunk.build(tree))
    lines = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line) for line in lines if '"mismatch/abs_logprob_diff"' in line]
    assert len(steps) == 2
    # the trainer's log-probs (with the images) equal the HF rollout's; without them they
    # are off by far more (test_vision.py)
    assert all(step["mismatch/abs_logprob_diff"] < 1e-4 for step in steps)
    assert all(step["actor/kl_loss"] >= 0 for step in steps)  # the reference saw them too
    small = shrunk.build(tree)
    prompts = build_dataset(small, small.data.train_files, 0, 0, load_tokenizer(small.model))
    for item in prompts.items:
        assert item.data_source == GEO3K_SOURCE
        widened = item.images.placeholder_tokens(2)
        assert item.prompt_ids.count(151655) == sum(widened)  # <|image_pad|> x merged patches
        assert "<think>" in item.prompt_text and "\\boxed{}" in item.prompt_text
