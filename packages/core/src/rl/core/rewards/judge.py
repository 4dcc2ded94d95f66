"""The `llm_judge` scorer: each response judged by a model served by rl's own rollout
engine (`rl.core.workers.judge_server`), prompted and read as ROLL's
`LLMJudgeRewardWorker` prompts and reads it (`rl.core.rewards.judge_prompts`).

The domain's responses are judged `judge.batch_size` at a time, one `generate` call per
batch, each within the domain's time limit (`reward.domains.<d>.timeout_s`, else
600 s); a batch that times out or fails scores 0 for each of its responses,
counted as timeouts or errors like any reward's failures (and bounded by
`reward.max_error_rate`). A verdict the judge did not give (neither yes nor no; no
"Score: x") is scored as ROLL scores it and counted: `reward/<d>/judge_unparsed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.engines import SamplingParams
from rl.core.rewards.failures import FailureTracker
from rl.core.rewards.judge_prompts import judge_message, parse_verdict, question_of, template_of
from rl.core.rewards.types import ERROR, OK, TIMEOUT, RewardRequest, RewardResult, ScoreOutcome


class JudgeTimeout(TimeoutError):
    """A judge batch over its time limit."""


class JudgeScorer:
    """`score(requests)` by a served judge. `server` answers `generate_batches` (`rl.core.workers.judge_server`: a
    `LocalJudge` or a `RayJudge`);
    `tokenizer` is the judge's, `policy_tokenizer` the policy's (its special tokens are
    taken out of the question)."""

    def __init__(
        self,
        judge: Any,
        server: Any,
        tokenizer: Any,
        policy_tokenizer: Any,
        *,
        timeout_s: float,
        max_error_rate: float = 0.5,
        error_rate_window: int = 5,
    ) -> None:
        self.judge, self.server, self.tokenizer = judge, server, tokenizer
        self.template = template_of(judge.prompt)
        self.special = list(getattr(policy_tokenizer, "all_special_tokens", []))
        self.timeout_s = timeout_s
        self.failures = FailureTracker(max_error_rate, error_rate_window)
        self.sampling = SamplingParams(
            n=1,
            temperature=judge.temperature,
            top_p=judge.top_p,
            top_k=judge.top_k,
            max_new_tokens=judge.max_new_tokens,
            seed=judge.seed,
        )

    def prompt_ids(self, request: RewardRequest) -> list[int]:
        """The judge's prompt: ROLL's one user message through the judge's chat template,
        cut from the left to leave `judge.max_new_tokens` of `judge.max_model_len`."""
        question = question_of(request.prompt_str, self.special)
        message = judge_message(self.template, question, request.solution_str, request.ground_truth)
        text = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids[-(self.judge.max_model_len - self.judge.max_new_tokens) :]

    def verdicts(self, requests: Sequence[RewardRequest]) -> list[str | ScoreOutcome]:
        """Each request's judge text, or the failed outcome of its batch."""
        size = self.judge.batch_size
        batches = [requests[start : start + size] for start in range(0, len(requests), size)]
        prompts = [[self.prompt_ids(r) for r in batch] for batch in batches]
        found: list[str | ScoreOutcome] = []
        outcomes = self.server.generate_batches(prompts, self.sampling, self.timeout_s)
        for batch, outcome in zip(batches, outcomes, strict=True):
            if isinstance(outcome, JudgeTimeout):
                found += [ScoreOutcome(0.0, TIMEOUT, {}, str(outcome))] * len(batch)
            elif isinstance(outcome, BaseException):  # a judge that fails scores 0, counted
                text = f"the judge failed: {type(outcome).__name__}: {outcome}"
                found += [ScoreOutcome(0.0, ERROR, {}, text)] * len(batch)
            else:
                found += [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in outcome]
        return found

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        requests = list(requests)
        outcomes: list[ScoreOutcome] = []
        unparsed = 0
        for verdict in self.verdicts(requests):
            if isinstance(verdict, ScoreOutcome):
                outcomes.append(verdict)
                continue
            score, parsed = parse_verdict(verdict.strip(), self.judge.parse)
            unparsed += not parsed
            extras = {"acc": score} if self.judge.parse == "yes_no" else {}
            outcomes.append(ScoreOutcome(score, OK, extras))
        error_rate = self.failures.record(requests, outcomes)
        scores = [o.score for o in outcomes]
        metrics = {
            "reward/mean": sum(scores) / max(len(scores), 1),
            "reward/errors": float(sum(o.status == ERROR for o in outcomes)),
            "reward/timeouts": float(sum(o.status == TIMEOUT for o in outcomes)),
            "reward/error_rate": error_rate,
            "reward/judge_unparsed": unparsed / max(len(requests), 1),
        }
        return RewardResult(
            scores, metrics, [o.error for o in outcomes], [o.extras for o in outcomes]
        )

    def close(self) -> None:
        self.server.close()
