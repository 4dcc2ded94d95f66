"""rl's `rlinf_math` scorer answers as RLinf's math verifier does (RLinf 0.3.0 from PyPI,
`rlinf/algorithms/rewards/math/math_verifier/{parser,verify}.py`, loaded by path from
.upstream/rlinf-0.3.0: never imported by rl). Both run with the same parsers installed
(RLinf's `latex2sympy2` is stubbed out when it does not load here, as rl then skips it)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from pathlib import Path

import pytest

from rl.core.rewards import rlinf_math

RLINF = Path(__file__).resolve().parents[4] / ".upstream" / "rlinf-0.3.0"
VERIFIER = RLINF / "rlinf" / "algorithms" / "rewards" / "math" / "math_verifier"


@pytest.fixture(scope="module")
def oracle():
    if not (VERIFIER / "verify.py").is_file():
        pytest.fail(f"{RLINF} is missing: run scripts/fetch-upstream.sh (install-dev.sh does)")
    sys.path.insert(0, str(RLINF))  # word2number
    saved = {k: sys.modules.get(k) for k in ("latex2sympy2",)}
    try:
        import latex2sympy2  # noqa: F401
    except Exception:
        stub = types.ModuleType("latex2sympy2")

        def latex2sympy(text):
            raise ImportError("latex2sympy2 does not load here")

        stub.latex2sympy = latex2sympy
        sys.modules["latex2sympy2"] = stub
    package = types.ModuleType("rlinf_oracle")
    package.__path__ = [str(VERIFIER)]
    sys.modules["rlinf_oracle"] = package
    modules = {}
    for name in ("parser", "verify"):
        spec = importlib.util.spec_from_file_location(
            f"rlinf_oracle.{name}", VERIFIER / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    yield modules
    sys.path.remove(str(RLINF))
    for key, value in saved.items():
        if value is None:
            sys.modules.pop(key, None)
        else:
            sys.modules[key] = value


RESPONSES = [
    "So the result is \\boxed{\\frac{1}{2}}.",
    "\\boxed{0.5}",
    "\\boxed{50\\%}",
    "The answer is 5.",
    "the final answer is $12$. I hope it is correct.",
    "Thus \\boxed{x = 3}",
    "\\boxed{(1, 2)}",
    "\\boxed{[1,2)}",
    "\\boxed{\\dfrac12}",
    "\\boxed{1/2}",
    "\\boxed{\\text{five}}",
    "\\boxed{5 \\text{ meters}}",
    "\\boxed{10^\\circ}",
    "\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}}",
    "\\boxed{B}",
    "\\boxed{(B) 7}",
    "\\boxed{2x+1=5}",
    "\\boxed{\\sqrt2}",
    "\\boxed{\\infty}",
    "\\boxed{1,000}",
    "\\boxed 42$ done",
    "no answer here 17",
    "\\boxed{}",
    "\\boxed{2.50}",
    "\\boxed{x^2+2x+1}",
    "\\boxed{\\$30}",
    "答案是 7\n\n",
    "\\boxed{k=7}",
    "\\boxed{-\\frac{2}{3}}",
]
REFERENCES = [
    "0.5",
    "\\frac{1}{2}",
    "5",
    "12",
    "3",
    "(1,2)",
    "[1,2)",
    "B",
    "7",
    "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
    "x=2",
    "\\sqrt{2}",
    "\\infty",
    "1000",
    "42",
    "17",
    "2.5",
    "(x+1)^2",
    "30",
    "10",
    "The answer is \\boxed{-\\frac{2}{3}}",
    "-2/3",
]


@pytest.mark.parametrize(("response", "reference"), list(itertools.product(RESPONSES, REFERENCES)))
def test_the_verdict_is_rlinfs(oracle, response, reference):
    expected = oracle["verify"].verify_math_solution(response, reference)
    assert rlinf_math.is_correct(response, reference) == expected


@pytest.mark.parametrize(
    "text", [*RESPONSES, *REFERENCES, "five", "one hundred and two", "007", "\\boxed{\\$ 007}"]
)
def test_the_answer_is_read_and_normalised_as_rlinf_does(oracle, text):
    parser = oracle["parser"]
    assert rlinf_math.extract(text) == parser.extract_answer(text, "math", use_last_number=False)
    assert rlinf_math.extract(text, whole_when_unmarked=True) == parser.extract_answer(
        text, "math", use_last_number=False, must_match_pattern=False
    )


def test_the_score_is_plus_or_minus_one_over_any_reference():
    assert rlinf_math.compute_score("", "\\boxed{5}", ["4", "5"]) == 1.0
    assert rlinf_math.compute_score("", "\\boxed{5}", "4") == -1.0
    assert rlinf_math.compute_score("", "no box", ["5"]) == -1.0
