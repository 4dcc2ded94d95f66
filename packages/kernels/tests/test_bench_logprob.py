"""The logprob benchmark's providers: the torch.compile baseline on CUDA, and a peer that
fails gives its row (with the error) instead of ending the run."""

import argparse

import pytest
import torch

from rl.kernels.bench import logprob


def test_torch_compile_baseline_is_a_provider_on_cuda_only():
    assert list(logprob.providers_for(torch.device("cpu"))) == ["ours", "torch-chunked", "naive"]
    on_cuda = logprob.providers_for(torch.device("cuda"))  # wrapping compiles nothing yet
    assert list(on_cuda)[:4] == ["ours", "torch-chunked", "naive", "torch-compile"]


def _args():
    return argparse.Namespace(device="cpu", dtype="fp32", shape="8,16,32", repeats=1)


def test_a_failing_peer_is_a_row_with_its_error(monkeypatch):
    def broken(hidden, weight, labels):
        raise RuntimeError("no kernel for this GPU")

    providers = {"naive": logprob.naive, "broken-peer": broken}
    monkeypatch.setattr(logprob, "providers_for", lambda device: providers)
    rows = {row["provider"]: row for row in logprob.run(_args())}
    assert rows["naive"]["fwd_ms"] > 0
    assert rows["broken-peer"]["fwd_ms"] is None
    assert rows["broken-peer"]["peak_extra_mib"] == "error: RuntimeError: no kernel for this GPU"


def test_a_failing_baseline_ends_the_run(monkeypatch):
    def broken(hidden, weight, labels):
        raise RuntimeError("broken")

    monkeypatch.setattr(logprob, "providers_for", lambda device: {"naive": broken})
    with pytest.raises(RuntimeError, match="broken"):
        logprob.run(_args())
