"""DAPO's overlong reward shaping (`reward.reward_manager: dapo`, `reward.overlong_buffer`)
held to verl's own DAPORewardManager (0.6.1 and 0.9.1, loaded from their files as the
oracle) on the same responses, and to the formula in float64."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

from rl.core.algorithms import overlong_penalty
from rl.core.config import Config
from rl.core.config.dapo import OverlongBufferConfig
from rl.core.errors import ConfigError
from rl.core.models import load_tokenizer
from rl.core.rewards.overlong import shape_scores


def test_penalty_is_the_float64_formula():
    lengths = torch.arange(0, 41)
    for max_len, buffer, factor in ((40, 8, 1.0), (40, 40, 0.5), (33, 1, 2.0), (40, 16, 0.0)):
        got = overlong_penalty(lengths, max_len, buffer, factor)
        for length, value in zip(lengths.tolist(), got.tolist(), strict=True):
            expected = min(-(length - (max_len - buffer)) / buffer * factor, 0.0)
            assert value == pytest.approx(expected, abs=1e-15), (length, max_len, buffer)
    # the boundary: no penalty up to max_len - buffer, -factor at max_len
    values = overlong_penalty(torch.tensor([32, 33, 40]), 40, 8, 1.0).tolist()
    assert values == [0.0, -0.125, -1.0]


# ---------------------------------------------------------------- verl's manager as oracle


class _Item(SimpleNamespace):
    pass


class _Data:
    """The slice of verl's DataProto its DAPORewardManager reads: `len`, `data[i].batch`,
    `data[i].non_tensor_batch`, `data.batch.keys()`."""

    def __init__(self, batch: dict[str, torch.Tensor], rows: list[dict]) -> None:
        self.batch, self.rows = batch, rows
        self.meta_info: dict = {}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> _Item:
        return _Item(batch={k: v[i] for k, v in self.batch.items()}, non_tensor_batch=self.rows[i])


def _verl_dapo_manager(root: Path, tag: str) -> type:
    """verl's `DAPORewardManager` class from its release's file; the package modules it
    imports (DataProto, the registry, the base class) are given as the bare names it
    uses, so `import verl` (and its heavy dependencies) is not needed."""
    stubs = {
        "verl": ModuleType("verl"),
        "verl.utils": ModuleType("verl.utils"),
        "verl.utils.reward_score": ModuleType("verl.utils.reward_score"),
        "verl.workers": ModuleType("verl.workers"),
        "verl.workers.reward_manager": ModuleType("verl.workers.reward_manager"),
        "verl.workers.reward_manager.abstract": ModuleType("verl.workers.reward_manager.abstract"),
    }
    stubs["verl"].DataProto = _Data  # type: ignore[attr-defined]
    stubs["verl.utils.reward_score"].default_compute_score = None  # type: ignore[attr-defined]
    stubs["verl.workers.reward_manager"].register = lambda name: lambda cls: cls  # type: ignore[attr-defined]

    class AbstractRewardManager:
        def _extract_reward_from_rm_scores(self, data, return_dict):
            return None

    stubs["verl.workers.reward_manager.abstract"].AbstractRewardManager = AbstractRewardManager  # type: ignore[attr-defined]
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        path = root / "verl" / "workers" / "reward_manager" / "dapo.py"
        spec = importlib.util.spec_from_file_location(f"verl_{tag}_dapo_manager", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, module_before in saved.items():
            if module_before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module_before
    return module.DAPORewardManager


def _score(data_source, solution_str, ground_truth, extra_info=None):
    """A score from the ground truth, and one from the text (so decoding matters)."""
    return float(ground_truth) + 0.01 * len(solution_str)


def _score_dict(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": _score(data_source, solution_str, ground_truth), "acc": float(ground_truth)}


@pytest.mark.parametrize("version", ["0.6.1", "0.9.1"])
@pytest.mark.parametrize("fn", [_score, _score_dict])
@pytest.mark.parametrize(
    ("buffer", "factor", "log"), [(8, 1.0, True), (20, 0.5, True), (3, 2.0, False)]
)
def test_shaping_matches_verls_dapo_manager(verl_release, version, fn, buffer, factor, log):
    tokenizer = load_tokenizer(Config().model)
    max_len, prompt_width = 24, 6
    lengths = [1, 5, 10, 15, 16, 17, 20, 23, 24, 24, 12, 2]
    generator = torch.Generator().manual_seed(3)
    text_ids = tokenizer("0123456789+-=")["input_ids"]
    pick = torch.tensor(text_ids)[
        torch.randint(len(text_ids), (len(lengths), max_len), generator=generator)
    ]
    pad = tokenizer.pad_token_id
    responses = torch.full((len(lengths), max_len), pad)
    response_mask = torch.zeros(len(lengths), max_len, dtype=torch.long)
    for row, length in enumerate(lengths):
        responses[row, :length] = pick[row, :length]
        response_mask[row, :length] = 1
    prompts = torch.full((len(lengths), prompt_width), pad)
    prompts[:, -3:] = torch.tensor(tokenizer("1+2")["input_ids"][:3])
    prompt_mask = torch.zeros(len(lengths), prompt_width, dtype=torch.long)
    prompt_mask[:, -3:] = 1
    truths = [str(i % 3) for i in range(len(lengths))]
    data = _Data(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": torch.cat([prompt_mask, response_mask], 1),
        },
        [
            {"reward_model": {"ground_truth": t}, "data_source": "x", "extra_info": {}}
            for t in truths
        ],
    )
    cfg = SimpleNamespace(enable=True, len=buffer, penalty_factor=factor, log=log)
    manager = _verl_dapo_manager(verl_release(version), version.replace(".", "_"))(
        tokenizer, 0, compute_score=fn, max_resp_len=max_len, overlong_buffer_cfg=cfg
    )
    out = manager(data, return_dict=True)
    verl_rewards = out["reward_tensor"].sum(1)
    verl_extra = out["reward_extra_info"]

    texts = [
        tokenizer.decode(responses[r, :n], skip_special_tokens=True) for r, n in enumerate(lengths)
    ]
    results = [fn("x", text, truth) for text, truth in zip(texts, truths, strict=True)]
    raw = [r["score"] if isinstance(r, dict) else r for r in results]
    extras = [{"acc": r["acc"]} if isinstance(r, dict) else {} for r in results]
    reward = replace(
        Config().reward,
        reward_manager="dapo",
        overlong_buffer=OverlongBufferConfig(
            enable=True, len=buffer, penalty_factor=factor, log=log
        ),
    )
    ours = shape_scores(raw, extras, lengths, reward, max_len)
    # verl adds in float32 (a tensor penalty): equal to float32 rounding
    assert torch.allclose(
        torch.tensor(ours.scores, dtype=torch.float32), verl_rewards, rtol=1e-6, atol=1e-6
    )
    # its reward lands on the last response token (ours: scores_to_token_level, same place)
    assert [
        int(out["reward_tensor"][r].nonzero().max()) if verl_rewards[r] != 0 else n - 1
        for r, n in enumerate(lengths)
    ] == [n - 1 for n in lengths]
    assert [row["acc"] for row in ours.rows] == pytest.approx([float(a) for a in verl_extra["acc"]])
    if log:
        assert [row["overlong_reward"] for row in ours.rows] == pytest.approx(
            [float(v) for v in verl_extra["overlong_reward"]], abs=1e-6
        )
        assert [bool(row["overlong"]) for row in ours.rows] == [
            bool(v) for v in verl_extra["overlong"]
        ]
        assert ours.metrics["reward/overlong"] == pytest.approx(
            sum(bool(v) for v in verl_extra["overlong"]) / len(lengths)
        )
        assert any(row["overlong"] for row in ours.rows) and not all(
            row["overlong"] for row in ours.rows
        )
    else:
        assert "overlong_reward" not in verl_extra and not ours.metrics
        assert all("overlong_reward" not in row for row in ours.rows)


def test_naive_manager_leaves_scores_and_disabled_buffer_too():
    reward = Config().reward
    shaped = shape_scores([1.0, 0.0], [{}, {}], [24, 24], reward, 24)
    assert shaped.scores == [1.0, 0.0] and "acc" not in shaped.rows[0]
    dapo = replace(reward, reward_manager="dapo")
    shaped = shape_scores([1.0, 0.0], [{}, {}], [24, 24], dapo, 24)
    assert shaped.scores == [1.0, 0.0] and shaped.rows[0]["acc"] == 1.0


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (
            {"reward": {"overlong_buffer": {"enable": True, "len": 2}}},
            "reward.overlong_buffer.enable",
        ),
        (
            {"reward": {"reward_manager": "dapo", "overlong_buffer": {"enable": True, "len": 0}}},
            "reward.overlong_buffer.len",
        ),
        (
            {
                "data": {"max_response_length": 8},
                "reward": {"reward_manager": "dapo", "overlong_buffer": {"enable": True, "len": 9}},
            },
            "reward.overlong_buffer.len",
        ),
    ],
)
def test_bad_overlong_settings_are_refused_by_name(overrides, key):
    from rl.core.config.convert import from_dict

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        from_dict(Config, overrides)
