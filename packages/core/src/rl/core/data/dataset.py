"""`PromptDataset`: the tokenized prompts of a run, with overlong ones filtered if asked."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

from rl.core.data.prompts import (
    PromptItem,
    PromptOptions,
    answer_of,
    data_source_of,
    make_item,
    tokenize_prompt,
)
from rl.core.data.reader import SourcedRow
from rl.core.errors import ConfigError, DataError


def _prompt_lengths(
    rows: Sequence[SourcedRow], options: PromptOptions, tokenizer: Any
) -> list[int]:
    # Measured without truncation so the filter sees the real length.
    measure = replace(options, truncation="right", max_prompt_length=10**9)
    return [len(tokenize_prompt(row, measure, tokenizer)[1]) for row in rows]


def _lengths_in_pool(
    rows: list[SourcedRow], options: PromptOptions, tokenizer: Any, workers: int
) -> list[int]:
    chunk = max(1, -(-len(rows) // workers))
    parts = [rows[i : i + chunk] for i in range(0, len(rows), chunk)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = pool.map(_prompt_lengths, parts, [options] * len(parts), [tokenizer] * len(parts))
        return [length for part in results for length in part]


class PromptDataset:
    """Indexable prompts (`PromptItem`) built from rows and a tokenizer.

    For checks that name a file and row before training (`rl.core.rewards.inputs`) it keeps
    `rows_by_data_source` (the first row of each data_source value), `num_without_answer` and
    `first_row_without_answer` (rows whose answer column is missing or null), `options`, and
    `origins` (each item's file and row).
    """

    def __init__(
        self,
        rows: Sequence[SourcedRow | dict[str, Any]],
        tokenizer: Any,
        *,
        prompt_key: str = "prompt",
        answer_key: str = "answer",
        data_source_key: str = "data_source",
        chat_template: str = "auto",
        max_prompt_length: int = 1024,
        truncation: str = "error",
        filter_overlong_prompts: bool = False,
        filter_num_workers: int = 1,
        tools: Sequence[dict[str, Any]] = (),
        apply_chat_template_kwargs: dict[str, Any] | None = None,
        image_key: str = "images",
        vision: Any = None,
    ) -> None:
        options = PromptOptions(
            prompt_key,
            answer_key,
            data_source_key,
            chat_template,
            max_prompt_length,
            truncation,
            tuple(tools),
            tuple(sorted((apply_chat_template_kwargs or {}).items())),
            image_key,
            vision,
        )
        if chat_template == "native" and getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                "data.chat_template = 'native', but the tokenizer has no chat template; set "
                "data.chat_template: none, or use a model whose tokenizer has one"
            )
        sourced = [
            r if isinstance(r, SourcedRow) else SourcedRow("<memory>", i, r)
            for i, r in enumerate(rows)
        ]
        self.num_filtered = 0
        if not sourced:
            raise DataError("the dataset is empty: no rows")
        if filter_overlong_prompts:
            lengths = (
                _lengths_in_pool(sourced, options, tokenizer, filter_num_workers)
                if filter_num_workers > 1 and len(sourced) > 1
                else _prompt_lengths(sourced, options, tokenizer)
            )
            kept = [row for row, n in zip(sourced, lengths, strict=True) if n <= max_prompt_length]
            self.num_filtered = len(sourced) - len(kept)
            sourced = kept
        if not sourced:
            raise DataError(
                f"the dataset is empty: all {self.num_filtered} prompts are longer than "
                f"data.max_prompt_length = {max_prompt_length} and data.filter_overlong_prompts "
                "dropped them"
            )
        self.items = [make_item(i, row, options, tokenizer) for i, row in enumerate(sourced)]
        self.origins = [(row.source, row.index) for row in sourced]  # each item's file and row
        self.options = options
        self.rows_by_data_source: dict[str, SourcedRow] = {}
        for row in sourced:
            self.rows_by_data_source.setdefault(data_source_of(row, options), row)
        missing = [row for row in sourced if answer_of(row, options) is None]
        self.num_without_answer = len(missing)
        self.first_row_without_answer = missing[0] if missing else None

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> PromptItem:
        return self.items[index]
