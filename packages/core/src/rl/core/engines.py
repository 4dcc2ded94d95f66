"""The contracts between the controller and the roles it drives.

The controller talks to actor, reference, critic and rollout workers only
through these protocols, so algorithms never know which backend runs them
(FSDP2 or megatron-core for training; vLLM, SGLang or Hugging Face for
generation). Backends register concrete classes through the `rl.engines`
entry-point group (see `rl.core.registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

import torch

if TYPE_CHECKING:
    from rl.core.role_spec import RoleSpec
    from rl.core.vision.inputs import ImageInputs

SEED_LIMIT = 2**63  # per-sample seeds fit a signed 64-bit generator seed (torch, vLLM)

# Batch keys: one name per concept in every package.
BatchKey = Literal[
    "input_ids",
    "attention_mask",
    "position_ids",
    "prompts",
    "responses",
    "response_mask",
    "prompt_uid",
    "rollout_logprobs",
    "old_logprobs",
    "ref_logprobs",
    "teacher_logprobs",  # on-policy distillation's teacher, on the student's samples
    "entropy",
    "values",
    "token_level_scores",
    "token_level_rewards",
    "advantages",
    "returns",
    "routed_experts",  # int16 [B, P + R, moe_layers, top_k], -1: no route (routing replay)
    # a vision-language model's images, per row, zero-padded (`rl.core.vision.inputs`)
    "pixel_values",  # float32 [B, most patches, C * T * P * P]
    "image_grid_thw",  # int64 [B, most images, 3]; (0, 0, 0): no image
]
BATCH_KEYS: tuple[BatchKey, ...] = get_args(BatchKey)


@dataclass(frozen=True)
class SamplingParams:
    """How to sample responses; `n` responses per prompt form one group."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_new_tokens: int = 256
    min_new_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()  # besides the tokenizer's EOS; the stop token is kept
    seed: int | None = None  # per request: the same seed gives the same samples
    repetition_penalty: float = 1.0
    ignore_eos: bool = False  # generate max_new_tokens whatever is sampled
    # One per prompt, when given: sample j of prompt i draws its randomness from a stream of
    # its own, seeded prompt_seeds[i] + j (vLLM's convention for n > 1), and from nothing
    # else, so that no replica, batch, chunk or neighbour changes what it samples (up to the
    # rounding of its logits). Engines must honour it (`sample_seeds`); `seed` is then unused.
    prompt_seeds: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # The schema refuses bad `rollout.*` values by key first; these guard engines and
        # callers that build SamplingParams in code. top_k -1 and 0 both mean "off".
        checks = (
            ("n", self.n >= 1, ">= 1"),
            ("temperature", self.temperature >= 0, ">= 0"),
            ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
            ("top_k", self.top_k >= -1, "-1 or 0 (off) or >= 1"),
            ("max_new_tokens", self.max_new_tokens >= 1, ">= 1"),
            ("repetition_penalty", self.repetition_penalty > 0, "> 0"),
            ("min_new_tokens", self.min_new_tokens >= 0, ">= 0"),
            (
                "min_new_tokens",
                self.min_new_tokens <= self.max_new_tokens,
                f"<= max_new_tokens ({self.max_new_tokens})",
            ),
        )
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(
                    f"SamplingParams.{name} = {getattr(self, name)!r}; allowed: {allowed}"
                )
        if any(not 0 <= seed < SEED_LIMIT - self.n for seed in self.prompt_seeds):
            raise ValueError(
                f"SamplingParams.prompt_seeds must lie in [0, 2**63 - n), got {self.prompt_seeds}"
            )

    def for_prompts(self, indices: Sequence[int]) -> SamplingParams:
        """These settings for a share of the prompts (their seeds, in `indices` order)."""
        if not self.prompt_seeds:
            return self
        return replace(self, prompt_seeds=tuple(self.prompt_seeds[i] for i in indices))

    def sample_seeds(self, prompts: int) -> list[int] | None:
        """The seed of each sample row of a call on `prompts` prompts (rows i*n .. i*n+n-1
        answer prompt i), or None when the call has no per-prompt seeds."""
        if not self.prompt_seeds:
            return None
        if len(self.prompt_seeds) != prompts:
            raise ValueError(
                f"SamplingParams.prompt_seeds has {len(self.prompt_seeds)} seeds for {prompts} prompts"
            )
        return [seed + j for seed in self.prompt_seeds for j in range(self.n)]


@dataclass
class Rollouts:
    """Generated responses, flat over prompts × n (prompt i's group is rows i*n .. i*n+n-1).

    `response_ids[j]` are the sampled token ids of row j and `logprobs[j]` their
    log-probabilities under the rollout engine (float32, same length): log-softmax of
    logits / temperature, the quantity the trainer recomputes (engines document how
    top-p/top-k truncation and repetition penalties enter). `finish_reasons[j]` is
    "stop" (EOS or a stop token, which is kept) or "length". Agentic rollouts interleave
    tool / environment tokens with the model's: `loss_masks[j]` is then 1 on the model's
    tokens and 0 on the others (whose `logprobs` are 0.0); empty means all the model's.
    Partial rollouts (`rl.core.trainer.partial`) record per token the policy version of the
    weights that sampled it in `policy_versions[j]`; engines leave it empty. Rows played
    against an environment carry its episode return in `returns[j]` (the row's score).
    `weight_versions[j]` is the version of the weights (the updates they hold) that row j
    was generated with, as the worker hosting the engine knew it from its last weight sync
    (`rl.core.workers.worker`); engines leave it empty, and it stays empty where unknown.
    An engine recording MoE routes (`RecordsRoutes`) puts in `routed_experts[j]` the
    experts each token of row j was routed to, int16 [prompt + response tokens,
    moe_layers, top_k], -1 for a token it never ran (the last response token).
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    logprobs: list[list[float]]
    finish_reasons: list[str] = field(default_factory=list)
    loss_masks: list[list[int]] = field(default_factory=list)
    policy_versions: list[list[int]] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    weight_versions: list[int] = field(default_factory=list)
    routed_experts: list[torch.Tensor] = field(default_factory=list)
    # rows of agent programs (`rl.core.agent.program`): the answer each gave, scored by the
    # run's reward in place of the model's text (None: the program failed, the row scores
    # 0), and the reward it gave itself, which is then the row's score (None: none given)
    answers: list[str | None] = field(default_factory=list)
    answer_rewards: list[float | None] = field(default_factory=list)
    # a vision-language model's rows: the images row j's prompt showed (`SeesImages`), which
    # the trainer's passes show again; empty for text
    images: list[ImageInputs | None] = field(default_factory=list)


def concat_rollouts(parts: Sequence[Rollouts]) -> Rollouts:
    """The rows of `parts`, in order, as one `Rollouts` (e.g. replicas' shares joined)."""
    joined: dict[str, list[Any]] = {f.name: [] for f in fields(Rollouts)}
    for part in parts:
        for name in joined:
            joined[name] += list(getattr(part, name))
    return Rollouts(**joined)


@dataclass
class LogprobOutput:
    """Per-token outputs of a forward pass over response tokens.

    logprobs: float32 [batch, response_len]; entropy: float32 [batch, response_len] or None;
    routed_experts: the routes the pass recorded (routing replay R2), int16 [batch,
    prompt + response_len, moe_layers, top_k], or None.
    """

    logprobs: torch.Tensor
    entropy: torch.Tensor | None = None
    routed_experts: torch.Tensor | None = None


LossFn = Callable[..., tuple[torch.Tensor, dict[str, float]]]


class TrainEngine(Protocol):
    """A trainable model (actor, critic) or a frozen one (reference) on some backend.

    An engine class declares this contract, and each optional ability below it supports,
    by naming them as its bases (`class FSDPTrainEngine(TrainEngine, Offloading, ...)`);
    the registry checks once, when the class is loaded, that every member of what it
    declares is defined (`rl.core.engine_contract`), and the callers use only what it
    declared."""

    @classmethod
    def from_spec(cls, spec: RoleSpec, tokenizer: Any) -> TrainEngine:
        """The engine of `spec.role` ("actor", "ref", "critic") from what `spec` says (its
        model, optimizer, batching, backend section); the engine reads nothing else of the
        config (`rl.core.role_spec`)."""
        ...

    def compute_logprobs(
        self, batch: Mapping[str, Any], calculate_entropy: bool = True
    ) -> LogprobOutput:
        """Log-probs of the response tokens, and their entropy unless not
        `calculate_entropy` (verl's name): then `entropy` may be None, and an engine may
        skip the [tokens, vocab] work it costs (the reference's pass, which needs none)."""
        ...

    def compute_values(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """The critic's value of each response token: float32 [batch, response_len]."""
        ...

    def train_step(self, batch: Mapping[str, Any], loss_fn: LossFn) -> dict[str, float]:
        """Update on `batch`; the metrics include, under the role's prefix (`actor/`,
        `critic/`): `grad_norm`, `weight_norm` and `skipped_steps` (the share of this call's
        optimizer steps skipped for a non-finite gradient norm; the LR schedule advances
        only when one was taken). The controller's health checks read these."""
        ...

    def export_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The model's weights in Hugging Face names, full tensors, streamed (every rank
        takes part in gathering them); a tied head is not exported apart."""
        ...

    def load_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Replace the model's weights with `named_tensors` (what `export_weights` of an
        engine of the same model yields): the reference starts from the actor, the actor
        from an SFT warm start."""
        ...

    def save(self, path: str) -> None:
        """Full training state into the folder `path`, via `rl.core.checkpoint_io` (write
        failures are OSError); `load` must run no code from the files."""
        ...

    def load(self, path: str) -> None: ...


class RolloutEngine(Protocol):
    """A generation engine: token ids in, token ids and their log-probs out; declared as
    `TrainEngine` is."""

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any) -> RolloutEngine: ...

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingParams
    ) -> Rollouts: ...

    async def generate_one(
        self, prompt_ids: Sequence[int], sampling: SamplingParams
    ) -> Rollouts: ...

    def update_weights(self, named_tensors: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Load the trainer's weights (Hugging Face names, full tensors).

        Called once per sync with a lazy iterator that yields the weights bucket by
        bucket as the sender packs them; the tensors may be views into a bucket, which
        stays valid while the engine holds a reference (an engine may buffer a fused
        module's parts until all have arrived). An unknown name or a wrong shape is an
        error naming the tensor."""
        ...

    def weight_group(self, name: str) -> str:
        """The group of weights the engine loads together with `name` (a fused module:
        q/k/v, gate/up, a MoE block's experts); a delta sync sends a group whole when any
        of its tensors changed. `rl.core.weight_sync.groups` has the two usual answers."""
        ...

    def sleep(self) -> None:
        """Release what generation holds between rollouts (KV cache, weights where the
        platform allows); `wake()` restores it before the next generate."""
        ...

    def wake(self) -> None: ...


# --- optional abilities: an engine class names the ones it has among its bases ----------


class Offloading(Protocol):
    """Steps aside from a device shared with other roles (train engines)."""

    @property
    def offloads(self) -> bool:
        """Whether this run asks it to (the backend's offload keys): the worker then
        offloads it whenever another role takes the device (`rl.core.workers.turns`)."""
        ...

    @classmethod
    def offload_keys(cls, spec: RoleSpec) -> tuple[str, ...]:
        """The config keys (dotted, e.g. `actor.fsdp_config.param_offload`) that ask the
        engine of `spec` to offload: empty when none does. Read before any engine is built
        (a mode that overlaps roles refuses them by name)."""
        ...

    def offload(self) -> None:
        """Release device memory (weights, gradients, optimizer state as configured)."""
        ...

    def onload(self) -> None: ...


class ExportsHF(Protocol):
    """Writes the model as a Hugging Face folder (train engines; the actor's must)."""

    def save_hf(self, path: str, tokenizer: Any = None) -> None:
        """A folder `transformers` and vLLM load (config, safetensors, the tokenizer when
        given), tied embeddings kept tied."""
        ...


class ExportsViews(Protocol):
    """A train engine whose `export_weights` can yield its live parameters themselves."""

    @property
    def exports_views(self) -> bool:
        """True when the tensors exported are the parameters, not copies (one process,
        unsharded): a colocated rollout engine may then adopt them (`SharesWeights`)."""
        ...


class HasAdapters(Protocol):
    """A train engine that can carry LoRA adapters (`model.lora_rank` > 0). With them,
    `export_weights` yields the merged weights under the base model's names, and the
    reference role is this engine's model with the adapters off (`compute_base_logprobs`):
    no second copy of the model (`rl.core.workers.base_reference`)."""

    @property
    def has_adapters(self) -> bool:
        """Whether this engine's model carries adapters now."""
        ...

    def compute_base_logprobs(
        self, batch: Mapping[str, Any], calculate_entropy: bool = False
    ) -> LogprobOutput:
        """`compute_logprobs` with every adapter bypassed: the base model's."""
        ...


class ScoresTokens(Protocol):
    """A rollout engine that gives the log-probs of given tokens (the weight-sync probe,
    `rl.core.trainer.sync_probe`): the check that a sync changed what it serves."""

    def score(self, token_ids: Sequence[int]) -> list[float]:
        """log p(token_ids[i] | token_ids[:i]) for i >= 1, at temperature 1, float."""
        ...


class SharesWeights(Protocol):
    """A rollout engine that can take a colocated trainer's tensors as its own weights."""

    def share_weights(self, named_tensors: Sequence[tuple[str, torch.Tensor]]) -> bool:
        """Adopt `named_tensors` (same device and dtype) so that later syncs move nothing;
        False when it cannot (it then keeps its own weights)."""
        ...


class Closable(Protocol):
    """A rollout engine holding processes or servers to end at the run's end."""

    def close(self) -> None: ...


class Preflighted(Protocol):
    """A train engine class with checks of its own on a role's settings, run before any
    model loads (a parallel layout against the model's shapes and the devices)."""

    @classmethod
    def preflight(cls, spec: RoleSpec, world: int) -> None:
        """Raise `ConfigError` naming the key and the fix; `world` is the number of ranks
        the role will run on."""
        ...


class PreflightedRollout(Protocol):
    """A rollout engine class with checks of its own on the config (its limits), run
    before any model loads."""

    @classmethod
    def preflight(cls, config: Any) -> None:
        """Raise `ConfigError` naming the key and the fix."""
        ...


class Replicated(Protocol):
    """A train engine class whose model copy spans several consecutive ranks."""

    @classmethod
    def replica_size(cls, spec: RoleSpec) -> int:
        """Ranks that hold one copy of the role's model between them and take the same rows
        (Ulysses' group, megatron's TP x CP x PP); 1 when not declared."""
        ...

    @classmethod
    def fit_world(cls, spec: RoleSpec, world: int) -> dict[str, Any]:
        """The overrides (our dotted key -> value) that shrink the role's parallel sizes to a
        layout that `world` ranks can run, e.g. {"actor.ulysses_sequence_parallel_size": 1};
        {} when the layout fits already. Preflight prints them when a run asks for more
        devices than it gets."""
        ...


class ReplaysRoutes(Protocol):
    """A train engine that replays MoE routes (`actor.router_replay.mode` R2 / R3): the
    actor's old-log-prob pass records them (R2) or replays the batch's `routed_experts`
    (R3), its updates replay them."""

    def replays_routes(self) -> bool:
        """Whether this engine replays routes (its role and config ask it to)."""
        ...


class RecordsRoutes(Protocol):
    """A rollout engine that records the MoE routes of each token it runs
    (`Rollouts.routed_experts`) when asked (routing replay R3)."""

    def record_routes(self, on: bool) -> None:
        """Record (or stop recording) routes in every later `generate`."""
        ...


# a discriminative reward model's scorer: each text's raw score (its last label's logit)
Classify = Callable[[list[str]], list[float]]


class ServesClassifier(Protocol):
    """A rollout engine that also serves a sequence classifier (a discriminative reward
    model, verl's reward loop: vLLM's classify endpoint without its activation)."""

    @classmethod
    def classifier_from_config(cls, config: Any) -> Classify:
        """The classifier of folder `config.model.path` at `config.rollout.dtype` (auto:
        `model.dtype`) on `config.trainer.device`, reading at most
        `config.reward.reward_model.max_length` tokens of a text, in batches of
        `config.reward.reward_model.batch_size` where the engine batches itself."""
        ...


class SeesImages(Protocol):
    """A rollout engine that generates from prompts with images (a vision-language model:
    the prompts' ids hold each image's `<|image_pad|>` run, widened to its merged
    patches)."""

    def generate_with_images(
        self,
        prompt_ids: Sequence[Sequence[int]],
        images: Sequence[ImageInputs | None],
        sampling: SamplingParams,
    ) -> Rollouts:
        """`generate`, with prompt i showing `images[i]` (None: none); the rollouts'
        `images` give each row its prompt's."""
        ...


class TrainsOnImages(Protocol):
    """A train engine whose passes show the model each row's images (the batch's
    `pixel_values` / `image_grid_thw`) at the model's multimodal rotary positions."""

    def trains_on_images(self) -> bool:
        """Whether this engine's model is a vision-language one."""
        ...


CAPABILITIES: dict[str, tuple[type, ...]] = {
    "train": (
        Offloading,
        ExportsHF,
        ExportsViews,
        Preflighted,
        Replicated,
        ReplaysRoutes,
        HasAdapters,
        TrainsOnImages,
    ),
    "rollout": (
        SharesWeights,
        Closable,
        PreflightedRollout,
        RecordsRoutes,
        ScoresTokens,
        ServesClassifier,
        SeesImages,
    ),
}
CONTRACTS: dict[str, type] = {"train": TrainEngine, "rollout": RolloutEngine}
