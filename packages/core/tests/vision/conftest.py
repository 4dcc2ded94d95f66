from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def vl_tokenizer(vl_model_folder) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(vl_model_folder())


@pytest.fixture(scope="session")
def vision(vl_model_folder, vl_tokenizer) -> Any:
    from rl.core.vision.processing import VisionProcessor

    return VisionProcessor.from_folder(str(vl_model_folder()), vl_tokenizer)
