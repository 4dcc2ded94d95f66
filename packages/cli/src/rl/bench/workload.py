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
