"""Fixtures every package's tests share (pytest collects this file from the rootdir).

`verl_release(version)`: the folder holding verl's released package (`verl/`) as pip
installs it, fetched by scripts/fetch-upstream.sh (run by scripts/install-dev.sh). Tests
read its config files as a verl user's run reads them, and load its reward functions as
the oracle of rl's verl-compatible scorers. Nothing of verl is imported by rl itself.

`warm_ranks(script, argvs, preload=...)`: the ranks of a multi-process scenario, forked from
a server that imported torch, transformers (and megatron-core, ...) once per session
(scripts/warm_ranks.py): a rank's 3-7 s of imports are paid once, not per rank and test.

`model_folder(shape, **kwargs)`: a Hugging Face folder shaped like a released model
(`rl.core.models.shapes`: "qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b"; full-size
tokenizer, chat template, random weights), built once per distinct arguments per session.

Threads: under `pytest -n N` each worker, and every process it starts (`rl train`, vLLM,
torchrun ranks), uses cores // N torch/OpenMP threads (OMP_NUM_THREADS, unless it was given):
on CI's 2 cores, 2 workers of 2 threads each left OpenMP's spinning threads fighting for
the cores and ran the compute-bound tests 2-4x slower. `threads_per_worker` is the rule.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent
# the suite's time budget (durations per test and worker, files handed out longest first):
# every option of it is off unless given, as `nox -s tests` gives them
sys.path.insert(0, str(ROOT / "scripts"))
pytest_plugins = ["suite_budget", "pytester"]  # pytester: the tools' own tests


def threads_per_worker(environ: Mapping[str, str], cores: int) -> int | None:
    """Torch threads for one pytest-xdist worker: an equal share of `cores`, at least 1;
    None outside xdist or when OMP_NUM_THREADS is already set (the caller's choice)."""
    workers = environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not workers.isdigit() or int(workers) < 1 or environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, cores // int(workers))


# xdist sets PYTEST_XDIST_WORKER_COUNT before a worker reads its conftest files: this runs
# before any test imports torch, and the processes tests start inherit it
WORKER_THREADS = threads_per_worker(os.environ, len(os.sched_getaffinity(0)))
if WORKER_THREADS is not None:
    os.environ["OMP_NUM_THREADS"] = str(WORKER_THREADS)
    if "torch" in sys.modules:  # a plugin imported it first: its pool may have started
        sys.modules["torch"].set_num_threads(WORKER_THREADS)


@pytest.fixture(scope="session")
def worker_threads() -> tuple[int | None, Callable[..., int | None]]:
    """(the threads this worker set, or None; the rule, `threads_per_worker`)."""
    return WORKER_THREADS, threads_per_worker


UPSTREAM = ROOT / ".upstream"
# every verl release from 0.4.1 on; keep in step with scripts/fetch-upstream.sh
VERL_RELEASES = ("0.4.1", "0.5.0", "0.6.0", "0.6.1", "0.7.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")


def verl_release_path(version: str) -> Path:
    """`.upstream/verl-<version>`; the test fails (never skips) when it was not fetched."""
    if version not in VERL_RELEASES:
        raise ValueError(f"verl {version} is not fetched; fetched: {', '.join(VERL_RELEASES)}")
    root = UPSTREAM / f"verl-{version}"
    if not (root / "verl" / "trainer" / "config" / "ppo_trainer.yaml").is_file():
        pytest.fail(f"{root} is missing: run scripts/fetch-upstream.sh (install-dev.sh does)")
    return root


@pytest.fixture(scope="session")
def verl_quickstart():
    """`verl_quickstart(model, train, val)` -> verl's quickstart overrides with these paths
    (the lists live in rl-cli's `rl.bench.verl_job`, which the verl-journey benchmark runs)."""
    from rl.bench.verl_job import verl_quickstart_overrides

    return verl_quickstart_overrides


@pytest.fixture(scope="session")
def verl_release():
    """`verl_release(version)` -> the folder that holds verl's package of that release."""
    return verl_release_path


@pytest.fixture(scope="session")
def warm_ranks():
    """`warm_ranks(script, argvs, preload=(), timeout=600)`: run `python script *argv` for
    every argv at once, forked from a warm server (one per script and preload, kept for the
    session) with OMP_NUM_THREADS=1; fails naming each rank that did not exit 0, with the end
    of its output; else returns every rank's output."""
    from warm_ranks import WarmRanks

    servers: dict[tuple[str, tuple[str, ...]], WarmRanks] = {}

    def run(script, argvs, preload=(), timeout=600):
        key = (str(script), tuple(preload))
        if key not in servers:
            servers[key] = WarmRanks(preload, scripts=[str(script)])
        results = servers[key].run(script, argvs, timeout=timeout)
        failed = [
            f"rank {rank} failed ({code}):\n{output[-3000:]}"
            for rank, (code, output) in enumerate(results)
            if code != 0
        ]
        assert not failed, "\n".join(failed)
        return [output for _, output in results]

    yield run
    for server in servers.values():
        server.close()


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory) -> Callable[..., Path]:
    """`model_folder(shape, **kwargs)` -> the folder `build_model_folder(shape, ..., **kwargs)`
    wrote (num_layers, seed, dtype, hidden_size, intermediate_size), once per session.

    Tests must not write into it: the same folder serves every test asking for it.
    """
    built: dict[tuple[tuple[str, Any], ...], Path] = {}

    def folder(shape: str, **kwargs: Any) -> Path:
        from rl.core.models.shapes import build_model_folder

        # defaults filled in, so that num_layers=2 and no num_layers share one folder
        call = inspect.signature(build_model_folder).bind(shape, None, **kwargs)
        call.apply_defaults()
        key = tuple((k, v) for k, v in call.arguments.items() if k != "path")
        if key not in built:
            changed = [f"{k}{v}" for k, v in kwargs.items()]
            path = tmp_path_factory.mktemp("-".join([shape, *changed]))
            built[key] = build_model_folder(shape, path, **kwargs)
        return built[key]

    return folder


@pytest.fixture(scope="session")
def vl_model_folder(tmp_path_factory) -> Callable[..., Path]:
    """`vl_model_folder(shape="qwen2.5-vl-3b", **kwargs)` -> a vision-language folder
    (`rl.core.models.vl_shapes.build_vl_model_folder`), once per session: by default 2
    language layers 256 wide (2 heads of 128), a 2-block vision tower 160 wide (2 heads of
    80); the vocabulary, tokenizer, chat template, patch and merge sizes are the release's.
    Tests must not write into it."""
    built: dict[tuple[tuple[str, Any], ...], Path] = {}
    small = {
        "hidden_size": 256,
        "intermediate_size": 512,
        "vision_hidden_size": 160,
        "vision_intermediate_size": 320,
    }

    def folder(shape: str = "qwen2.5-vl-3b", **kwargs: Any) -> Path:
        from rl.core.models.vl_shapes import build_vl_model_folder

        arguments = {**small, **kwargs}
        key = (("shape", shape), *sorted(arguments.items()))
        if key not in built:
            path = tmp_path_factory.mktemp(shape)
            built[key] = build_vl_model_folder(shape, path, **arguments)
        return built[key]

    return folder


@pytest.fixture(scope="session")
def judge_folder(model_folder, tmp_path_factory) -> Callable[[str], Path]:
    """`judge_folder(word, then_stop=False)` -> a judge model folder whose verdict is known: a real-shape
        Qwen2.5 folder (its tokenizer and chat template; 64-wide heads, so vLLM's CPU build runs
        it too) whose weights make greedy decoding say `word`'s first token whatever the prompt (" yes"
    and " no" are one token each in Qwen2.5's vocabulary).
        Every token's embedding is zero; layer 0's value bias and output projection put a
        constant e_0 into the residual stream (attention averages equal values), every other
        weight is zero, so the final norm hands the head sqrt(d) * e_0, and the head's only
        non-zero entry is the chosen token's (tied: also that token's embedding, harmless).
        `then_stop`: the word is said once (sure at any temperature up to 1), then the end
        of the turn: the word's embedding, tied to its head row, carries a second direction
        that only the stop tokens' rows read, five times stronger."""
    root = tmp_path_factory.mktemp("judges")
    source = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=128, intermediate_size=256)

    def folder(word: str, then_stop: bool = False) -> Path:
        import shutil

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        target = root / ((word.strip() or "blank") + ("-stop" if then_stop else ""))
        if target.exists():
            return target
        tokenizer = AutoTokenizer.from_pretrained(source)
        token = tokenizer(word, add_special_tokens=False)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.zero_()
            model.model.norm.weight.fill_(1.0)
            for layer in model.model.layers:
                layer.input_layernorm.weight.fill_(1.0)
                layer.post_attention_layernorm.weight.fill_(1.0)
            attention = model.model.layers[0].self_attn
            attention.v_proj.bias[0] = 1.0
            attention.o_proj.weight[0, 0] = 1.0
            model.lm_head.weight[token["input_ids"][0], 0] = 1.0
            if then_stop:  # the word's embedding (tied: its head row) points at the stop
                word = token["input_ids"][0]
                model.lm_head.weight[word, 0] = 4.0  # sure at any temperature up to 1
                model.lm_head.weight[word, 1] = 4.0
                stops = {tokenizer.eos_token_id, *_ids(model.generation_config.eos_token_id)}
                for stop in stops:
                    model.lm_head.weight[stop, 1] = 20.0
        scratch = target.with_name(target.name + ".tmp")
        shutil.copytree(source, scratch)
        model.save_pretrained(scratch)
        scratch.rename(target)
        return target

    return folder


@pytest.fixture(scope="session")
def classifier_folder(model_folder, tmp_path_factory):
    """A discriminative reward model's folder: a real-shape Qwen2.5 sequence classifier
    (one label, random weights; its full tokenizer and chat template; 64-wide heads, so
    vLLM's CPU build serves it too)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, Qwen2ForSequenceClassification

    source = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=128, intermediate_size=256)
    config = AutoConfig.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    config.num_labels, config.pad_token_id = 1, tokenizer.pad_token_id
    config.architectures = ["Qwen2ForSequenceClassification"]
    torch.manual_seed(0)
    target = tmp_path_factory.mktemp("reward-model")
    Qwen2ForSequenceClassification(config).save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


@pytest.fixture
def ray_stopped_after():
    """Ray shut down after the test, if it started it: a local cluster started inside a
    test (its CPU count, its driver's working directory) is not left for the next file."""
    import sys

    was_up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    yield
    if not was_up and "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


@pytest.fixture(scope="session")
def process_gone() -> Callable[..., bool]:
    """`process_gone(pid, timeout=60.0)`: whether `pid` ends within `timeout` (a liveness
    bound; a zombie counts as gone)."""
    return _process_gone


def _process_gone(pid: int, timeout: float = 60.0) -> bool:
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ")[-1].startswith("Z"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    return False


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)
