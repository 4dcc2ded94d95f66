"""The judge demo's data (`rl.core.demo.judge`): every grade row asks the demo judge's
prompt and is labelled yes exactly when the response is the reference answer; the judged
rows are the arithmetic problems in the judge's domain; the verdict rule reads a judge's
text as the llm_judge scorer does."""

from __future__ import annotations

import re

from rl.core.demo import builtin_rows
from rl.core.demo.arithmetic import arithmetic_rows
from rl.core.demo.judge import DOMAIN, TEMPLATE, VERDICT
from rl.core.rewards.registry import scorer_for
from rl.core.rewards.rule_based import judge_verdict


def test_each_grade_row_is_labelled_by_whether_the_response_is_the_answer():
    rows = builtin_rows("builtin:judge_grades", 2000, 3, 4)
    pattern = re.escape(TEMPLATE).replace(r"\{response\}", "(.*)").replace(r"\{reference\}", "(.)")
    kinds = set()
    for row in rows:
        response, reference = re.fullmatch(pattern, row["prompt"]).groups()
        assert row["answer"] == ("yes" if response == reference else "no"), row
        assert row["data_source"] == VERDICT
        kinds.add("right" if response == reference else "empty" if not response else len(response))
    assert kinds == {"right", "empty", 1, 2}  # every kind of wrong answer is taught
    share = sum(row["answer"] == "yes" for row in rows) / len(rows)
    assert 0.25 < share < 0.35


def test_the_judged_rows_are_the_arithmetic_problems_in_the_judges_domain():
    judged = builtin_rows("builtin:arithmetic_judged", 50, 5, 4)
    plain = arithmetic_rows(50, 5, 4)
    assert [{**row, "data_source": "arithmetic"} for row in judged] == plain
    assert {row["data_source"] for row in judged} == {DOMAIN}


def test_the_verdict_rule_reads_yes_and_no_as_the_judge_scorer():
    assert scorer_for(VERDICT) is judge_verdict
    assert judge_verdict("yes", "yes") == 1.0 and judge_verdict("no", "no") == 1.0
    assert judge_verdict("no", "yes") == 0.0 and judge_verdict("yes", "no") == 0.0
    assert judge_verdict("maybe", "no") == 0.0  # no verdict is no right verdict


def test_the_grade_rows_ask_what_the_judge_scorer_asks():
    from rl.core.rewards.judge_prompts import judge_message, template_of

    for row in builtin_rows("builtin:judge_grades", 200, 4, 4):
        inner = row["prompt"][1:-1]  # "(" response reference ")"
        response, reference = inner[:-1], inner[-1]
        assert row["prompt"] == judge_message(template_of(TEMPLATE), "", response, reference)
