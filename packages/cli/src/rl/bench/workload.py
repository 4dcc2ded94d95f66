"""The GRPO-step workload both sides run: the demo's tiny Qwen2 (309K parameters, random
weights, no SFT), built-in arithmetic prompts, 8 prompts x 4 responses x at most 8 tokens,
one optimizer step per RL step at lr 1e-4 (constant), temperature 1, exact-match reward;
every forward pass (reference, training) takes all 32 responses at once.
Variant "kl" adds a k3 ("low_var_kl") KL loss at coefficient 0.04 against a reference
model (a frozen copy of the actor)."""

from __future__ import annotations

from dataclasses import dataclass, field

PROMPTS = 8
RESPONSES_PER_PROMPT = 4
MAX_RESPONSE_TOKENS = 8
COMPLETIONS = PROMPTS * RESPONSES_PER_PROMPT  # rows per forward (and backward) pass
LEARNING_RATE = 1e-4
KL_COEF = 0.04
SEED = 1
VARIANTS = ("plain", "kl", "invariant")
# our side only (TRL has no such mode): rollout.batch_invariant, true on-policy; its cost
# is reported against our plain variant
OURS_ONLY = ("invariant",)


@dataclass
class RunResult:
    """One child run: per-step wall times (s), per-phase times (ours), peak RSS (MiB).

    `tree_peak_rss_mib`: the peak of the process tree's summed RSS (children included),
    sampled every 50 ms; `phase_peak_rss_mib`: the same peak while each of our phases ran;
    `response_len`: each step's mean response length (tokens); `engine`: our rollout
    engine; `fused`: our actor.use_fused_kernels setting (auto, on, off).
    """

    side: str
    variant: str
    step_s: list[float]
    phases: dict[str, list[float]]
    peak_rss_mib: float
    first_step_kl: float | None = None
    engine: str = "hf"
    fused: str = "auto"
    tree_peak_rss_mib: float = 0.0
    phase_peak_rss_mib: dict[str, float] = field(default_factory=dict)
    response_len: list[float] = field(default_factory=list)


def ours_only_costs(results: list[RunResult], warmup: int) -> list[str]:
    """Report lines: each ours-only variant's median step against our plain one (pooled,
    and round by round: the runs of a round ran back to back), per engine and fused path."""
    import statistics

    lines: list[str] = []
    for variant in OURS_ONLY:
        for key in dict.fromkeys((r.engine, r.fused) for r in results if r.variant == variant):
            ours = [r for r in results if r.side == "ours" and (r.engine, r.fused) == key]
            mode = [r for r in ours if r.variant == variant]
            plain = [r for r in ours if r.variant == "plain"]
            if not plain:
                continue
            steps = [
                statistics.median(s for r in rs for s in r.step_s[warmup:]) for rs in (mode, plain)
            ]
            rounds = ", ".join(
                f"{statistics.median(m.step_s[warmup:]) / statistics.median(p.step_s[warmup:]):.3f}"
                for m, p in zip(mode, plain, strict=False)
            )
            lines += [
                "",
                f"Our {variant} step against our plain one ({key[0]}, fused {key[1]}): "
                f"{steps[0] / steps[1]:.3f}x (medians; round by round {rounds})",
            ]
    return lines
