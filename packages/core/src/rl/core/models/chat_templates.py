"""The chat templates of the Qwen2.5, Qwen3 and Llama-3.2 families, written from their
documented prompt formats (Jinja, as `apply_chat_template` renders them).

- Qwen2.5: ChatML; a default system message when none is given; tools listed in the
  system block; assistant tool calls as `<tool_call>` JSON; tool results as
  `<tool_response>` blocks in one user turn.
- Qwen3: ChatML without a default system message; assistant turns after the last user
  query keep their reasoning in `<think>...</think>` (the last one always gets a block),
  earlier ones lose it; `enable_thinking=False` writes an empty think block after the
  generation prompt.
- Llama-3.2: the BOS written by the template; header ids around each role; a system
  header with the knowledge cut-off and today's date (`date_string`, else today's);
  `<|eot_id|>` after each turn; tools in the first user turn by default
  (`tools_in_user_message`), tool results in an `ipython` turn.

All whitespace of the template source is trimmed (`{%-`/`-%}`): only string literals
reach the output.
"""

from __future__ import annotations

# Shared by the two Qwen families: the tool list in the system block and the two kinds
# of tool turns.
_QWEN_TOOLS = r"""
{%- macro tool_instructions(tools) -%}
  {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" -}}
  {{- "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" -}}
  {%- for tool in tools -%}{{- "\n" + tool | tojson -}}{%- endfor -%}
  {{- "\n</tools>\n\nFor each function call, return a json object with function name and " -}}
  {{- "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n" -}}
  {{- "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" -}}
{%- endmacro -%}
{%- macro tool_call_json(call) -%}
  {%- set call = call.function if call.function is defined else call -%}
  {%- set arguments = call.arguments if call.arguments is string else call.arguments | tojson -%}
  {{- "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + arguments -}}
  {{- "}\n</tool_call>" -}}
{%- endmacro -%}
{%- macro tool_result(message, loop) -%}
  {%- if loop.previtem is not defined or loop.previtem.role != "tool" -%}
    {{- "<|im_start|>user" -}}
  {%- endif -%}
  {{- "\n<tool_response>\n" + message.content + "\n</tool_response>" -}}
  {%- if loop.nextitem is not defined or loop.nextitem.role != "tool" -%}
    {{- "<|im_end|>\n" -}}
  {%- endif -%}
{%- endmacro -%}
"""

QWEN25_CHAT_TEMPLATE = (
    _QWEN_TOOLS
    + r"""
{%- if messages and messages[0].role == "system" -%}
  {%- set system_text = messages[0].content -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system_text = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." -%}
  {%- set turns = messages -%}
{%- endif -%}
{{- "<|im_start|>system\n" + system_text -}}
{%- if tools -%}{{- "\n\n" + tool_instructions(tools) -}}{%- endif -%}
{{- "<|im_end|>\n" -}}
{%- for message in turns -%}
  {%- if message.role == "tool" -%}
    {{- tool_result(message, loop) -}}
  {%- elif message.role == "assistant" and message.tool_calls -%}
    {{- "<|im_start|>assistant" -}}
    {%- if message.content -%}{{- "\n" + message.content -}}{%- endif -%}
    {%- for call in message.tool_calls -%}{{- "\n" + tool_call_json(call) -}}{%- endfor -%}
    {{- "<|im_end|>\n" -}}
  {%- else -%}
    {{- "<|im_start|>" + message.role + "\n" + (message.content or "") + "<|im_end|>\n" -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\n" -}}{%- endif -%}
"""
)

QWEN3_CHAT_TEMPLATE = (
    _QWEN_TOOLS
    + r"""
{%- set has_system = messages and messages[0].role == "system" -%}
{%- if tools -%}
  {{- "<|im_start|>system\n" -}}
  {%- if has_system -%}{{- messages[0].content + "\n\n" -}}{%- endif -%}
  {{- tool_instructions(tools) + "<|im_end|>\n" -}}
{%- elif has_system -%}
  {{- "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n" -}}
{%- endif -%}
{#- the last user turn that asks something (not tool output handed back as a user turn) -#}
{%- set ns = namespace(last_query=messages | length - 1) -%}
{%- for message in messages -%}
  {%- set text = message.content if message.content is string else "" -%}
  {%- if message.role == "user"
        and not (text.startswith("<tool_response>") and text.endswith("</tool_response>")) -%}
    {%- set ns.last_query = loop.index0 -%}
  {%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
  {%- if message.role == "system" and loop.first -%}
  {%- elif message.role in ["user", "system"] -%}
    {{- "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n" -}}
  {%- elif message.role == "assistant" -%}
    {%- set content = message.content or "" -%}
    {%- set reasoning = "" -%}
    {%- if message.reasoning_content is string -%}
      {%- set reasoning = message.reasoning_content -%}
    {%- elif "</think>" in content -%}
      {%- set reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1] -%}
      {%- set reasoning = reasoning.lstrip("\n") -%}
      {%- set content = content.split("</think>")[-1].lstrip("\n") -%}
    {%- endif -%}
    {{- "<|im_start|>assistant\n" -}}
    {%- if loop.index0 > ns.last_query and (loop.last or reasoning) -%}
      {{- "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" + content.lstrip("\n") -}}
    {%- else -%}
      {{- content -}}
    {%- endif -%}
    {%- for call in message.tool_calls or [] -%}
      {%- if content or not loop.first -%}{{- "\n" -}}{%- endif -%}
      {{- tool_call_json(call) -}}
    {%- endfor -%}
    {{- "<|im_end|>\n" -}}
  {%- elif message.role == "tool" -%}
    {{- tool_result(message, loop) -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "<|im_start|>assistant\n" -}}
  {%- if enable_thinking is defined and not enable_thinking -%}
    {{- "<think>\n\n</think>\n\n" -}}
  {%- endif -%}
{%- endif -%}
"""
)

LLAMA32_CHAT_TEMPLATE = r"""
{%- macro tool_list(tools) -%}
  {{- "Respond in the format {\"name\": function name, \"parameters\": dictionary of " -}}
  {{- "argument name and its value}.Do not use variables.\n\n" -}}
  {%- for tool in tools -%}{{- tool | tojson(indent=4) + "\n\n" -}}{%- endfor -%}
{%- endmacro -%}
{%- macro header(role) -%}
  {{- "<|start_header_id|>" + role + "<|end_header_id|>\n\n" -}}
{%- endmacro -%}
{{- bos_token -}}
{%- if date_string is not defined -%}
  {%- if strftime_now is defined -%}
    {%- set date_string = strftime_now("%d %b %Y") -%}
  {%- else -%}
    {%- set date_string = "26 Jul 2024" -%}
  {%- endif -%}
{%- endif -%}
{%- set in_user_turn = tools_in_user_message if tools_in_user_message is defined else true -%}
{%- if messages and messages[0].role == "system" -%}
  {%- set system_text = messages[0].content | trim -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system_text = "" -%}
  {%- set turns = messages -%}
{%- endif -%}
{{- header("system") -}}
{%- if tools -%}{{- "Environment: ipython\n" -}}{%- endif -%}
{{- "Cutting Knowledge Date: December 2023\nToday Date: " + date_string + "\n\n" -}}
{%- if tools and not in_user_turn -%}
  {{- "You have access to the following functions. To call a function, please respond " -}}
  {{- "with JSON for a function call." + tool_list(tools) -}}
{%- endif -%}
{{- system_text + "<|eot_id|>" -}}
{%- set ns = namespace(tools_pending=tools and in_user_turn) -%}
{%- for message in turns -%}
  {%- if message.role == "user" and ns.tools_pending -%}
    {%- set ns.tools_pending = false -%}
    {{- header("user") -}}
    {{- "Given the following functions, please respond with a JSON for a function call with " -}}
    {{- "its proper arguments that best answers the given prompt.\n\n" + tool_list(tools) -}}
    {{- (message.content | trim) + "<|eot_id|>" -}}
  {%- elif message.role == "assistant" and message.tool_calls -%}
    {%- if message.tool_calls | length > 1 -%}
      {{- raise_exception("Llama 3.2 takes one tool call per assistant turn") -}}
    {%- endif -%}
    {%- set call = message.tool_calls[0] -%}
    {%- set call = call.function if call.function is defined else call -%}
    {%- set arguments = call.arguments if call.arguments is string else call.arguments | tojson -%}
    {{- header("assistant") -}}
    {{- "{\"name\": \"" + call.name + "\", \"parameters\": " + arguments + "}<|eot_id|>" -}}
  {%- elif message.role in ["tool", "ipython"] -%}
    {%- set result = message.content if message.content is string else message.content | tojson -%}
    {{- header("ipython") + result + "<|eot_id|>" -}}
  {%- else -%}
    {{- header(message.role) + ((message.content or "") | trim) + "<|eot_id|>" -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- header("assistant") -}}{%- endif -%}
"""
