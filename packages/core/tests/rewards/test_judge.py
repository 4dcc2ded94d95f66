"""The `llm_judge` scorer with a real judge model served by rl's HF engine: in the trainer's
process and in a Ray actor of its own. The judges' verdicts are known (the `judge_folder`
fixture: a real-shape Qwen2.5 folder whose weights make it say one word), so each score is checked
against ROLL's reading of that word; the prompt against ROLL's message through the judge's
own chat template; the batching, the time limit and the failures as every reward's."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

from rl.core.config import load_config
from rl.core.config.judge import JudgeConfig
from rl.core.models.loading import load_tokenizer
from rl.core.rewards.domains import DomainRewards
from rl.core.rewards.judge import JudgeScorer
from rl.core.rewards.judge_prompts import (
    QWEN25_RLVR,
    parse_verdict,
    question_of,
    template_of,
)
from rl.core.rewards.types import RewardRequest
from rl.core.workers.judge_server import (
    LocalJudge,
    judge_run_config,
    start_judge,
    start_judges,
)

PROMPT = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def judges(judge_folder):
    return {word.strip(): judge_folder(word) for word in (" yes", " no", " is")}


def config(judge_path, *extra):
    return load_config(
        None,
        [
            "data.data_source_key=tag",
            "reward.domains.judged.scorer=llm_judge",
            f"reward.domains.judged.judge.model_path={judge_path}",
            "reward.domains.judged.judge.max_new_tokens=3",
            *extra,
        ],
    )


def requests(count=3):
    return [
        RewardRequest("RLVR", f"It is {i}.", "4", {}, prompt_str=PROMPT, domain="judged")
        for i in range(count)
    ]


def scorer(judge_path, max_error_rate=0.5, **judge_settings) -> JudgeScorer:
    run = config(judge_path)
    judge = replace(run.reward.domains["judged"].judge, **judge_settings)
    tokenizer = load_tokenizer(judge_run_config(run, judge).model)
    server = start_judge(run, judge)
    return JudgeScorer(
        judge, server, tokenizer, tokenizer, timeout_s=60, max_error_rate=max_error_rate
    )


def test_the_verdict_is_read_as_roll_reads_it():
    assert parse_verdict("YES", "yes_no") == (1.0, True)
    assert parse_verdict("no.", "yes_no") == (0.0, True)
    assert parse_verdict("maybe", "yes_no") == (0.0, False)  # no verdict: 0, as ROLL
    assert parse_verdict("Score: 7", "score") == (0.7, True)
    assert parse_verdict("seven", "score") == (0.5, False)  # ROLL's 0.5 when none


def test_the_question_is_the_user_turn_without_special_tokens():
    special = ["<|im_start|>", "<|im_end|>"]
    assert question_of(PROMPT, special) == "What is 2+2?\nassistant"  # as ROLL cuts it
    assert question_of("plain 3+4=", special) == "plain 3+4="


def test_a_prompt_is_named_or_a_template_of_the_response():
    assert template_of("Qwen2.5-7B-Instruct-RLVR-prompt") == QWEN25_RLVR
    assert template_of("{question}|{response}|{reference}") == "{question}|{response}|{reference}"
    assert template_of("Is this kind? {response}") == "Is this kind? {response}"  # no reference
    with pytest.raises(ValueError, match="a template with {response}"):
        template_of("{question} {reference}")


def test_a_served_judge_scores_by_its_verdict(judges):
    for word, expected in (("yes", 1.0), ("no", 0.0), ("is", 0.0)):
        judge = scorer(judges[word])
        result = judge.score(requests())
        judge.close()
        assert result.scores == [expected] * 3, word
        assert result.metrics["reward/judge_unparsed"] == (1.0 if word == "is" else 0.0)
        assert result.metrics["reward/errors"] == 0.0


def test_the_judge_is_asked_rolls_message_through_its_chat_template(judges):
    judge = scorer(judges["yes"], prompt="Qwen2.5-7B-Instruct-RLVR-prompt")
    tokenizer = judge.tokenizer
    message = QWEN25_RLVR.format(
        question="What is 2+2?\nassistant", response="It is 0.", reference="4"
    )
    expected = tokenizer.apply_chat_template(
        [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
    )
    if isinstance(expected, dict) or hasattr(expected, "keys"):
        expected = expected["input_ids"]
    assert judge.prompt_ids(requests(1)[0]) == list(expected)
    judge.close()


def test_responses_are_judged_in_batches_of_batch_size(judges):
    judge = scorer(judges["yes"], batch_size=2)
    calls = []
    generate = judge.server.generate

    def counted(prompts, sampling, timeout_s):
        calls.append(len(prompts))
        return generate(prompts, sampling, timeout_s)

    judge.server.generate = counted  # what generate_batches calls for each batch
    assert judge.score(requests(5)).scores == [1.0] * 5
    assert calls == [2, 2, 1]
    judge.close()


def test_a_judge_over_its_time_limit_scores_zero_counted_and_the_next_call_works(judges):
    judge = scorer(judges["yes"], max_error_rate=1.0, max_new_tokens=400)
    judge.timeout_s = 0.01
    result = judge.score(requests(2))
    assert result.scores == [0.0, 0.0] and result.metrics["reward/timeouts"] == 2.0
    assert "more than 0.01 s" in result.errors[0]
    judge.timeout_s = 120
    assert judge.score(requests(1)).scores == [1.0]  # after the late batch, within its limit
    judge.close()


def test_a_judge_that_fails_is_a_counted_error_and_too_many_stop_the_run(judges):
    from rl.core.errors import RewardError

    judge = scorer(judges["yes"])

    def broken(prompts, sampling):
        raise RuntimeError("engine gone")

    judge.server.engine.generate = broken
    with pytest.raises(RewardError, match="engine gone"):
        judge.score(requests(2))  # every response failed: over reward.max_error_rate
    judge.close()


def test_domain_rewards_serve_the_judge_with_per_domain_metrics(judges):
    from rl.core.models import build_char_tokenizer

    run = config(
        judges["is"],
        "reward.domains.math.scorer=data_source",
        "reward.domains.math.tag_included=[gsm8k]",
    )
    rewards = DomainRewards(run, start_judges(run, build_char_tokenizer()))
    mixed = [*requests(2), RewardRequest("gsm8k", "#### 4", "4", {}, domain="math")]
    result = rewards.score(mixed)
    assert result.scores == [0.0, 0.0, 1.0]
    assert result.metrics["reward/judged/judge_unparsed"] == 1.0
    assert "reward/judged/time_s" in result.metrics
    rewards.close()


def test_a_judge_in_a_ray_actor_of_its_own_scores_the_same_and_restarts_after_a_timeout(judges):
    pytest.importorskip("ray")
    import ray

    judge = scorer(
        judges["yes"], max_error_rate=1.0, placement="ray", replicas=2, num_cpus=0.5, batch_size=1
    )
    try:
        pids = ray.get([a.__ray_call__.remote(lambda _: os.getpid()) for a in judge.server.actors])
        assert len(set(pids)) == 2 and os.getpid() not in pids  # two processes of their own
        assert judge.score(requests(3)).scores == [1.0] * 3
        first = list(judge.server.actors)
        judge.timeout_s = 0.001
        result = judge.score(requests(3))
        # batch 0 is late; batch 2 was queued behind it on replica 0, restarted; batch 1
        # (replica 1) is late too unless it finished while replica 0 restarted
        assert result.scores[0] == result.scores[2] == 0.0
        assert "more than 0.001 s" in result.errors[0] and "restarted" in result.errors[2]
        assert judge.server.actors[0] is not first[0]
        assert judge.server.restarts == 1 + (judge.server.actors[1] is not first[1])
        judge.timeout_s = 120
        assert judge.score(requests(2)).scores == [1.0, 1.0]  # the new actors serve
    finally:
        judge.close()
        ray.shutdown()


def test_a_colocated_judge_runs_in_this_process(judges):
    judge = scorer(judges["yes"])
    assert isinstance(judge.server, LocalJudge)
    started = time.perf_counter()
    judge.score(requests(1))
    assert time.perf_counter() - started < 60
    judge.close()


def test_a_judge_setting_on_a_domain_without_a_judge_is_refused():
    from rl.core.config import ConfigError

    with pytest.raises(ConfigError, match="judge.model_path"):
        load_config(
            None,
            ["reward.domains.math.scorer=math_rule", "reward.domains.math.judge.model_path=/x"],
        )
    assert JudgeConfig().temperature == 0.0


def test_a_judge_folder_that_is_not_there_is_refused_naming_the_domain(tmp_path):
    from rl.core.config import ConfigError
    from rl.core.models import build_char_tokenizer

    run = config(tmp_path / "no-judge")
    with pytest.raises(ConfigError, match=r"reward.domains.judged.judge: .*no-judge"):
        start_judges(run, build_char_tokenizer())
