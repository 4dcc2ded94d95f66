"""A generative reward model's function as verl's reward loop documents one: it writes the
judge's prompt, posts it to the served model's chat endpoint (`reward_router_address`) with
its own sampling, and reads an integer score from the last paragraph of the answer."""

import json
import os

import aiohttp
from openai.types.chat import ChatCompletion

TEMPLATE = (
    "Problem:\n{problem}\n\nSolution:\n{solution}\n\n"
    "Score the solution from 1 to 10. Only output the score."
)


async def chat_complete(router_address, request):
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"http://{router_address}/v1/chat/completions", json=request) as reply,
    ):
        return ChatCompletion(**json.loads(await reply.text()))


async def compute_score(
    data_source,
    solution_str,
    ground_truth,
    extra_info,
    reward_router_address,
    reward_model_tokenizer,
):
    prompt = TEMPLATE.format(problem=extra_info["question"], solution=solution_str)
    request = {
        "model": os.environ["GENRM_MODEL"],
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0.7,
        "top_p": 0.8,
        "max_tokens": 16,
    }
    answer = (await chat_complete(reward_router_address, request)).choices[0].message.content
    try:
        score = int(answer.split("\n\n")[-1].strip())
    except ValueError:
        score = 0
    return {
        "score": score,
        "acc": score == 10,
        "prompt_tokens": len(reward_model_tokenizer(prompt)["input_ids"]),
    }


async def slow_score(data_source, solution_str, ground_truth, extra_info, **served):
    import asyncio

    await asyncio.sleep(30)
    return 1.0


def plain_score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0
