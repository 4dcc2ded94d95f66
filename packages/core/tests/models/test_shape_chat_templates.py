"""Each family's chat template renders its documented format, and tokenizing the rendered
text gives the ids `apply_chat_template(tokenize=True)` gives (one BOS for Llama)."""

import re

import pytest

from rl.core.models.tokenizer_files import build_tokenizer

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOL_CHAT = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    },
    {"role": "tool", "content": '{"celsius": 21}'},
    {"role": "assistant", "content": "21 °C."},
]
QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
TOOLS_JSON = (
    '{"type": "function", "function": {"name": "get_weather", "description": "Current weather '
    'of a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, '
    '"required": ["city"]}}}'
)
QWEN_TOOL_SYSTEM = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + TOOLS_JSON
    + "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
LLAMA_SYSTEM_HEAD = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
)


@pytest.fixture(scope="module")
def qwen25():
    return build_tokenizer("qwen2.5")


@pytest.fixture(scope="module")
def qwen3():
    return build_tokenizer("qwen3")


@pytest.fixture(scope="module")
def llama():
    return build_tokenizer("llama-3.2")


def render(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)


def test_qwen25_chatml_with_a_system_message(qwen25):
    assert render(qwen25, CHAT) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
    )


def test_qwen25_default_system_message_and_generation_prompt(qwen25):
    assert render(qwen25, CHAT[1:2], add_generation_prompt=True) == (
        f"<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_qwen25_tools_calls_and_responses(qwen25):
    assert render(qwen25, TOOL_CHAT, tools=[WEATHER_TOOL]) == (
        f"<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}\n\n{QWEN_TOOL_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        '<|im_start|>user\n<tool_response>\n{"celsius": 21}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n21 °C.<|im_end|>\n"
    )


def test_qwen25_consecutive_tool_results_share_one_user_turn(qwen25):
    messages = [
        {"role": "user", "content": "Two cities?"},
        {"role": "tool", "content": "a"},
        {"role": "tool", "content": "b"},
    ]
    assert render(qwen25, messages).endswith(
        "<|im_start|>user\n<tool_response>\na\n</tool_response>\n"
        "<tool_response>\nb\n</tool_response><|im_end|>\n"
    )


def test_qwen3_has_no_default_system_and_thinks_in_the_last_turn(qwen3):
    assert render(qwen3, CHAT) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n"
    )
    assert render(qwen3, CHAT[1:2], add_generation_prompt=True) == (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_qwen3_enable_thinking_false_writes_an_empty_think_block(qwen3):
    assert render(qwen3, CHAT[1:2], add_generation_prompt=True, enable_thinking=False) == (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_qwen3_drops_reasoning_of_turns_before_the_last_query(qwen3):
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nAdd.\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "Add again."},
    ]
    assert render(qwen3, messages) == (
        "<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>user\n3+3?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nAdd again.\n</think>\n\n6<|im_end|>\n"
    )


def test_qwen3_tools(qwen3):
    rendered = render(qwen3, TOOL_CHAT, tools=[WEATHER_TOOL])
    assert rendered.startswith(f"<|im_start|>system\n{QWEN_TOOL_SYSTEM}<|im_end|>\n")
    assert (
        "<|im_start|>assistant\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
    ) in rendered
    assert '<|im_start|>user\n<tool_response>\n{"celsius": 21}\n</tool_response>' in rendered


def test_llama32_headers_dates_and_eot(llama):
    assert render(llama, CHAT, date_string="26 Jul 2024") == (
        LLAMA_SYSTEM_HEAD + "Be brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
    )


def test_llama32_writes_a_system_header_without_a_system_message(llama):
    rendered = render(llama, CHAT[1:2], add_generation_prompt=True)
    assert re.fullmatch(
        r"<\|begin_of_text\|><\|start_header_id\|>system<\|end_header_id\|>\n\n"
        r"Cutting Knowledge Date: December 2023\nToday Date: \d\d \w\w\w \d{4}\n\n<\|eot_id\|>"
        r"<\|start_header_id\|>user<\|end_header_id\|>\n\nWhat is 2\+2\?<\|eot_id\|>"
        r"<\|start_header_id\|>assistant<\|end_header_id\|>\n\n",
        rendered,
    )


def test_llama32_tools_in_the_first_user_turn(llama):
    rendered = render(llama, TOOL_CHAT, tools=[WEATHER_TOOL], date_string="26 Jul 2024")
    assert rendered.startswith(
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
    )
    assert (
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please "
        "respond with a JSON for a function call with its proper arguments that best answers "
        'the given prompt.\n\nRespond in the format {"name": function name, "parameters": '
        "dictionary of argument name and its value}.Do not use variables.\n\n{\n"
    ) in rendered
    assert (
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
        '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>'
        '<|start_header_id|>ipython<|end_header_id|>\n\n{"celsius": 21}<|eot_id|>'
    ) in rendered


CASES = [
    ("qwen2.5", CHAT, {}),
    ("qwen2.5", CHAT[:2], {"add_generation_prompt": True}),
    ("qwen2.5", TOOL_CHAT, {"tools": [WEATHER_TOOL]}),
    ("qwen3", CHAT, {}),
    ("qwen3", CHAT[:2], {"add_generation_prompt": True, "enable_thinking": False}),
    ("qwen3", TOOL_CHAT, {"tools": [WEATHER_TOOL]}),
    ("llama-3.2", CHAT, {"date_string": "26 Jul 2024"}),
    ("llama-3.2", CHAT[:2], {"add_generation_prompt": True}),
    ("llama-3.2", TOOL_CHAT, {"tools": [WEATHER_TOOL]}),
]


@pytest.mark.parametrize(("family", "messages", "kwargs"), CASES)
def test_tokenizing_the_rendered_text_gives_the_template_ids(family, messages, kwargs, request):
    tokenizer = request.getfixturevalue(
        {"qwen2.5": "qwen25", "qwen3": "qwen3"}.get(family, "llama")
    )
    text = render(tokenizer, messages, **kwargs)
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)
    assert tokenizer(text, add_special_tokens=False).input_ids == ids
    assert tokenizer.decode(ids) == text
    if family == "llama-3.2":
        assert ids[0] == 128000 and ids.count(128000) == 1
    else:
        assert ids[0] == 151644  # <|im_start|>: no BOS
