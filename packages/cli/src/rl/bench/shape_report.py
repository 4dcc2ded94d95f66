"""The real-shape report of `rl.bench grpo-step --shape`: step times, process-tree peak
RSS, the phase split with each phase's peak RSS, and model-FLOP utilisation (MFU) against
the matmul throughput measured in the same run."""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from rl.bench import flops
from rl.bench import workload as w


@dataclass
class ShapeContext:
    """What the report needs besides the runs (also written as workload.json)."""

    shape: str
    layers: int
    model_config: dict[str, Any]
    prompt_lengths: list[int]  # every row's templated prompt, in tokens (all steps' rows)
    prompt_check: str  # what the prompt-id comparison between the sides found
    gflops: list[float] = field(default_factory=list)  # measured before and after the runs
    shared_prompts: bool = True  # our packed passes hold each prompt once (prefix grouper)
    recompute: bool = False  # our model.gradient_checkpointing

    @property
    def mean_prompt(self) -> float:
        return statistics.fmean(self.prompt_lengths)


def tree_peak(result: w.RunResult) -> float:
    """The process tree's peak: the sampled sum, or the main process's own exact peak
    (ru_maxrss) where a spike between two samples went above it."""
    return max(result.tree_peak_rss_mib, result.peak_rss_mib)


def label(result: w.RunResult) -> str:
    if result.side == "trl":
        return "TRL"
    fused = f", fused {result.fused}" if result.fused != "auto" else ""
    return f"ours ({result.engine}{fused})"


def phase_flops(ctx: ShapeContext, result: w.RunResult, response_mean: float) -> dict[str, float]:
    """Model FLOPs of one step's phases. Each run uses every row once (steps x 8 rows), so
    the rows' prompt lengths scaled to 8 prompts are the mean step's exactly.
    Ours: generation prefills each prompt once for its n samples (our HF sampler; vLLM's
    prefix cache shares the full blocks of the prompt), the packed passes share prompts
    as `ctx.shared_prompts` says. TRL: no sharing, every row prompt + response."""
    d = flops.dims(ctx.model_config)
    scale = w.PROMPTS / len(ctx.prompt_lengths)
    lengths, n, r = ctx.prompt_lengths, w.RESPONSES_PER_PROMPT, response_mean
    ours = result.side == "ours"
    share = ctx.shared_prompts and ours
    counts = {
        "generate": flops.generation_flops(d, lengths, n, r, shared=ours),
        "update_actor": flops.training_flops(
            d, lengths, n, r, shared=share, recompute=ctx.recompute and ours
        ),
    }
    forward = flops.sequence_forward_flops(d, lengths, n, r, shared=share)
    if result.variant == "kl":
        counts["ref"] = forward
    if "old_logprob" in result.phases:
        counts["old_logprob"] = forward
    return {phase: value * scale for phase, value in counts.items()}


def _mfu(model_flops: float, seconds: float, gflops: float) -> float:
    return model_flops / (seconds * gflops * 1e9) if seconds > 0 and gflops > 0 else 0.0


def report(
    results: list[w.RunResult],
    warmup: int,
    args_line: str,
    threads: int,
    ctx: ShapeContext,
    versions: str,
) -> str:
    from rl.core.machine import cpu_model

    gflops = statistics.fmean(ctx.gflops) if ctx.gflops else 0.0
    measured = ", ".join(f"{g:.1f}" for g in ctx.gflops)
    lines = [
        f"# rl.bench grpo-step, {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"# machine: {cpu_model()}, {os.cpu_count()} cores; {threads} threads per run; "
        f"python {sys.version.split()[0]}",
        f"# versions: {versions}",
        f"# command: python -m rl.bench grpo-step {args_line}",
        f"# workload: {ctx.shape} shape, {ctx.layers} layers (random weights, fp32), "
        f"chat-templated GSM8K, {w.PROMPTS} prompts x {w.RESPONSES_PER_PROMPT} samples x <= "
        f"32 tokens, 1 optimizer step per step, lr {w.LEARNING_RATE}, temperature 1; "
        f"kl: k3 KL loss, coef {w.KL_COEF}",
        f"# prompts: mean {ctx.mean_prompt:.1f} tokens over {len(ctx.prompt_lengths)} rows; "
        f"{ctx.prompt_check}",
        f"# fp32 matmul: {gflops:.1f} GFLOPS (measured in this run, before / after: "
        f"{measured}; torch.mm at the model's hidden x intermediate)",
        "",
        "| variant | run | median step (s) | steps | ratio ours/TRL | peak RSS, process tree "
        "(MiB) | RSS ratio ours/TRL | mean response tokens | step MFU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    phase_lines: list[str] = []
    for variant in dict.fromkeys(r.variant for r in results):
        runs = [r for r in results if r.variant == variant]
        trl = [r for r in runs if r.side == "trl"]
        trl_step = statistics.median(s for r in trl for s in r.step_s[warmup:]) if trl else None
        trl_rss = statistics.median(tree_peak(r) for r in trl) if trl else None
        for name in dict.fromkeys(label(r) for r in runs):
            mine = [r for r in runs if label(r) == name]
            step = statistics.median(s for r in mine for s in r.step_s[warmup:])
            rss = statistics.median(tree_peak(r) for r in mine)
            lengths = [x for r in mine for x in r.response_len[warmup:]]
            response = statistics.fmean(lengths) if lengths else 0.0
            counts = phase_flops(ctx, mine[0], response)
            ratio = f"{step / trl_step:.3f}" if trl_step and mine[0].side == "ours" else ""
            rss_ratio = f"{rss / trl_rss:.2f}" if trl_rss and mine[0].side == "ours" else ""
            lines.append(
                f"| {variant} | {name} | {step:.3f} | {sum(len(r.step_s[warmup:]) for r in mine)} "
                f"| {ratio} | {rss:.0f} | {rss_ratio} | {response:.1f} "
                f"| {_mfu(sum(counts.values()), step, gflops):.1%} |"
            )
            if mine[0].side == "ours":
                phase_lines.append(
                    f"- {variant}, {name}: " + _phases(mine, warmup, step, counts, gflops)
                )
    lines += ["", "Our phases: median seconds (share of the median step), peak RSS of the "
              "process tree while it ran, MFU where its model FLOPs are counted:", ""]  # fmt: skip
    lines += phase_lines
    lines += w.ours_only_costs(results, warmup)
    return "\n".join(lines) + "\n"


def _phases(
    runs: list[w.RunResult], warmup: int, step: float, counts: dict[str, float], gflops: float
) -> str:
    seconds: dict[str, list[float]] = {}
    peaks: dict[str, list[float]] = {}
    for r in runs:
        for phase, values in r.phases.items():
            seconds.setdefault(phase, []).extend(values[warmup:])
        for phase, peak in r.phase_peak_rss_mib.items():
            peaks.setdefault(phase, []).append(peak)
    parts = []
    for phase, values in seconds.items():
        median = statistics.median(values)
        part = f"{phase} {median:.3f} s ({median / step:.0%}"
        if phase in peaks:
            part += f", {statistics.median(peaks[phase]):.0f} MiB"
        if phase in counts:
            part += f", MFU {_mfu(counts[phase], median, gflops):.1%}"
        parts.append(part + ")")
    return "; ".join(parts)
