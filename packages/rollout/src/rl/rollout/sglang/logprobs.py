"""Which log-probabilities SGLang returns, and the environment that would change them.

With `return_logprob=True`, SGLang's sampler reports for each sampled token
`log softmax(z / T)`, where `z` are the logits after SGLang's logit adjustments (penalties,
logit bias, grammar masks; this engine requests none of them) and `T` the request's
temperature. The log-probs are taken before top-p / top-k truncation (SGLang renormalises
only the distribution it samples from), so they are the quantity the trainer recomputes,
`log_softmax(logits / temperature)` with no truncation. Greedy requests (temperature 0)
are run by SGLang as top_k=1 with T=1: their log-probs are `log_softmax(z)`, as the Hugging
Face engine reports them for T=0.

Two switches change that, and the engine refuses to start under either: the environment
variable `SGLANG_RETURN_ORIGINAL_LOGPROB` (`RETURN_ORIGINAL_LOGPROB` in older releases)
makes SGLang return log-probs of the *unscaled* logits, `log_softmax(z)`, whatever T is.
(SGLang's `rl_on_policy_target` server option computes them in bfloat16 instead of float32;
it is left to `engine_kwargs.sglang` and documented in the README.)
"""

from __future__ import annotations

from collections.abc import Mapping

from rl.core.errors import UserError

ORIGINAL_LOGPROB_VARIABLES = ("SGLANG_RETURN_ORIGINAL_LOGPROB", "RETURN_ORIGINAL_LOGPROB")


class LogprobSemanticsError(UserError, RuntimeError):
    """SGLang would return log-probs other than log_softmax(logits / temperature)."""


def _truthy(value: str) -> bool:
    # SGLang's get_bool_env_var: "true" or "1", any case
    return value.strip().lower() in ("true", "1")


def check_logprob_environment(environ: Mapping[str, str]) -> None:
    """Raise `LogprobSemanticsError` when `environ` makes SGLang return unscaled log-probs."""
    for name in ORIGINAL_LOGPROB_VARIABLES:
        if _truthy(environ.get(name, "")):
            raise LogprobSemanticsError(
                f"{name}={environ[name]!r} makes SGLang return log-probs of the logits before "
                "temperature; the trainer compares them with log_softmax(logits / temperature). "
                f"Unset {name} to use the SGLang rollout engine"
            )
