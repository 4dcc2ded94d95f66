"""Build a run's context from config: tokenizer, datasets, sampler, reward, engines."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.demo import builtin_rows, is_builtin
from rl.core.models import load_tokenizer
from rl.core.registry import load_engine_class
from rl.core.trainer.context import RunContext, total_training_steps
from rl.core.trainer.sft import sft_optim


def load_rows(files: tuple[str, ...], size: int, seed: int, max_operand: int = 9) -> list[Any]:
    """Rows of the data files; a built-in data set (`builtin:arithmetic`,
    `builtin:calculator`) generates its task in code."""
    from rl.core.data import SourcedRow, read_rows

    if is_builtin(files):
        return [
            SourcedRow(files[0], i, row)
            for i, row in enumerate(builtin_rows(files[0], size, seed, max_operand))
        ]
    return read_rows([os.path.expanduser(f) for f in files])


def build_dataset(
    config: Config, files: tuple[str, ...], size: int, seed: int, tokenizer: Any
) -> Any:
    from rl.core.data import PromptDataset

    data = config.data
    rows = load_rows(files, size, seed, data.builtin_max_operand)
    if data.messages_key is not None:  # whole conversations: prompt + demonstration
        from rl.core.data.conversation import split_conversation

        rows = [split_conversation(row, data.messages_key, data.prompt_key) for row in rows]
    return PromptDataset(
        rows,
        tokenizer,
        prompt_key=data.prompt_key,
        answer_key=data.answer_key,
        data_source_key=data.data_source_key,
        chat_template=data.chat_template,
        max_prompt_length=data.max_prompt_length,
        truncation=data.truncation,
        filter_overlong_prompts=data.filter_overlong_prompts,
        filter_num_workers=data.filter_num_workers,
        tools=tool_schemas(config),
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
        image_key=data.image_key,
        vision=vision_processor(config, tokenizer) if _shows_images(rows, data) else None,
    )


def _shows_images(rows: list[Any], data: Any) -> bool:
    """Whether any row has images or an `<image>` placeholder: then the model folder says
    whether it reads them (rows of a text run never need it to be read here)."""
    return any(
        row.data.get(data.image_key) is not None or "<image>" in str(row.data.get(data.prompt_key))
        for row in rows
    )


def vision_processor(config: Config, tokenizer: Any) -> Any:
    """The image processing of a vision-language `model.path` (None for a text model)."""
    from rl.core.models import load_model_config, model_source
    from rl.core.models.vision_models import is_vision_language

    if not is_vision_language(load_model_config(config.model, tokenizer)):
        return None
    from rl.core.vision.processing import VisionProcessor

    data = config.data
    return VisionProcessor.from_folder(
        str(model_source(config.model)), tokenizer, data.image_min_pixels, data.image_max_pixels
    )


def tool_schemas(config: Config) -> list[dict[str, Any]]:
    """The agent's tools as the chat template describes them (none unless multi-turn)."""
    if not config.rollout.multi_turn.enable:
        return []
    from rl.core.agent.tools import schema
    from rl.core.trainer.agentic import build_tools

    return [schema(tool) for tool in build_tools(config)]


def build_reward(config: Config, tokenizer: Any) -> Any:
    """Rule-based / custom-function scoring, a reward model when `reward.reward_model.path`
    (served, prompted by the custom function, with `reward.reward_model.rollout.name`), or
    one scorer per domain (`reward.domains`; a judge domain's model served here)."""
    from rl.core.rewards import make_reward_manager

    model_config = config.reward.reward_model
    if config.reward.domains:
        from rl.core.rewards.domains import DomainRewards
        from rl.core.workers.judge_server import start_judges

        return DomainRewards(config, start_judges(config, tokenizer))
    if config.reward.generative_reward_model:
        from rl.core.workers.reward_model_server import build_generative_reward

        return build_generative_reward(config)
    if model_config.path is None:
        return make_reward_manager(config.reward)
    from rl.core.workers.reward_model_server import build_discriminative_reward

    return build_discriminative_reward(config)


def domain_sampler(config: Config, train: Any, batch: int) -> Any:
    """`data.domain_interleave_probs`' sampler over the training prompts' domains."""
    from rl.core.data.domain_sampler import DomainSampler
    from rl.core.rewards.domains import DomainRouting

    unknown = sorted(set(config.data.domain_interleave_probs) - set(config.reward.domains))
    if unknown:
        raise ConfigError(
            f"data.domain_interleave_probs names {unknown}, not domains of reward.domains "
            f"({sorted(config.reward.domains)})"
        )
    routing = DomainRouting(config)
    return DomainSampler(
        [routing.domain_of(item) for item in train.items],
        config.data.domain_interleave_probs,
        batch,
        shuffle=config.data.shuffle,
        seed=config.data.seed,
    )


def build_context(
    config: Config, output_dir: Path, with_rl_roles: bool = True, trains: bool = True
) -> RunContext:
    """The run's data, tokenizer, sampler and reward, and with `with_rl_roles` its engines.
    Not `trains` (a generation job): no reward checks, and no RL batch drawn from the data."""
    from rl.core.data import PromptSampler
    from rl.core.rewards import check_reward_inputs

    data = config.data
    tokenizer = load_tokenizer(config.model)
    # Different seeds: the validation prompts are not the training prompts.
    train = build_dataset(config, data.train_files, data.builtin_train_size, data.seed, tokenizer)
    val = build_dataset(
        config, data.val_files, data.builtin_val_size, data.seed + 10_000, tokenizer
    )
    # Before the reward and the engines are built: data the reward cannot score fails now
    # (SFT data needs no reward: prompt and answer columns are enough).
    if with_rl_roles and trains:
        check_reward_inputs(config, train, val)
    batch = data.gen_batch_size or data.train_batch_size  # prompts per generation (verl's too)
    if not (with_rl_roles and trains):  # SFT draws sft.batch_size rows; generation all
        batch = min(batch, len(train))
    sampler: Any = PromptSampler(len(train), batch, shuffle=data.shuffle, seed=data.seed)
    if data.domain_interleave_probs and with_rl_roles and trains:
        sampler = domain_sampler(config, train, batch)
    total = total_training_steps(config, sampler.steps_per_epoch)
    ctx = RunContext(
        config, output_dir, tokenizer, train, val, sampler, build_reward(config, tokenizer)
    )
    if with_rl_roles:  # the engines, on the workers of trainer.launcher
        from rl.core.workers import launch_roles

        ctx.roles = launch_roles(config, total)
    return ctx


def build_sft_engine(config: Config, tokenizer: Any, total_steps: int | None = None) -> Any:
    """An actor-shaped engine with the SFT optimizer (`sft.*`: its LR, AdamW settings and
    schedule over `total_steps`, default sft.steps)."""
    section = replace(
        config.actor,
        optim=sft_optim(config),
        ppo_mini_batch_size=config.sft.batch_size,
        ppo_epochs=1,
        shuffle=False,
    )
    from rl.core.workers.build import role_spec

    steps = max(config.sft.steps if total_steps is None else total_steps, 1)
    spec = role_spec(
        config, "actor", steps, settings=section, responses_per_prompt=1, temperature=1.0
    )
    engine_class = load_engine_class(config.actor.strategy, "train")
    return engine_class.from_spec(spec, tokenizer)
