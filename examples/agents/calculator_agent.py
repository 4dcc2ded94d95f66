"""The calculator demo's agent as a program of its own: it knows nothing of rl, only
OpenAI's client. rl runs it once per sample, either as a command
(`python examples/agents/calculator_agent.py`: the task row as JSON on stdin, the policy's
endpoint as OPENAI_BASE_URL, the outcome its last output line) or as the function `run`
(`examples/agents/calculator_agent.py:run`, what examples/agentic_calculator_program.yaml
uses: no interpreter to start per sample).

It asks the model; when the model writes `calculator(<expression>)` it evaluates the
expression itself and hands the result back as the tool's message, then asks again; the
model's last text is the answer (its final line of output)."""

import ast
import json
import operator
import re
import sys

from openai import OpenAI

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
CALL = re.compile(r"calculator\((.*)\)")


def evaluate(node):
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    raise ValueError("not arithmetic")


def calculate(expression):
    try:
        return str(evaluate(ast.parse(expression, mode="eval")))
    except (SyntaxError, ValueError, RecursionError):
        return "error"


def run(task, base_url=None, api_key=None):
    messages = list(task["messages"])
    client = OpenAI(base_url=base_url, api_key=api_key)
    for _ in range(2):  # one tool call at most, then the answer
        reply = client.chat.completions.create(model="policy", messages=messages)
        text = reply.choices[0].message.content
        call = CALL.fullmatch(text.strip())
        if call is None:
            break
        messages.append({"role": "assistant", "content": text})
        messages.append({"role": "tool", "content": calculate(call.group(1))})
    return {"answer": text}


def main():
    print(json.dumps(run(json.load(sys.stdin))))  # OPENAI_BASE_URL, OPENAI_API_KEY


if __name__ == "__main__":
    main()
