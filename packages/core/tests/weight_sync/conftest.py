import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"weight_sync_tests_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def receiver():
    """The helpers in _receiver.py (BufferingEngine, tiny_model)."""
    return _load("_receiver")
