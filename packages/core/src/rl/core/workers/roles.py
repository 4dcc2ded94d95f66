"""Role handles: a worker group seen through the `TrainEngine` / `RolloutEngine` contracts.

The controller holds a `TrainRole` for the actor, reference and critic and a
`RolloutRole` for generation, whatever the launcher: the handles split and gather
(dispatch.py) and the group carries the calls to its ranks.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from rl.core.batch import batch_size
from rl.core.engines import LogprobOutput, LossFn, Rollouts, SamplingParams
from rl.core.workers.dispatch import gather_rows, mean_metrics, scatter_rows, spread_rows
from rl.core.workers.replicas import RolloutReplicas
from rl.core.workers.request_batcher import RequestBatcher

if TYPE_CHECKING:
    from rl.core.vision.inputs import ImageInputs


class TrainRole:
    """`TrainEngine` over every rank of a group: data parallel over groups of
    `sequence_parallel` consecutive ranks, which share their rows (Ulysses)."""

    def __init__(self, group: Any, role: str, sequence_parallel: int = 1) -> None:
        self.group, self.role, self.sp = group, role, sequence_parallel

    def _run(self, method: str, *args: Any) -> list[Any]:
        return self.group.call(self.role, "run", self.role, method, *args)

    def _forward(
        self, method: str, batch: Mapping[str, Any], *args: Any
    ) -> tuple[list[torch.Tensor], list[Any]]:
        world = self.group.world_size
        parts = scatter_rows(batch, world // self.sp)
        per_rank = [(self.role, method, parts[rank // self.sp][1], *args) for rank in range(world)]
        answers = self.group.call_each(self.role, "run", per_rank)[:: self.sp]
        return [rows for rows, _ in parts], answers

    def compute_logprobs(
        self, batch: Mapping[str, Any], calculate_entropy: bool = True
    ) -> LogprobOutput:
        rows, answers = self._forward("compute_logprobs", batch, calculate_entropy)
        total = batch_size(batch)
        logprobs = gather_rows(rows, [a.logprobs for a in answers], total)
        assert logprobs is not None
        return LogprobOutput(
            logprobs,
            gather_rows(rows, [a.entropy for a in answers], total),
            gather_rows(rows, [a.routed_experts for a in answers], total),  # routing replay R2
        )

    def compute_values(self, batch: Mapping[str, Any]) -> torch.Tensor:
        rows, answers = self._forward("compute_values", batch)
        values = gather_rows(rows, answers, batch_size(batch))
        assert values is not None
        return values

    def train_step(self, batch: Mapping[str, Any], loss_fn: LossFn) -> dict[str, float]:
        """Every rank gets the whole batch (one shared copy) and takes its share of each
        mini-batch; the metrics are averaged over ranks."""
        return mean_metrics(self._run("train_step", self.group.put(dict(batch)), loss_fn))

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors from rank 0 (every rank takes part in gathering them)."""
        exported = self.group.call(self.role, "export", self.role)[0]
        return iter(exported)

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        self._run("load_weights", self.group.put(list(named_tensors)))

    def save(self, path: str) -> None:
        self._run("save", path)

    def load(self, path: str) -> None:
        self._run("load", path)

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        self._run("save_hf", path, tokenizer)

    def offload(self) -> None:
        self._run("offload")

    def onload(self) -> None:
        self._run("onload")


class RolloutRole:
    """`RolloutEngine` over the rollout replicas of a group (one per rank)."""

    def __init__(self, group: Any, rerank: bool = False) -> None:
        self.group, self.rerank = group, rerank
        self._next_rank = itertools.cycle(range(group.world_size))
        self._groups: dict[str, str] = {}
        self._batchers = [
            RequestBatcher(functools.partial(self._submit, rank))
            for rank in range(group.world_size)
        ]

    def generate(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams) -> Rollouts:
        """Each replica generates a share: whole prompts with their n samples, or (with
        `data_rerank`) single samples round-robin, so one prompt's n spread out. Per-prompt
        seeds follow their prompts (and samples), so the split changes no sample."""
        return self._generate(prompt_ids, None, sampling)

    def generate_with_images(
        self,
        prompt_ids: Sequence[Sequence[int]],
        images: Sequence[ImageInputs | None],
        sampling: SamplingParams,
    ) -> Rollouts:
        """`generate`, each prompt's images going with it to its replica (`SeesImages`)."""
        if len(images) != len(prompt_ids):
            raise ValueError(f"{len(images)} image entries for {len(prompt_ids)} prompts")
        return self._generate(prompt_ids, images, sampling)

    def _generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        images: Sequence[ImageInputs | None] | None,
        sampling: SamplingParams,
    ) -> Rollouts:
        world = self.group.world_size
        row_images = None if images is None else list(images)
        if world == 1:
            whole = [range(len(prompt_ids))]
            return self._generate_shares(prompt_ids, row_images, whole, sampling)[0]
        if self.rerank:
            rows = [list(p) for p in prompt_ids for _ in range(sampling.n)]
            if row_images is not None:
                row_images = [image for image in row_images for _ in range(sampling.n)]
            seeds = sampling.sample_seeds(len(prompt_ids))
            one = replace(sampling, n=1, prompt_seeds=tuple(seeds or ()))
            shares = spread_rows(len(rows), world, rerank=True)
            answers = self._generate_shares(rows, row_images, shares, one)
            return _assemble(shares, answers, len(rows))
        shares = spread_rows(len(prompt_ids), world, rerank=False)
        answers = self._generate_shares(prompt_ids, row_images, shares, sampling)
        row_shares = [
            [i * sampling.n + j for i in share for j in range(sampling.n)] for share in shares
        ]
        return _assemble(row_shares, answers, len(prompt_ids) * sampling.n)

    def _generate_shares(
        self,
        prompt_ids: Sequence[Sequence[int]],
        images: Sequence[ImageInputs | None] | None,
        shares: Sequence[Sequence[int]],
        sampling: SamplingParams,
    ) -> list[Rollouts]:
        """Share k of the prompts (with their images, where the call has them) on replica
        k, with its prompts' seeds. The share of a replica lost meanwhile is generated again
        on the replicas left (`RolloutReplicas`): its seeds go with it, so its samples are
        the same."""

        def share_of(share: Sequence[int]) -> tuple[list[list[int]], list[Any] | None]:
            prompts = [list(prompt_ids[i]) for i in share]
            return prompts, None if images is None else [images[i] for i in share]

        parts = [share_of(share) for share in shares]
        answers = self._run_each(
            [
                (prompts, sampling.for_prompts(share))
                if share_images is None
                else (prompts, share_images, sampling.for_prompts(share))
                for (prompts, share_images), share in zip(parts, shares, strict=True)
            ]
        )
        for k, share in enumerate(shares):
            if answers[k] is None:
                self.group.regenerated(len(share) * sampling.n)
                answers[k] = self._generate(*parts[k], sampling.for_prompts(share))
        return answers

    def _run_each(self, per_rank: list[tuple[Any, ...]]) -> list[Any]:
        """`generate` on each replica, or `generate_with_images` where the arguments hold
        images (prompts, images, sampling); with replicas that survive a loss
        (`RolloutReplicas`), a lost replica's answer is None."""
        method = {2: "generate", 3: "generate_with_images"}
        calls = [("rollout", method[len(a)], *a) for a in per_rank]
        if isinstance(self.group, RolloutReplicas):
            return self.group.call_each_surviving("rollout", "run", calls)
        return self.group.call_each("rollout", "run", calls)

    async def generate_one(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> Rollouts:
        """One prompt on the next replica in turn; the requests waiting for a replica run
        there as one batched `generate` (`RequestBatcher`), replicas side by side."""
        batcher = self._batchers[next(self._next_rank)]
        return await batcher.submit(prompt_ids, sampling)

    @property
    def replicas(self) -> int:
        return int(self.group.world_size)

    async def generate_on(
        self, replica: int, prompt_ids: Sequence[int], sampling: SamplingParams
    ) -> Rollouts:
        """One prompt on replica `replica` (an agent session keeps to one: its prefix is
        in that replica's cache), batched with the requests waiting there."""
        return await self._batchers[replica % self.replicas].submit(prompt_ids, sampling)

    async def _submit(self, rank: int, prompts: list[list[int]], sampling: SamplingParams) -> Any:
        return await self.group.submit(rank, "rollout", "generate", prompts, sampling)

    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """The same weights into every replica (through the driver: for weights that do not
        come from a colocated actor; the actor's own go by `sync_weights`)."""
        self.group.call(
            "rollout", "run", "rollout", "update_weights", self.group.put(list(named_tensors))
        )

    def weight_group(self, name: str) -> str:
        if name not in self._groups:
            self._groups[name] = self.group.call("rollout", "run", "rollout", "weight_group", name)[
                0
            ]
        return self._groups[name]

    def score_each(self, token_ids: Sequence[int]) -> list[list[float]]:
        """Every replica's log-probs of `token_ids` (`ScoresTokens`): the weight-sync probe."""
        return list(self.group.call("rollout", "run", "rollout", "score", list(token_ids)))

    def sync_weights(self, version: int) -> dict[str, float]:
        """Each rank's actor weights (`version`: the updates they hold) into its own rollout
        replica."""
        return mean_metrics(self.group.call("rollout", "sync_weights", version))

    def sleep(self) -> None:
        self.group.call("rollout", "run", "rollout", "sleep")

    def wake(self) -> None:
        self.group.call("rollout", "run", "rollout", "wake")


def _assemble(shares: Sequence[Sequence[int]], answers: Sequence[Rollouts], total: int) -> Rollouts:
    """One `Rollouts` in row order from the replicas' answers for `shares` rows."""
    prompts: list[Any] = [None] * total
    responses: list[Any] = [None] * total
    logprobs: list[Any] = [None] * total
    reasons: list[str] = [""] * total
    versions: list[int | None] = [None] * total
    routes: list[Any] = [None] * total
    images: list[Any] = [None] * total
    for share, answer in zip(shares, answers, strict=True):
        for k, row in enumerate(share):
            prompts[row] = answer.prompt_ids[k]
            responses[row] = answer.response_ids[k]
            logprobs[row] = answer.logprobs[k]
            if answer.finish_reasons:
                reasons[row] = answer.finish_reasons[k]
            if answer.weight_versions:
                versions[row] = answer.weight_versions[k]
            if answer.routed_experts:
                routes[row] = answer.routed_experts[k]
            if answer.images:
                images[row] = answer.images[k]
    known = [v for v in versions if v is not None]
    return Rollouts(
        prompts,
        responses,
        logprobs,
        reasons if all(reasons) else [],
        weight_versions=known if len(known) == total else [],
        routed_experts=routes if all(r is not None for r in routes) else [],
        images=images if any(image is not None for image in images) else [],
    )
