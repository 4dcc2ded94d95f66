"""The embedded default: a verifiable arithmetic task generated in code for the tiny model."""

from pathlib import Path

DEMO_CONFIG = Path(__file__).with_name("grpo_demo.yaml")

__all__ = ["DEMO_CONFIG"]
