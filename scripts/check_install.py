"""`pip install rl-core rl-megatron` from the built wheels into a clean virtualenv, then:
the registry finds the `megatron` train engine (and not rl-fsdp's, which is not
installed) and a tiny megatron-core GPT from a Hugging Face config runs forward.

    nox -s build && python scripts/check_install.py [--dist dist] [--keep VENV]

On a machine without CUDA the forward runs in rl-megatron's CPU debug mode
(`rl.megatron.cpu_mode`, from the installed wheel), as a CPU run's engine does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import importlib.util, warnings
warnings.simplefilter("ignore")
from rl.core.registry import check_engine
engine = check_engine("megatron", "train", "actor.strategy")
print("registry:", engine.spec.name, engine.distribution, engine.version)
assert importlib.util.find_spec("rl.fsdp") is None, "rl-fsdp should not be installed"
import os, torch, torch.distributed as dist
from transformers import Qwen2Config
from megatron.core import parallel_state
from rl.megatron import cpu_mode
from rl.megatron.model import build_gpt_model
if not torch.cuda.is_available():
    cpu_mode.install()
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29599", rank=0, world_size=1)
parallel_state.initialize_model_parallel(1, 1)
config = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2)
model = build_gpt_model(config, spec="auto")
ids = torch.randint(0, 64, (2, 8))
logits = model(ids, torch.arange(8).expand(2, 8), None)
assert logits.shape == (2, 8, 64) and torch.isfinite(logits).all()
print("forward:", tuple(logits.shape))
dist.destroy_process_group()
"""


def run(*command: str, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--keep", type=Path, help="build the virtualenv here and keep it")
    args = parser.parse_args()
    wheels = {
        name: sorted(args.dist.glob(f"{name}-*.whl"))
        for name in ("rl_kernels", "rl_core", "rl_megatron")
    }
    missing = [name for name, found in wheels.items() if not found]
    if missing:
        sys.exit(f"no wheel for {', '.join(missing)} in {args.dist}: run `nox -s build` first")
    with tempfile.TemporaryDirectory() as scratch:
        home = args.keep or Path(scratch) / "venv"
        venv.create(home, with_pip=True, clear=True)
        python = str(home / "bin" / "python")
        # one resolve, torch pinned to the CPU build; no .pyc for every installed file (what
        # the probe imports compiles as it loads: half the time of this check)
        ours = [str(found[-1]) for found in wheels.values()]
        run(python, "-m", "pip", "install", "-q", "--no-compile", "torch==2.13.0", *ours)
        import os

        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        run(python, "-c", PROBE, env=env)
    print("install check passed")


if __name__ == "__main__":
    main()
