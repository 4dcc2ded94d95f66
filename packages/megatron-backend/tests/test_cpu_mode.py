"""`rl.megatron.cpu_mode`, the CPU debug mode: wanted on a CPU only, never installed on
CUDA; once installed, megatron-core's CUDA calls get CPU answers and nobody else's do.

(The engine installing it in every process that builds one, with nothing on PYTHONPATH,
is the user's journey in packages/cli/tests/test_train_megatron.py.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

pytest.importorskip("megatron.core", reason="megatron-core is not installed")

from rl.megatron import cpu_mode

pytestmark = [
    pytest.mark.megatron,
    pytest.mark.filterwarnings("ignore::UserWarning:megatron.*"),
]
NO_CUDA = not torch.cuda.is_available()


def megatron_code(source: str) -> dict:
    """`source` run as if it were a megatron-core module (its frames' `__name__`)."""
    namespace = {"__name__": "megatron.core.caller_for_a_test", "torch": torch}
    exec(compile(source, "<megatron>", "exec"), namespace)
    return namespace


def current(patches: list) -> list:
    return [getattr(owner, name) for owner, name, _ in patches]


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0)])
def test_on_cuda_the_mode_is_not_wanted_and_nothing_is_installed(device, monkeypatch):
    monkeypatch.setattr(cpu_mode, "install", lambda: pytest.fail("installed on CUDA"))
    patches = cpu_mode.patches()
    before = current(patches)
    assert cpu_mode.wanted(device) is False
    assert cpu_mode.install_for(device) is False
    assert all(a is b for a, b in zip(current(patches), before, strict=True))


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_on_a_cpu_the_mode_is_wanted(device, monkeypatch):
    installed = []
    monkeypatch.setattr(cpu_mode, "install", lambda: installed.append(True))
    assert cpu_mode.wanted(device) is True
    assert cpu_mode.install_for(device) is True
    assert installed == [True]


def test_megatron_gets_cpu_answers_and_other_callers_see_torch_unchanged(monkeypatch):
    for owner, name, replacement in cpu_mode.patches():
        monkeypatch.setattr(owner, name, replacement)
    mcore = megatron_code(
        "def device():\n    return torch.cuda.current_device()\n"
        "def zeros():\n    return torch.zeros(2, device='cuda')\n"
        "def flag():\n    return torch.tensor([0.0], device='cuda')\n"
        "def type_of(t):\n    return t.type()\n"
        "def to_gpu(t):\n    return t.cuda()\n"
        "def rng():\n    return torch.cuda.get_rng_state()\n"
    )
    assert mcore["device"]() == torch.device("cpu")
    assert mcore["zeros"]().device.type == mcore["flag"]().device.type == "cpu"
    assert mcore["type_of"](torch.zeros(1)) == "torch.cuda.FloatTensor"
    assert mcore["type_of"](torch.zeros(1, dtype=torch.bfloat16)) == "torch.cuda.BFloat16Tensor"
    assert torch.equal(mcore["rng"](), torch.get_rng_state())
    weight = torch.ones(3)
    assert mcore["to_gpu"](weight) is weight
    # this test is not megatron: torch answers it as it always did
    assert torch.zeros(1).type() == "torch.FloatTensor"
    assert torch.zeros(1).type(torch.float64).dtype == torch.float64
    if NO_CUDA:
        with pytest.raises((AssertionError, RuntimeError)):
            torch.cuda.current_device()
        with pytest.raises((AssertionError, RuntimeError)):
            torch.zeros(1, device="cuda")
        with pytest.raises((AssertionError, RuntimeError)):
            weight.cuda()


def test_install_lasts_for_the_process_and_warns_once():
    """In a fresh interpreter (the pytest process keeps torch as it is)."""
    probe = (
        "import logging, torch\n"
        "logging.basicConfig(format='%(message)s')\n"
        "from rl.megatron import cpu_mode\n"
        "assert cpu_mode.install_for('cpu') and cpu_mode.install_for('cpu')\n"
        "assert hasattr(torch.cuda.current_device, '__wrapped__')\n"
        "print('installed')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "installed"
    assert result.stderr.count("megatron on CPU: a debug mode, slow") == 1, result.stderr
