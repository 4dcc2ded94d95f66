"""`rl merge`: a checkpoint becomes a Hugging Face folder that gives the same log-probs."""

import subprocess

import torch
from transformers import AutoModelForCausalLM

from rl.core.config import load_config
from rl.core.models import load_causal_lm, load_tokenizer


def logprobs(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=ids).logits.double(), -1)


def test_a_checkpoint_merges_into_a_folder_transformers_loads(tmp_path, rl_executable, tiny_run):
    out = tmp_path / "run"
    run = subprocess.run(
        [
            rl_executable,
            "train",
            *tiny_run,
            "trainer.save_freq=3",
            "trainer.save_hf=true",
            f"trainer.output_dir={out}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    merged = tmp_path / "merged"
    result = subprocess.run(
        [rl_executable, "merge", str(out / "checkpoints" / "global_step_3"), str(merged)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # step 3 is the last: the run's own final export is the same model
    mine = AutoModelForCausalLM.from_pretrained(merged)
    final = AutoModelForCausalLM.from_pretrained(out / "hf")
    ids = torch.randint(
        3, mine.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(logprobs(mine, ids), logprobs(final, ids))
    # trainer.save_hf: the checkpoint carries the same folder already
    saved = AutoModelForCausalLM.from_pretrained(
        out / "checkpoints" / "global_step_3" / "actor" / "hf"
    )
    assert torch.equal(logprobs(saved, ids), logprobs(final, ids))
    # and it is the trained model, not the one the run started from
    config = load_config(out / "config.yaml")
    initial = load_causal_lm(config.model, load_tokenizer(config.model), seed=config.trainer.seed)
    assert not torch.equal(logprobs(mine, ids), logprobs(initial, ids))


def test_merging_a_torn_or_missing_checkpoint_is_one_clear_error(tmp_path, rl_executable):
    (tmp_path / "global_step_1").mkdir()
    result = subprocess.run(
        [rl_executable, "merge", str(tmp_path / "global_step_1"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "manifest" in result.stderr
    assert not (tmp_path / "out").exists()
