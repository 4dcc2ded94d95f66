"""Where an LLM judge's model runs: one of rl's rollout engines (`judge.engine`, built by
the engine registry from the judge's own model, as the policy's is), either in the
trainer's process (`judge.placement: colocated`) or in a Ray actor of its own with
`judge.num_cpus` / `judge.num_gpus` (`ray`: ROLL's judge on devices of its own).

Both answer `generate_batches(batches, sampling, timeout_s)` with each batch's response
token ids, or the error it met (`JudgeTimeout` after `timeout_s` a batch). A Ray judge
replica over its time is killed and started again (the next call finds a fresh one); a
colocated generation cannot be stopped, so the next batch waits for it first, within its
own time. The judge never receives the policy's weights: it is frozen.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rl.core.engines import Rollouts, SamplingParams, concat_rollouts
from rl.core.errors import ConfigError
from rl.core.rewards.judge import JudgeTimeout
from rl.core.workers.dispatch import spread_rows

log = logging.getLogger(__name__)


def judge_run_config(config: Any, judge: Any) -> Any:
    """The run's config with the judge's model and engine in place of the policy's: what
    the rollout engine is built from (real weights, read from `judge.model_path`)."""
    from rl.core.config.schema import ModelConfig

    model = ModelConfig(
        path=judge.model_path,
        dtype=config.model.dtype,
        trust_remote_code=config.model.trust_remote_code,
    )
    rollout = replace(
        config.rollout,
        name=judge.engine,
        dtype=judge.dtype,
        load_format="auto",
        tensor_parallel_size=judge.tensor_parallel_size,
        free_cache_engine=False,
        max_model_len=judge.max_model_len,
        gpu_memory_utilization=judge.gpu_memory_utilization
        or config.rollout.gpu_memory_utilization,
    )
    return replace(config, model=model, rollout=rollout)


class JudgeEngine:
    """A judge's rollout engine in this process (built from `judge_run_config`)."""

    def __init__(self, run_config: Any) -> None:
        from rl.core.models.loading import load_tokenizer
        from rl.core.workers.build import build_rollout_engine

        self.tokenizer = load_tokenizer(run_config.model)
        self.engine = build_rollout_engine(run_config, self.tokenizer)

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams
    ) -> list[list[int]]:
        return list(self.engine.generate(prompt_ids, sampling).response_ids)

    def rollouts(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams) -> Rollouts:
        """The engine's whole answer (log-probs and finish reasons too): what a served
        endpoint returns."""
        return self.engine.generate(prompt_ids, sampling)

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


Outcome = list[list[int]] | BaseException  # a batch's responses, or why it has none


class LocalJudge:
    """The judge in the trainer's process; each batch runs on a thread of its own so that
    it can be waited for with a timeout."""

    def __init__(self, run_config: Any) -> None:
        self.engine = JudgeEngine(run_config)
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rl-judge")
        self.pending: concurrent.futures.Future[Any] | None = None

    def generate_batches(
        self, batches: Sequence[Sequence[Sequence[int]]], sampling: SamplingParams, timeout_s: float
    ) -> list[Outcome]:
        """Each batch in turn, each within `timeout_s`."""
        found: list[Outcome] = []
        for batch in batches:
            try:
                found.append(self.generate(batch, sampling, timeout_s))
            except Exception as error:
                found.append(error)
        return found

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams, timeout_s: float
    ) -> list[list[int]]:
        if self.pending is not None and not self._wait(self.pending, timeout_s):
            raise JudgeTimeout(
                f"the judge is still generating a batch that ran over its time limit "
                f"({timeout_s:g} s)"
            )
        future = self.pool.submit(self.engine.generate, prompt_ids, sampling)
        if not self._wait(future, timeout_s):
            self.pending = future
            raise JudgeTimeout(f"the judge took more than {timeout_s:g} s for a batch")
        self.pending = None
        return future.result()

    async def agenerate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> Rollouts:
        """For a served endpoint: on the judge's own thread, after its other batches."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.engine.rollouts, prompt_ids, sampling)

    @staticmethod
    def _wait(future: concurrent.futures.Future[Any], timeout_s: float) -> bool:
        done, _ = concurrent.futures.wait([future], timeout=timeout_s)
        return bool(done)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.engine.close()


class RayJudge:
    """The judge in `replicas` Ray actors of its own (`num_cpus`, `num_gpus` each); joins
    the run's Ray cluster (`trainer.ray_address`) or starts a local one. A call's batches
    are dealt round-robin over the replicas, which generate at the same time."""

    def __init__(self, run_config: Any, num_cpus: float, num_gpus: float, replicas: int = 1):
        from rl.core.workers.ray_group import start_ray

        start_ray(run_config.trainer.ray_address, num_cpus=max(2.0, num_cpus * replicas))
        self.run_config, self.num_cpus, self.num_gpus = run_config, num_cpus, num_gpus
        self.restarts = 0
        self.actors: list[Any] = []
        try:
            for _ in range(replicas):
                self.actors.append(self._start())
        except BaseException:
            self.close()
            raise

    def _start(self) -> Any:
        import ray

        threads = str(max(1, int(self.num_cpus)))
        remote: Any = ray.remote(JudgeEngine).options(
            num_cpus=self.num_cpus,
            num_gpus=self.num_gpus,
            runtime_env={"env_vars": {"OMP_NUM_THREADS": threads}},
            max_concurrency=1,
        )
        actor = remote.remote(self.run_config)
        ray.get(actor.__ray_ready__.remote())  # built (its failure raised here, at start)
        return actor

    def generate_batches(
        self, batches: Sequence[Sequence[Sequence[int]]], sampling: SamplingParams, timeout_s: float
    ) -> list[Outcome]:
        """Batch i goes to replica i % replicas, behind that replica's earlier batches of
        this call: its deadline is `timeout_s` per batch up to and including it. A replica
        that misses a deadline is killed and started again; its later batches of the call
        are timed out with it."""
        import ray

        count = len(self.actors)
        refs = [
            self.actors[i % count].generate.remote([list(p) for p in batch], sampling)
            for i, batch in enumerate(batches)
        ]
        started = time.monotonic()
        late: set[int] = set()
        found: list[Outcome] = []
        for i, ref in enumerate(refs):
            replica = i % count
            if replica in late:
                found.append(JudgeTimeout(f"the judge replica {replica} was restarted"))
                continue
            deadline = started + timeout_s * (i // count + 1)
            try:
                found.append(ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except ray.exceptions.GetTimeoutError:
                log.warning("the judge took more than %g s; it is started again", timeout_s)
                late.add(replica)
                ray.kill(self.actors[replica])
                self.restarts += 1
                self.actors[replica] = self._start()
                found.append(JudgeTimeout(f"the judge took more than {timeout_s:g} s for a batch"))
            except Exception as error:
                found.append(error)
        return found

    async def agenerate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> Rollouts:
        """For a served endpoint: the prompts dealt over the replicas in contiguous shares,
        generated at the same time, joined in order."""
        shares = spread_rows(len(prompt_ids), len(self.actors), rerank=False)
        parts = await asyncio.gather(
            *[
                actor.rollouts.remote([prompt_ids[i] for i in share], sampling)
                for actor, share in zip(self.actors, shares, strict=True)
                if share
            ]
        )
        return concat_rollouts(parts)

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []


def start_judge(config: Any, judge: Any) -> LocalJudge | RayJudge:
    run_config = judge_run_config(config, judge)
    if judge.placement == "ray":
        gpus = judge.num_gpus
        if gpus is None:  # its engine's devices per replica where the run has devices
            gpus = float(judge.tensor_parallel_size) if config.trainer.device == "cuda" else 0.0
        return RayJudge(run_config, judge.num_cpus, gpus, judge.replicas)
    return LocalJudge(run_config)


# a judge batch's time limit when its domain sets none: a batch of long verdicts from a
# large judge takes minutes, where a rule's reward.timeout_s is seconds
JUDGE_TIMEOUT_S = 600.0


def start_judges(config: Any, tokenizer: Any) -> dict[str, Any]:
    """A served judge (`rl.core.rewards.judge`) for each domain scored by `llm_judge`;
    `tokenizer` is the policy's."""
    from rl.core.models.loading import load_tokenizer
    from rl.core.rewards.domain_score import JUDGE
    from rl.core.rewards.judge import JudgeScorer

    reward, judges = config.reward, {}
    name = ""
    try:
        for name, domain in reward.domains.items():
            if domain.scorer != JUDGE:
                continue
            judge_tokenizer = load_tokenizer(judge_run_config(config, domain.judge).model)
            judges[name] = JudgeScorer(
                domain.judge,
                start_judge(config, domain.judge),
                judge_tokenizer,
                tokenizer,
                timeout_s=domain.timeout_s or JUDGE_TIMEOUT_S,
                max_error_rate=reward.max_error_rate,
                error_rate_window=reward.error_rate_window,
            )
    except BaseException as error:  # the judges started before this one are stopped
        for judge in judges.values():
            judge.close()
        if isinstance(error, ValueError):  # a judge's model, prompt or settings
            raise ConfigError(f"reward.domains.{name}.judge: {error}") from None
        raise
    return judges
