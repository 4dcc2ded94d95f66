"""MoE routing replay: record the experts each token is routed to, or route it to given ones.

Transformers' MoE blocks (Qwen3-MoE, Mixtral) ask their router (`mlp.gate`, a
`*TopKRouter`) for `(router_logits, top_k_weights, top_k_index)`: top-k of
softmax(logits) and, renormalised over the k (Mixtral always, Qwen3-MoE with
`norm_topk_prob`), the weights the chosen experts' outputs are summed with. A forward hook
on each router either records `top_k_index` or swaps in recorded indices; the weights are
then softmax(current logits) at those indices, renormalised and cast as the router does
(verl's replay does the same), so they stay differentiable in the router's weight.

Routes are int16 `[tokens, moe_layers, top_k]`, layers in model order (MoE layers only),
-1 where a token has no recorded route (padding, a response's last token, which the
rollout never ran): such a token is routed by the model itself. A replayed route equal to
the model's own choice leaves the forward bit-for-bit unchanged. Replayed routes stay
set until the model's next routing pass, so that activation checkpointing's recompute in
the backward pass routes as the forward did.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rl.core.errors import UserError

# router classes whose output and weight formula are known (transformers 5)
ROUTERS = {"Qwen3MoeTopKRouter": "norm_topk_prob", "MixtralTopKRouter": None}
NO_ROUTE = -1
MODES = ("disabled", "R2", "R3")


class RoutingReplayError(UserError):
    """Routing replay asked of a model or engine that cannot do it."""


def moe_routers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's MoE routers in layer order (empty for a dense model). A module that
    looks like a router of another family is refused by name: its weights are unknown."""
    routers = []
    for name, module in model.named_modules():
        kind = type(module).__name__
        if kind in ROUTERS:
            routers.append(module)
        elif kind.endswith("Router") or (name.endswith(".gate") and hasattr(module, "top_k")):
            raise RoutingReplayError(
                f"routing replay knows the routers of Qwen3-MoE and Mixtral, not {kind} ({name})"
            )
    return routers


def require_routers(model: torch.nn.Module, setting: str) -> list[torch.nn.Module]:
    """`moe_routers`, refusing a dense model by `setting`'s name (replay would do nothing)."""
    routers = moe_routers(model)
    if not routers:
        raise RoutingReplayError(
            f"{setting} needs a mixture-of-experts model (Qwen3-MoE, Mixtral); "
            f"{type(model).__name__} has no routers"
        )
    return routers


def _normalises(router: torch.nn.Module) -> bool:
    attribute = ROUTERS[type(router).__name__]
    return True if attribute is None else bool(getattr(router, attribute))


def replayed_weights(
    router: torch.nn.Module, logits: torch.Tensor, index: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """The router's top-k weights for experts `index` [N, k] from its logits [N, E]:
    softmax in float32, taken at `index`, renormalised over k where the router does, in
    `dtype` (the router's own output dtype)."""
    probs = torch.softmax(logits.float(), dim=-1)
    weights = probs.gather(-1, index)
    if _normalises(router):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(dtype)


class _Replay:
    """The model's replay hooks, installed once: each router takes its layer's routes from
    `routes` (None: the model routes by itself)."""

    def __init__(self, routers: list[torch.nn.Module]) -> None:
        self.routes: torch.Tensor | None = None
        self.layers = len(routers)
        for layer, router in enumerate(routers):
            router.register_forward_hook(self._hook(layer))

    def _hook(self, layer: int) -> Any:
        def replay(router: torch.nn.Module, args: Any, output: Any) -> Any:
            if self.routes is None:
                return None
            logits, weights, index = output
            target = self.routes[:, layer].to(device=index.device, dtype=torch.long)
            if target.shape != index.shape:
                raise ValueError(
                    f"routing replay: layer {layer} has routes {tuple(target.shape)} for "
                    f"{tuple(index.shape)} routed tokens"
                )
            known = (target >= 0).all(dim=-1, keepdim=True)
            chosen = torch.where(known, target, index)
            return logits, replayed_weights(router, logits, chosen, weights.dtype), chosen

        return replay


def _replay_hooks(model: torch.nn.Module, setting: str) -> _Replay:
    """The model's `_Replay` (installed on first use)."""
    hooks = model.__dict__.get("_rl_route_replay")
    if hooks is None:
        hooks = _Replay(require_routers(model, setting))
        model.__dict__["_rl_route_replay"] = hooks
    return hooks


class Recorder:
    """The routes of every forward pass run while recording: `calls[i]` is the i-th
    pass's int16 [tokens, moe_layers, top_k]."""

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self.calls: list[torch.Tensor] = []
        self._current: dict[int, torch.Tensor] = {}

    def hook(self, layer: int) -> Any:
        def record(router: torch.nn.Module, args: Any, output: Any) -> None:
            if layer in self._current:  # recomputed (activation checkpointing): seen
                return
            self._current[layer] = output[2].detach().to("cpu", torch.int16)
            if len(self._current) == self.layers:
                self.calls.append(torch.stack([self._current[i] for i in range(self.layers)], 1))
                self._current = {}

        return record


@contextmanager
def recording(model: torch.nn.Module, setting: str = "routing replay") -> Iterator[Recorder]:
    """Record the routes of the forward passes run inside (`Recorder.calls`); the model
    routes by itself (routes an earlier `replaying` left are dropped)."""
    routers = require_routers(model, setting)
    if "_rl_route_replay" in model.__dict__:
        model.__dict__["_rl_route_replay"].routes = None
    recorder = Recorder(len(routers))
    handles = [r.register_forward_hook(recorder.hook(i)) for i, r in enumerate(routers)]
    try:
        yield recorder
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def replaying(
    model: torch.nn.Module, routes: torch.Tensor, setting: str = "routing replay"
) -> Iterator[None]:
    """Route the tokens of the forward passes run inside by `routes` [tokens, moe_layers,
    top_k] (the model's token order; -1 rows: the model's own choice).

    The routes stay in place after the block, until the model's next `replaying` or
    `recording`, or `stop_replaying`: activation checkpointing runs the forward again
    during the backward pass, after the block, and must route as the forward did."""
    hooks = _replay_hooks(model, setting)
    if routes.dim() != 3 or routes.shape[1] != hooks.layers:
        raise ValueError(
            f"routing replay: routes {tuple(routes.shape)} for a model with {hooks.layers} "
            "MoE layers ([tokens, moe_layers, top_k])"
        )
    hooks.routes = routes
    yield


def stop_replaying(model: torch.nn.Module) -> None:
    """The model routes by itself again."""
    if "_rl_route_replay" in model.__dict__:
        model.__dict__["_rl_route_replay"].routes = None


class RoutingPass:
    """One forward pass's routing, in the padded batch layout [B, S, moe_layers, top_k]:
    replay `routes`, or (routes None) record them into `recorded`. `around` maps them to
    and from the token order the model runs in (padded rows, or packed real tokens)."""

    def __init__(self, routes: torch.Tensor | None = None) -> None:
        self.routes = routes
        self.recorded: torch.Tensor | None = None

    @contextmanager
    def around(
        self,
        model: torch.nn.Module,
        attention_mask: torch.Tensor,
        flat_to_packed: torch.Tensor | None = None,
    ) -> Iterator[None]:
        """The model runs the padded rows of `attention_mask` [B, S], flattened row-major,
        or, with `flat_to_packed` (int64 [B * S]: each padded position's place in the
        packed row, -1 for padding), packed. Recorded routes are -1 at padding."""
        if self.routes is not None:
            with replaying(model, to_model_order(self.routes, flat_to_packed)):
                yield
            return
        with recording(model) as recorder:
            yield
        (tokens,) = recorder.calls
        rows, width = attention_mask.shape
        padded = to_padded(tokens, rows, width, flat_to_packed)
        padded[~attention_mask.bool().cpu()] = NO_ROUTE
        self.recorded = padded


def to_model_order(routes: torch.Tensor, flat_to_packed: torch.Tensor | None) -> torch.Tensor:
    """[B, S, L, K] padded routes -> [tokens, L, K] in the model's token order."""
    flat = routes.reshape(-1, *routes.shape[2:])
    if flat_to_packed is None:
        return flat
    flat_to_packed = flat_to_packed.to(flat.device)
    real = flat_to_packed >= 0
    packed = flat.new_full((int(flat_to_packed.max()) + 1, *flat.shape[1:]), NO_ROUTE)
    packed[flat_to_packed[real]] = flat[real]  # a shared prompt's copies carry equal routes
    return packed


def to_padded(
    tokens: torch.Tensor, rows: int, width: int, flat_to_packed: torch.Tensor | None
) -> torch.Tensor:
    """[tokens, L, K] in the model's order -> [rows, width, L, K], -1 at padding."""
    if flat_to_packed is None:
        return tokens.reshape(rows, width, *tokens.shape[1:])
    index = flat_to_packed.cpu()
    padded = tokens[index.clamp(min=0)]
    padded[index < 0] = NO_ROUTE
    return padded.reshape(rows, width, *tokens.shape[1:])
