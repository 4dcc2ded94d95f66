"""One rank of a megatron engine scenario: `python _ranks.py SCENARIO RANK WORLD PORT OUT LAYOUT`.

Run by `mcore_world.run_ranks` in separate processes (gloo on CPU; each engine built on
the CPU installs rl-megatron's CPU debug mode, `rl.megatron.cpu_mode`, itself, as in a
run); each rank writes what the test compares to
OUT/<rank>.pt. LAYOUT is a JSON object of `MegatronConfig` fields, and optionally
`model_type` and `num_hidden_layers`.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

warnings.simplefilter("ignore")

import torch  # noqa: E402

from rl.core.config import OptimConfig  # noqa: E402
from rl.core.engines import Rollouts  # noqa: E402
from rl.core.micro_batches import MicroBatching  # noqa: E402
from rl.core.role_spec import RoleSpec  # noqa: E402
from rl.core.trainer.rollout_batch import build_batch  # noqa: E402
from rl.megatron.config import MegatronConfig  # noqa: E402

TINY = dict(
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=96,
    max_position_embeddings=128,
)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)


def hf_model(model_type: str) -> torch.nn.Module:
    import transformers

    extra = MOE if model_type == "qwen3_moe" else {}
    config = transformers.AutoConfig.for_model(model_type, **TINY, **extra)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).float().eval()


def checkpoint_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors as `save_pretrained` writes them (per-expert names for Qwen3-MoE)."""
    import tempfile

    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        return load_file(os.path.join(folder, "model.safetensors"))


def ragged_batch(rows: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    """Prompts and responses of different lengths, empty responses included."""
    generator = torch.Generator().manual_seed(seed)
    prompts = [
        torch.randint(1, TINY["vocab_size"], (3 + (5 * i) % 7,), generator=generator).tolist()
        for i in range(rows)
    ]
    lengths = [9, 1, 0, 3, 9, 2, 5, 7][:rows]
    responses = [
        torch.randint(1, TINY["vocab_size"], (n,), generator=generator).tolist() for n in lengths
    ]
    return build_batch(Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]), 0, 9)


def token_mean_loss(output, micro, mini):
    """-mean log p over the mini-batch's response tokens, weighted by a fixed advantage."""
    mask = micro["response_mask"].float()
    weight = 1.0 + 0.1 * torch.arange(mask.shape[1], dtype=torch.float32)
    loss = -(output.logprobs * mask * weight).sum() / mini["response_mask"].sum()
    return loss, {"entropy": float((output.entropy * mask).sum() / mask.sum().clamp(min=1))}


HF: dict[str, tuple[torch.nn.Module, dict[str, torch.Tensor]]] = {}


def reference(model_type: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """The HF model and its checkpoint tensors (built before torch.distributed starts:
    `save_pretrained` writes only on rank 0 once it has)."""
    if model_type not in HF:
        model = hf_model(model_type)
        HF[model_type] = model, checkpoint_tensors(model)
    return HF[model_type]


# Adam's eps at the scale of the gradients: an engine that dropped it (megatron's adam_eps,
# torch's eps) would move weights by a good part of a step, far past the comparisons' bounds
ACTOR_OPTIM = OptimConfig(lr=1e-2, grad_clip=1.0, eps=1e-3)


def engine(model_type: str, layout: dict, role: str = "ref", packed: bool = True, **kwargs):
    from rl.megatron.engine import MegatronTrainEngine

    model, tensors = reference(model_type)
    return (
        MegatronTrainEngine(
            model.config,
            lambda: iter(tensors.items()),
            RoleSpec(
                role,
                optim=None if role == "ref" else ACTOR_OPTIM,
                mini_batch_size=8,
                use_remove_padding=packed,
                train_batching=MicroBatching(rows=3),
                **kwargs,
                backends={"megatron": MegatronConfig(**layout)},
            ),
        ),
        model,
        tensors,
    )


def scenario_logprobs(layout: dict, model_type: str = "qwen2") -> dict:
    """Log-probs and entropy, packed and padded, and the HF model's for reference."""
    batch = ragged_batch()
    out = {}
    for packed in (True, False):
        mcore, model, _ = engine(model_type, layout, packed=packed)
        result = mcore.compute_logprobs(batch)
        out[f"packed={packed}"] = (result.logprobs, result.entropy)
        alone = mcore.compute_logprobs(batch, calculate_entropy=False)  # as for the reference
        out[f"packed={packed} without entropy"] = (alone.logprobs, alone.entropy)
    from rl.fsdp.forward import response_logprobs

    with torch.no_grad():
        out["hf"] = response_logprobs(model, batch, 1.0, True, packed=False)
    out["mask"] = batch["response_mask"]
    out["exported"] = dict(mcore.export_weights())
    out["original"] = reference(model_type)[1]
    out["shared_embedding"] = unwrap_first(mcore).share_embeddings_and_output_weights
    folder = Path(os.environ["RL_TEST_OUT"]) / "hf-export"
    mcore.save_hf(str(folder))  # a collective: every rank gathers, rank 0 writes
    out["hf_folder"] = str(folder)
    return out


def unwrap_first(mcore):
    from rl.megatron.logprobs import unwrap

    return unwrap(mcore.chunks[0])


def scenario_train(layout: dict, model_type: str = "qwen2", steps: int = 2) -> dict:
    """Two train steps on one batch; the metrics and the updated (exported) weights, and
    the log-probs before training in one forward micro-batch of all rows."""
    mcore, _, _ = engine(model_type, layout, role="actor", forward_batching=MicroBatching(rows=8))
    batch = ragged_batch()
    logprobs = mcore.compute_logprobs(batch).logprobs
    metrics = [mcore.train_step(batch, token_mean_loss) for _ in range(steps)]
    out = {"metrics": metrics, "weights": dict(mcore.export_weights()), "logprobs": logprobs}
    # after the steps: a last pipeline stage's copy of a tied output layer must have moved
    # with the embedding (the export shows the embedding only)
    out["logprobs_after"] = mcore.compute_logprobs(batch).logprobs
    import torch.distributed as dist

    if dist.get_world_size() == 1:  # the FSDP engine on the same model, loss and optimizer
        import copy

        from rl.fsdp.engine import FSDPTrainEngine

        fsdp = FSDPTrainEngine(
            copy.deepcopy(reference(model_type)[0]),
            RoleSpec(
                "actor", optim=ACTOR_OPTIM, mini_batch_size=8, train_batching=MicroBatching(rows=3)
            ),
        )
        out["fsdp_metrics"] = [fsdp.train_step(batch, token_mean_loss) for _ in range(steps)]
        out["fsdp_weights"] = dict(fsdp.export_weights())
        out["fsdp_logprobs_after"] = fsdp.compute_logprobs(batch).logprobs
    return out


def scenario_resume(layout: dict, model_type: str = "qwen2") -> dict:
    """Step, save, step; and a fresh engine that loads the checkpoint and steps: both
    second steps must agree (weights, optimizer moments, LR schedule restored)."""
    folder = Path(os.environ["RL_TEST_OUT"]) / "checkpoint"
    batch = ragged_batch()
    first, _, _ = engine(model_type, layout, role="actor")
    first.train_step(batch, token_mean_loss)
    first.save(str(folder))
    saved = {name: tensor.clone() for name, tensor in first.export_weights()}  # views
    straight = first.train_step(batch, token_mean_loss)
    straight_weights = dict(first.export_weights())
    second, _, _ = engine(model_type, layout, role="actor")
    second.load(str(folder))
    resumed = second.train_step(batch, token_mean_loss)
    return {
        "straight": (straight, straight_weights),
        "resumed": (resumed, dict(second.export_weights())),
        "checkpoint": str(folder),
        "saved": saved,
    }


def scenario_save_for_layouts(layout: dict, model_type: str = "qwen2") -> dict:
    """Two steps (Adam's moments and step exist), a save into the layout's `checkpoint`,
    the training state (`_training_state`), a third step. The layout's `optimizer_format`
    writes the optimizer state in another of megatron-core's formats (an earlier rl's)."""
    from _training_state import training_state

    from rl.megatron import checkpoint

    folder = layout.pop("checkpoint")
    checkpoint.OPTIMIZER_FORMAT = layout.pop("optimizer_format", checkpoint.OPTIMIZER_FORMAT)
    mcore, _, _ = engine(model_type, layout, role="actor")
    mcore.train_step(ragged_batch(), token_mean_loss)
    mcore.train_step(ragged_batch(seed=1), token_mean_loss)
    mcore.save(folder)
    state = training_state(mcore)
    third = mcore.train_step(ragged_batch(seed=2), token_mean_loss)
    return {"state": state, "next": (third, dict(mcore.export_weights()))}


def scenario_load_at_layout(layout: dict, model_type: str = "qwen2") -> dict:
    """A fresh engine (its sampling generator moved on) loads the layout's `checkpoint`:
    the training state, then the third step."""
    from _training_state import training_state

    folder = layout.pop("checkpoint")
    mcore, _, _ = engine(model_type, layout, role="actor")
    torch.rand(3, generator=mcore.generator)
    mcore.load(folder)
    state = training_state(mcore)
    third = mcore.train_step(ragged_batch(seed=2), token_mean_loss)
    return {"state": state, "next": (third, dict(mcore.export_weights()))}


def scenario_offload(layout: dict, model_type: str = "qwen2") -> dict:
    """Step, offload everything, onload, step; against two uninterrupted steps. Also what
    was left allocated while offloaded (the parameters', gradients' and optimizer
    state's storages)."""
    from rl.megatron.offload import gradient_storages, optimizer_storages, parameter_storages

    offloading = {**layout, "param_offload": True, "grad_offload": True, "optimizer_offload": True}
    batch = ragged_batch()
    straight, _, _ = engine(model_type, layout, role="actor")
    straight_metrics = [straight.train_step(batch, token_mean_loss) for _ in range(2)]
    moved, _, _ = engine(model_type, offloading, role="actor")
    first = moved.train_step(batch, token_mean_loss)
    params, grads = parameter_storages(moved.chunks), gradient_storages(moved.chunks)
    owned = optimizer_storages(moved.optimizer, exclude=[*params, *grads])
    before = {
        kind: sum(s.nbytes() for s in storages.values())
        for kind, storages in (("params", params), ("grads", grads), ("optimizer", owned))
    }
    moved.offload()
    while_away = {
        kind: sum(s.nbytes() for s in storages.values())
        for kind, storages in (("params", params), ("grads", grads), ("optimizer", owned))
    }
    moved.onload()
    second = moved.train_step(batch, token_mean_loss)
    return {
        "straight": (straight_metrics, dict(straight.export_weights())),
        "offloaded": ([first, second], dict(moved.export_weights())),
        "before": before,
        "while_away": while_away,
        "offloads": moved.offloads,
    }


def hf_value_model(model_type: str) -> torch.nn.Module:
    """The critic: the reference model's backbone with a token-classification head."""
    import transformers

    model, _ = reference(model_type)
    config = model.config.__class__(
        **{**model.config.to_dict(), "num_labels": 1, "classifier_dropout": 0.0}
    )
    torch.manual_seed(1)
    critic = transformers.AutoModelForTokenClassification.from_config(config).float().eval()
    critic.model.load_state_dict(model.model.state_dict())
    with torch.no_grad():
        critic.score.bias.fill_(0.25)  # a non-zero bias, so that it is tested too
    return critic


# Adam's steps are ~lr whatever the gradient, so rounding-level gradient differences move
# near-zero-gradient weights by up to ~lr: a smaller lr keeps the comparison far from that
CRITIC_OPTIM = OptimConfig(lr=1e-3, grad_clip=1.0)


def value_loss(values, micro, mini):
    """Squared error to fixed targets over the mini-batch's response tokens."""
    mask = micro["response_mask"].float()
    target = torch.linspace(-1.0, 1.0, mask.shape[1])
    loss = ((values - target) ** 2 * mask).sum() / mini["response_mask"].sum()
    return loss, {"vf_mean": float((values * mask).sum() / mask.sum().clamp(min=1))}


def scenario_critic(layout: dict, model_type: str = "qwen2") -> dict:
    """A megatron critic from an HF value model: values (against HF's), two value-loss
    steps, the exported weights and a `save_hf` folder; at 1 rank the FSDP critic too."""
    import copy

    import torch.distributed as dist

    from rl.fsdp.forward import response_values
    from rl.megatron.engine import MegatronTrainEngine

    batch = ragged_batch()
    hf = hf_value_model(model_type)
    tensors = {name: t.clone() for name, t in hf.state_dict().items()}
    critic = MegatronTrainEngine(
        hf.config,
        lambda: iter(tensors.items()),
        RoleSpec(
            "critic",
            optim=CRITIC_OPTIM,
            mini_batch_size=8,
            train_batching=MicroBatching(rows=3),
            backends={"megatron": MegatronConfig(**layout)},
        ),
    )
    out: dict = {"values": critic.compute_values(batch), "mask": batch["response_mask"]}
    with torch.no_grad():
        out["hf_values"] = response_values(hf, batch, packed=False)
    out["metrics"] = [critic.train_step(batch, value_loss) for _ in range(2)]
    out["weights"] = dict(critic.export_weights())
    folder = Path(os.environ["RL_TEST_OUT"]) / "critic_hf"
    critic.save_hf(str(folder))
    out["folder"] = str(folder)
    if dist.get_world_size() == 1:
        from rl.fsdp.engine import FSDPTrainEngine

        fsdp = FSDPTrainEngine(
            copy.deepcopy(hf),
            RoleSpec(
                "critic",
                optim=CRITIC_OPTIM,
                mini_batch_size=8,
                train_batching=MicroBatching(rows=3),
            ),
        )
        out["fsdp_metrics"] = [fsdp.train_step(batch, value_loss) for _ in range(2)]
        out["fsdp_weights"] = dict(fsdp.export_weights())
    return out


def scenario_reads(layout: dict, model_type: str = "qwen2") -> dict:
    """Start from a real safetensors folder (`hf_folder`): which blocks of which tensors
    this rank read, how many elements the folder holds, and the log-probs, which must
    still equal the HF model's."""
    from safetensors.torch import load_file

    from rl.fsdp.forward import response_logprobs
    from rl.megatron.engine import MegatronTrainEngine

    model, _ = reference(model_type)
    folder = Path(os.environ["RL_TEST_OUT"]) / f"hf-{os.environ['RANK']}"
    model.save_pretrained(folder)  # before torch.distributed starts: every rank writes one
    total = sum(t.numel() for t in load_file(folder / "model.safetensors").values())

    def no_stream():
        raise AssertionError("the folder, not a stream, must be read")

    mcore = MegatronTrainEngine(
        model.config,
        no_stream,
        RoleSpec("ref", backends={"megatron": MegatronConfig(**layout)}),
        hf_folder=folder,
    )
    batch = ragged_batch()
    with torch.no_grad():
        expected = response_logprobs(model, batch, 1.0, False, packed=False)[0]
    return {
        "read": mcore.weights_read,
        "total": total,
        "logprobs": mcore.compute_logprobs(batch).logprobs,
        "hf": expected,
    }


def scenario_torn(layout: dict, model_type: str = "qwen2") -> dict:
    """Load a checkpoint whose shard files were truncated (a crash mid-write): the
    error, by type and message."""
    folder = Path(os.environ["RL_TEST_OUT"]) / "checkpoint"
    first, _, _ = engine(model_type, layout, role="actor")
    first.train_step(ragged_batch(), token_mean_loss)
    first.save(str(folder))
    for shard in (folder / "dist").rglob("*.distcp"):
        shard.write_bytes(shard.read_bytes()[:100])
    try:
        first.load(str(folder))
    except Exception as error:
        return {"type": type(error).__name__, "message": str(error)}
    return {"type": None, "message": ""}


def scenario_critic_from_dist(layout: dict, model_type: str = "qwen2") -> dict:
    """A critic started from a language model's distributed checkpoint (the backbone, a
    new head), its values against HF's; then trained one step, saved, and a second critic
    started from that checkpoint (head included): the same values."""
    from rl.fsdp.forward import response_values
    from rl.megatron.engine import MegatronTrainEngine
    from rl.megatron.weights import initial_value_head

    def no_stream():
        raise AssertionError("use_dist_checkpointing: nothing else is read")

    def critic(options: dict) -> MegatronTrainEngine:
        return MegatronTrainEngine(
            hf.config,
            no_stream,
            RoleSpec(
                "critic",
                optim=CRITIC_OPTIM,
                mini_batch_size=8,
                backends={"megatron": MegatronConfig(**options)},
            ),
        )

    hf = hf_value_model(model_type)
    with torch.no_grad():
        for name, tensor in initial_value_head(hf.config, seed=0).items():
            hf.get_parameter(name).copy_(tensor.reshape(hf.get_parameter(name).shape))
    batch = ragged_batch()
    first = critic(layout)
    started = first.compute_values(batch)
    with torch.no_grad():
        expected = response_values(hf, batch, packed=False)
    first.train_step(batch, value_loss)
    trained = first.compute_values(batch)
    folder = Path(os.environ["RL_TEST_OUT"]) / "critic_checkpoint"
    first.save(str(folder))
    second = critic({**layout, "dist_checkpointing_path": str(folder)})
    return {
        "started": started,
        "hf": expected,
        "trained": trained,
        "restarted": second.compute_values(batch),
        "mask": batch["response_mask"],
    }


def scenario_write_hf(layout: dict, model_type: str = "qwen2") -> dict:
    """The reference HF model as a folder (for `rl convert-ckpt`)."""
    folder = Path(os.environ["RL_TEST_OUT"]) / "hf"
    reference(model_type)[0].save_pretrained(folder)
    return {"folder": str(folder)}


def scenario_conformance(layout: dict, model_type: str = "qwen2") -> dict:
    """`rl.core.conformance.check_train_engine` on the engine named in the layout (the
    registry builds it from the built-in tiny model, as a run does); layout keys other
    than `engine` are `actor.megatron.*` overrides."""
    from rl.core.conformance import check_train_engine, conformance_config

    name = layout.pop("engine")
    overrides = [f"actor.megatron.{key}={value}" for key, value in layout.items()]
    config = conformance_config(f"actor.strategy={name}", f"critic.strategy={name}", *overrides)
    check_train_engine(name, Path(os.environ["RL_TEST_OUT"]) / "conformance", config)
    return {"engine": name}


def main() -> None:
    scenario, rank, world, port, out, layout = sys.argv[1:7]
    os.environ.update(
        RL_TEST_OUT=out,
        RANK=rank,
        WORLD_SIZE=world,
        LOCAL_RANK=rank,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
    )
    options = json.loads(layout)
    model_type = options.pop("model_type", "qwen2")
    TINY["num_hidden_layers"] = options.pop("num_hidden_layers", TINY["num_hidden_layers"])
    for key in ("tie_word_embeddings", "rope_scaling"):  # HF config fields, not layout
        if key in options:
            TINY[key] = options.pop(key)
    reference(model_type)
    result = globals()[f"scenario_{scenario}"](options, model_type)
    torch.save(result, Path(out) / f"{rank}.pt")
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
