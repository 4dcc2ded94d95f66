"""Failed responses are shown (once per distinct text), counted, and bounded.

The texts go to the `rl.core.rewards.failures` logger at WARNING. With no logging configured
(a plain `rl train`) Python's last-resort handler prints them on stderr, which the console's
progress bar keeps above itself; an application that configures logging routes them like any
other warning.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence

from rl.core.errors import ConfigError, RewardError
from rl.core.rewards.types import OK, RewardRequest, ScoreOutcome
from rl.core.rewards.values import short_repr

logger = logging.getLogger(__name__)  # under "rl", like every rl logger
# A function whose error text varies with the input (say a KeyError naming the answer) must
# not flood the console: after this many distinct texts the rest are only counted.
MAX_SHOWN = 20


class FailureTracker:
    """The failed share of responses over the last `window` scoring calls must stay at or
    below `max_error_rate` (1.0: never stop), or the run stops with a `RewardError`."""

    def __init__(self, max_error_rate: float = 0.5, window: int = 5) -> None:
        if not 0.0 <= max_error_rate <= 1.0:
            raise ConfigError(
                f"reward.max_error_rate = {max_error_rate} must be between 0 and 1 "
                "(1.0 never stops the run)"
            )
        if window < 1:
            raise ConfigError(f"reward.error_rate_window = {window} must be >= 1")
        self.max_error_rate = max_error_rate
        # (failed, scored, first error text) of each recent call
        self.calls: deque[tuple[int, int, str]] = deque(maxlen=window)
        self.shown: set[str] = set()

    def record(self, requests: Sequence[RewardRequest], outcomes: Sequence[ScoreOutcome]) -> float:
        """This call's failed share. Shows error texts not seen before; raises RewardError when
        the share over the window (however many calls it holds so far) passes the bound."""
        failed = [
            (request, outcome)
            for request, outcome in zip(requests, outcomes, strict=True)
            if outcome.status != OK
        ]
        for request, outcome in failed:
            self._show(request, outcome)
        first = failed[0][1].error if failed else ""
        self.calls.append((len(failed), len(outcomes), first))
        self._check()
        return len(failed) / max(len(outcomes), 1)

    def _show(self, request: RewardRequest, outcome: ScoreOutcome) -> None:
        text = outcome.error or outcome.status
        if text in self.shown or len(self.shown) > MAX_SHOWN:
            return
        self.shown.add(text)
        if len(self.shown) > MAX_SHOWN:
            logger.warning(
                "more than %d distinct reward failures; the rest are only counted "
                "(reward/errors, reward/timeouts)",
                MAX_SHOWN,
            )
            return
        logger.warning(
            "reward failed (data_source %r, response %s): %s  [each distinct failure is shown "
            "once; reward/errors and reward/timeouts count them all]",
            request.data_source,
            short_repr(request.solution_str),
            text,
        )

    def _check(self) -> None:
        if self.max_error_rate >= 1.0:
            return
        failed = sum(call[0] for call in self.calls)
        scored = sum(call[1] for call in self.calls)
        if scored == 0 or failed / scored <= self.max_error_rate:
            return
        first = next(text for n_failed, _, text in self.calls if n_failed)
        count = len(self.calls)
        calls = "the last scoring call" if count == 1 else f"the last {count} scoring calls"
        raise RewardError(
            f"the reward failed on {failed} of {scored} responses in {calls} "
            f"(rate {failed / scored:.2f}), more than "
            f"reward.max_error_rate = {self.max_error_rate:g}; first error: {first}. Fix the "
            "reward function, or raise reward.max_error_rate (1.0 never stops)"
        )
