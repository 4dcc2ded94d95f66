"""What an LLM judge is asked and how its answer becomes a score (ROLL's
`LLMJudgeRewardWorker`: `_format_judge_prompt`, `_extract_score_v2`, `_extract_score`).

`judge_prompt` is one of `JUDGE_PROMPTS` (`rl.core.config.judge`) or a template of the
user's own with `{response}` and, as it needs them, `{question}` and `{reference}`. The question is the policy's
prompt with the special tokens taken out and, as ROLL takes it, only what follows its last
"user\\n" (the chat template's user turn).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The prompt the judge model ROLL's examples use (virtuoussy/Qwen2.5-7B-Instruct-RLVR) was
# trained with, as ROLL ships it under this name (roll/utils/prompt.py, Apache-2.0): the
# judge answers YES or NO. Kept verbatim, since the model expects exactly this input.
QWEN25_RLVR = """
Given a problem, determine whether the final answer in the provided (incomplete) solution process matches the reference answer.  
The reference answer may be one single option character (e.g., A, B, C, D), a numerical value, an expression, or a list of answers if multiple questions are involved.  
**The reference answer may be in Chinese or another language, but your evaluation should be language-agnostic.**  

Your task:  
- Compare the final output of the solution process with the reference answer.  
- If they **match exactly**, output **YES**.  
- If they **do not match**, output **NO**.  
- If the solution process is unclear, incomplete, or ambiguous, assume it is incorrect and output **NO**.  

Your output must be strictly **'YES'** or **'NO'**, with no additional words, punctuation, or explanation.  

---

**Question:**  
{question}  

**Solution Process (Final Step Only):**  
{response}  

**Reference Answer:**  
{reference}  

**Output:**  
"""  # noqa: W291

# rl's own default (ROLL's fallback asks for a 0-10 score and then reads yes / no, which
# cannot agree): a yes / no question, read as ROLL's worker reads every judge
DEFAULT = (
    "Does the response answer the question with the reference answer?\n\n"
    "Question: {question}\n\nResponse: {response}\n\nReference answer: {reference}\n\n"
    "Answer YES or NO only."
)
PROMPTS = {"default": DEFAULT, "Qwen2.5-7B-Instruct-RLVR-prompt": QWEN25_RLVR}
_SCORE = re.compile(r"Score: ([0-9.]+)")


def template_of(prompt: str) -> str:
    """The template `judge.prompt` names, or the text itself when it is a template."""
    if prompt in PROMPTS:
        return PROMPTS[prompt]
    if "{response}" not in prompt:
        raise ValueError(
            f"judge.prompt: neither a named prompt ({list(PROMPTS)}) nor a template with "
            "{response} (and, as it needs them, {question} and {reference})"
        )
    return prompt


def question_of(prompt_str: str, special_tokens: Sequence[str]) -> str:
    """The policy's prompt as ROLL hands it to the judge."""
    for token in sorted(special_tokens, key=len, reverse=True):
        if token:
            prompt_str = prompt_str.replace(token, "")
    if "user\n" in prompt_str:
        prompt_str = prompt_str.split("user\n")[-1].strip()
    return prompt_str


def judge_message(template: str, question: str, response: str, reference: object) -> str:
    """The judge's one user message (`str.format`, so literal braces in the template are
    written doubled)."""
    return template.format(question=question, response=response, reference=reference)


def parse_verdict(text: str, parse: str) -> tuple[float, bool]:
    """(score, whether the text held a verdict): yes_no -> 1 when "yes" is in it, 0 when
    "no" is (or when neither is: not parsed); score -> the first "Score: x" over 10 (0.5
    when there is none)."""
    if parse == "yes_no":
        lowered = text.lower()
        if "yes" in lowered:
            return 1.0, True
        return 0.0, "no" in lowered
    match = _SCORE.search(text)
    if match is None:
        return 0.5, False
    try:
        return float(match.group(1)) / 10, True
    except ValueError:
        return 0.5, False
