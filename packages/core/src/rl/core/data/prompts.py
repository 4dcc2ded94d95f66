"""Rows -> tokenized prompts: prompt column or chat messages, chat template, length limits.

Chat messages go through the tokenizer's chat template as verl applies it:
`apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
**data.apply_chat_template_kwargs)`, then tokenized without adding special tokens (the
template wrote them: no second BOS). A plain-text prompt is tokenized as it is, with the
tokenizer's special tokens (`data.chat_template: auto`, the default); `native` renders a
plain-text prompt as one user message too, and `none` joins the messages' contents with
newlines instead of templating them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl.core.data import roll_layout
from rl.core.data.reader import SourcedRow
from rl.core.errors import DataError
from rl.core.vision.inputs import ImageInputs


@dataclass(frozen=True)
class PromptItem:
    """One prompt ready for rollout; `index` is its position in the dataset."""

    index: int
    prompt_ids: list[int]
    prompt_text: str
    ground_truth: Any
    data_source: str
    extra: dict[str, Any] = field(default_factory=dict)  # the row's other columns
    extra_info: dict[str, Any] = field(default_factory=dict)  # a reward function's extra_info
    # the chat messages the chat template rendered into prompt_text (None: a plain prompt);
    # a reward model renders them with its own template (verl's reward loop)
    chat: list[dict[str, Any]] | None = None
    # a vision-language row's images, processed (their `<|image_pad|>` runs are in
    # prompt_ids); None: a text prompt
    images: ImageInputs | None = None


@dataclass(frozen=True)
class PromptOptions:
    prompt_key: str = "prompt"
    answer_key: str = "answer"  # "answer" also finds verl's reward_model.ground_truth
    data_source_key: str = "data_source"
    chat_template: str = "auto"  # auto | native | none (see the module docstring)
    max_prompt_length: int = 1024
    truncation: str = "error"  # error | left | right
    tools: tuple[dict[str, Any], ...] = ()  # agentic runs: described to the chat template
    template_kwargs: tuple[tuple[str, Any], ...] = ()  # data.apply_chat_template_kwargs
    image_key: str = "images"  # data.image_key: the column of a row's images
    # a vision-language model's image processing (`rl.core.vision.processing`); None: the
    # model reads text only, and a row with images is refused
    vision: Any = None


# verl's data layout keeps the ground truth here (its preprocessing scripts write it)
VERL_GROUND_TRUTH = "reward_model.ground_truth"


def lookup(data: dict[str, Any], dotted: str) -> Any:
    """`data["a"]["b"]` for "a.b"; KeyError when any part is missing."""
    value: Any = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def _messages(row: SourcedRow, options: PromptOptions) -> list[dict[str, str]] | str:
    data = row.data
    if options.prompt_key in data:
        value = data[options.prompt_key]
    elif "messages" in data:
        value = data["messages"]
    else:
        raise DataError(
            f"{row.source}, row {row.index}: no prompt column {options.prompt_key!r} (nor "
            f"'messages'); columns are {sorted(data)}. Set data.prompt_key to the right column."
        )
    value = roll_layout.messages_of(value)  # ROLL's layout: messages as a JSON string
    where = f"{row.source}, row {row.index}"
    if isinstance(value, str):
        if not value.strip():
            raise DataError(
                f"{where}: the prompt ({options.prompt_key!r}) is empty; give every row a "
                "prompt, or drop the row"
            )
        return value
    if isinstance(value, Sequence) and len(value) == 0:
        raise DataError(
            f"{where}: the prompt is an empty list of messages; give "
            "each row at least one {role, content} message"
        )
    if isinstance(value, Sequence) and all(isinstance(m, dict) and "content" in m for m in value):
        return [_message(where, number, m) for number, m in enumerate(value, start=1)]
    raise DataError(
        f"{row.source}, row {row.index}: the prompt must be a string or a list "
        f"of {{role, content}} messages, got {type(value).__name__}"
    )


def _message(where: str, number: int, message: dict[str, Any]) -> dict[str, str]:
    """A {role, content} message, refused without a role or with empty content."""
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise DataError(
            f"{where}: message {number} has no 'role' (got {role!r}); give every message "
            "a role (system, user, assistant or tool)"
        )
    content = message["content"]
    if content is None or not str(content).strip():
        raise DataError(
            f"{where}: message {number} ({role}) has empty content; give it text, or drop "
            "the message (or the row)"
        )
    return {"role": role, "content": str(content)}


def templated(prompt: list[dict[str, str]] | str, options: PromptOptions) -> bool:
    """Whether the prompt goes through the chat template."""
    if options.chat_template == "native":
        return True
    return options.chat_template == "auto" and not isinstance(prompt, str)


def prompt_text(row: SourcedRow, options: PromptOptions, tokenizer: Any) -> str:
    return _rendered(row, options, tokenizer)[0]


def _rendered(row: SourcedRow, options: PromptOptions, tokenizer: Any) -> tuple[str, bool]:
    """The prompt's text and whether the chat template wrote it."""
    prompt = _messages(row, options)
    if not templated(prompt, options):
        return (
            prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
        ), False
    if getattr(tokenizer, "chat_template", None) is None:
        raise DataError(
            f"{row.source}, row {row.index}: the prompt is chat messages, but the tokenizer "
            "of model.path has no chat template to render them with. Give the model folder "
            "one (chat_template in tokenizer_config.json, or model.custom_chat_template), "
            "or set data.chat_template: none to join the messages' contents with newlines"
        )
    messages = chat_messages(row, options)
    if options.vision is not None and messages is not None:
        from rl.core.vision.processing import content_parts

        messages = [{**m, "content": content_parts(str(m["content"]))} for m in messages]
    text = tokenizer.apply_chat_template(
        messages,
        tools=list(options.tools) or None,
        add_generation_prompt=True,
        tokenize=False,
        **dict(options.template_kwargs),
    )
    return str(text), True


def chat_messages(row: SourcedRow, options: PromptOptions) -> list[dict[str, Any]] | None:
    """The messages the chat template renders for the row, or None (a plain prompt)."""
    prompt = _messages(row, options)
    if not templated(prompt, options):
        return None
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def tokenize_prompt(
    row: SourcedRow, options: PromptOptions, tokenizer: Any
) -> tuple[str, list[int]]:
    """(text, ids) of the row's prompt, truncated as `truncation` says."""
    text, ids, _ = prompt_inputs(row, options, tokenizer)
    return text, ids


def _row_images(row: SourcedRow, options: PromptOptions, by_template: bool) -> ImageInputs | None:
    """The row's images, processed, after checking them against its placeholders."""
    from rl.core.vision.images import open_image
    from rl.core.vision.processing import count_placeholders

    where = f"{row.source}, row {row.index}"
    cells = row.data.get(options.image_key)
    cells = [] if cells is None else list(cells)
    prompt = _messages(row, options)
    messages = [{"content": prompt}] if isinstance(prompt, str) else prompt
    if count_placeholders(messages, "<video>"):
        raise DataError(f"{where}: the prompt has a <video> placeholder; videos are not read yet")
    if options.vision is None:
        if cells:
            raise DataError(
                f"{where}: the row has {len(cells)} image(s) in column {options.image_key!r}, "
                "but model.path is a text-only model, which would train without seeing "
                "them; use a vision-language model (Qwen2-VL, Qwen2.5-VL) or drop the column"
            )
        return None
    placeholders = count_placeholders(messages)
    if placeholders != len(cells):
        raise DataError(
            f"{where}: the prompt has {placeholders} <image> placeholder(s) and column "
            f"{options.image_key!r} {len(cells)} image(s); give each image one <image> where "
            "it belongs in the text"
        )
    if not cells:
        return None
    if not by_template:
        raise DataError(
            f"{where}: a prompt with images goes through the chat template (which writes "
            "the image tokens); set data.chat_template: auto or native"
        )
    folder = Path(row.source).parent if Path(row.source).is_file() else None
    opened = [
        open_image(cell, f"{where}, image {number}", folder)
        for number, cell in enumerate(cells, start=1)
    ]
    return options.vision.process(opened)


def prompt_inputs(
    row: SourcedRow, options: PromptOptions, tokenizer: Any
) -> tuple[str, list[int], ImageInputs | None]:
    """(text, ids, images) of the row's prompt: ids with each image's `<|image_pad|>` run
    widened to its merged patches (as the processor does), truncated as `truncation` says
    (a prompt with images is never cut: that would cut an image's tokens)."""
    text, by_template = _rendered(row, options, tokenizer)
    images = _row_images(row, options, by_template)
    widened = text if images is None else options.vision.widen(text, images)
    # The chat template already wrote any special tokens into the text.
    ids = tokenizer(widened, add_special_tokens=not by_template).input_ids
    limit = options.max_prompt_length
    if len(ids) > limit:
        if images is not None:
            raise DataError(
                f"{row.source}, row {row.index}: the prompt has {len(ids)} tokens with its "
                f"images', more than data.max_prompt_length = {limit}, and a prompt with "
                "images is not cut. Raise the limit, lower the processor's max_pixels, or "
                "set data.filter_overlong_prompts: true"
            )
        if options.truncation == "error":
            raise DataError(
                f"{row.source}, row {row.index}: the prompt has {len(ids)} tokens, more than "
                f"data.max_prompt_length = {limit}. Raise the limit, set data.truncation to "
                "left or right, or set data.filter_overlong_prompts: true"
            )
        ids = ids[-limit:] if options.truncation == "left" else ids[:limit]
    if not ids:
        raise DataError(
            f"{row.source}, row {row.index}: the prompt tokenizes to no tokens; give the row "
            "a prompt the tokenizer of model.path can encode"
        )
    return text, ids, images


def answer_of(row: SourcedRow, options: PromptOptions) -> Any:
    """The row's ground truth, or None when the answer column is missing (the reward decides
    whether that is an error: see `rl.core.rewards.inputs`)."""
    try:
        return lookup(row.data, options.answer_key)
    except KeyError:
        pass
    if options.answer_key == "answer" and "answer" not in row.data:
        try:  # a row in verl's layout
            return lookup(row.data, VERL_GROUND_TRUTH)
        except KeyError:
            pass
    return None


def data_source_of(row: SourcedRow, options: PromptOptions) -> str:
    return str(row.data.get(options.data_source_key, "unknown"))


def make_item(index: int, row: SourcedRow, options: PromptOptions, tokenizer: Any) -> PromptItem:
    text, ids, images = prompt_inputs(row, options, tokenizer)
    skip = {options.prompt_key, "messages", options.data_source_key, options.image_key}
    extra = {k: v for k, v in row.data.items() if k not in skip}
    # a custom reward function's extra_info: the row's `extra_info` mapping when it has one
    # (verl's layout: index, split, ...; what verl hands over), else the other columns
    extra_info = row.data.get("extra_info")
    return PromptItem(
        index=index,
        prompt_ids=ids,
        prompt_text=text,
        ground_truth=answer_of(row, options),
        data_source=data_source_of(row, options),
        extra=extra,
        extra_info=dict(extra_info) if isinstance(extra_info, dict) else extra,
        chat=chat_messages(row, options),
        images=images,
    )
