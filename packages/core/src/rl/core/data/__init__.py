"""Data: reading rows, tokenizing prompts, and the resumable prompt sampler."""

from rl.core.data.dataset import PromptDataset
from rl.core.data.prompts import PromptItem, PromptOptions
from rl.core.data.reader import SUPPORTED, SourcedRow, read_rows
from rl.core.data.sampler import PromptSampler

__all__ = [
    "SUPPORTED",
    "PromptDataset",
    "PromptItem",
    "PromptOptions",
    "PromptSampler",
    "SourcedRow",
    "read_rows",
]
