"""Config fuzzing: random keys (the schema's own, misspelled ones, nonsense) with random values
(0, negatives, huge ints, nan/inf, strings with YAML and interpolation syntax, bools, lists,
None, nested mappings), as command-line overrides and as YAML files.

Every outcome is a valid `Config` or a `ConfigError` in one line that names a key given;
never another exception. Accepted configs then go through `preflight` (which loads no
model and reads no file), which may only refuse with a one-line `UserError`.
Deterministic (derandomize) so CI is stable.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rl.core.config import Config, ConfigError, load_config, to_dict
from rl.core.errors import UserError
from rl.core.trainer.preflight import preflight

FUZZ = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def dotted_keys(tree: Any, prefix: str = "") -> list[str]:
    """Every section and leaf key of the schema: actor, actor.optim, actor.optim.lr, ..."""
    keys = []
    for name, value in tree.items():
        key = f"{prefix}{name}"
        keys.append(key)
        if isinstance(value, dict):
            keys += dotted_keys(value, f"{key}.")
    return keys


SCHEMA_KEYS = dotted_keys(to_dict(Config()))


def misspelled(draw: Any, key: str) -> str:
    """`key` with one character dropped, doubled, swapped or replaced."""
    i = draw(st.integers(0, len(key) - 1))
    kind = draw(st.sampled_from(["drop", "double", "swap", "replace"]))
    if kind == "drop":
        return key[:i] + key[i + 1 :]
    if kind == "double":
        return key[:i] + key[i] + key[i:]
    if kind == "swap" and i + 1 < len(key):
        return key[:i] + key[i + 1] + key[i] + key[i + 2 :]
    return key[:i] + draw(st.sampled_from("aeioux_.")) + key[i + 1 :]


identifiers = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1, 2, 3, 7, 8, 16, -(2**40), 2**70]),
    st.integers(-(10**6), 10**6),
    st.sampled_from([0.0, -0.0, -1.0, 0.5, 1.0, 1.5, 1e-9, 1e308, math.inf, -math.inf, math.nan]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "",
            "abc",
            "builtin:tiny-qwen2",
            "builtin:arithmetic",
            "~nobody_here/x",
            "${trainer.seed}",
            "${nope.key}",
            "${subtract:1}",
            "[1, 2",
            "{a: 1}",
            "a=b",
            "null",
            "nan",
            ".inf",
            "1e-5",
            "cuda",
            "path",
            "token-sum",
            "\x00",
            "tab\there",
        ]
    ),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(identifiers, inner, max_size=3)
    ),
    max_leaves=6,
)


def leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf key of the schema with its default."""
    found = {}
    for name, value in tree.items():
        if isinstance(value, dict):
            found |= leaves(value, f"{prefix}{name}.")
        else:
            found[f"{prefix}{name}"] = value
    return found


DEFAULTS = leaves(to_dict(Config()))
PATHS = st.sampled_from(
    [
        "builtin:tiny-qwen2",
        "builtin:arithmetic",
        "builtin:other",
        "/",
        "/nope/x.parquet",
        "~",
        "~/x.jsonl",
        "~nobody_here/x",
        "Qwen/Qwen2.5-0.5B",
        "a\x00b",
        "x.py",
        ".",
        "..",
    ]
)
TYPED = {
    str: st.one_of(PATHS, st.text(max_size=8)),
    int: st.one_of(st.sampled_from([-2, -1, 0, 1, 2, 3, 8, 16]), st.integers(-100, 2**40)),
    float: st.one_of(
        st.sampled_from([-1.0, 0.0, 0.1, 0.2, 0.28, 0.5, 1.0, 1.5, 3.0]),
        st.floats(-10, 10, allow_nan=False),
    ),
    bool: st.booleans(),
}


# Keys preflight looks at, drawn as often as all the others together.
MACHINE_KEYS = [
    "model.path",
    "data.train_files",
    "data.val_files",
    "reward.custom_reward_function.path",
    "reward.reward_model.path",
    "trainer.output_dir",
    "trainer.resume_from_path",
    "trainer.resume_mode",
    "trainer.device",
    "trainer.logger",
    "actor.strategy",
    "critic.strategy",
    "rollout.name",
    "algorithm.adv_estimator",
]


@st.composite
def typed_pairs(draw: Any) -> tuple[str, Any]:
    """A schema key with a value of its default's type (None for optional ones)."""
    key = draw(st.sampled_from(sorted(DEFAULTS)) | st.sampled_from(MACHINE_KEYS))
    default = DEFAULTS[key]
    if isinstance(default, list):
        return key, draw(st.lists(TYPED[str], min_size=0, max_size=2))
    if default is None:
        return key, draw(st.one_of(TYPED[str], TYPED[float], TYPED[int]))
    return key, draw(st.one_of(TYPED[type(default)], st.none()))


@st.composite
def keys(draw: Any) -> str:
    """Mostly the schema's keys; else misspelled, an unknown child, or any text."""
    key = draw(st.sampled_from(SCHEMA_KEYS))
    kind = draw(st.sampled_from(["schema", "schema", "schema", "misspelled", "child", "nonsense"]))
    if kind == "misspelled":
        return misspelled(draw, key)
    if kind == "child":
        return f"{key}.{draw(identifiers)}"
    if kind == "nonsense":
        return draw(st.text(min_size=1, max_size=10))
    return key


def render(value: Any) -> str:
    """`value` as the command line writes it (OmegaConf's override grammar)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, list):
        return "[" + ",".join(render(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{render(v)}" for k, v in value.items()) + "}"
    return str(value)


def nest(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Dotted keys -> a nested mapping (a later key replaces an earlier conflicting one)."""
    tree: dict[str, Any] = {}
    for key, value in pairs:
        node = tree
        *parents, leaf = key.split(".")
        for name in parents:
            if not isinstance(node.get(name), dict):
                node[name] = {}
            node = node[name]
        node[leaf] = value
    return tree


def key_prefixes(key: str) -> list[str]:
    """`a`, `a.b`, `a.b.c` for `a.b.c`, each also as repr() writes it inside quotes."""
    parts = key.split(".")
    prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
    # an empty first part (".0" nests under the key '') is named as '' in the message
    return [form for p in prefixes for form in ((p, repr(p)[1:-1]) if p else ("''",))]


def assert_valid_or_one_line_config_error(load: Any, given_keys: list[str]) -> Config | None:
    """The loaded config, or None after checking the ConfigError names one of `given_keys`."""
    try:
        config = load()
    except ConfigError as error:
        message = str(error)
        assert message and "\n" not in message, repr(message)
        mentioned = [p for key in given_keys for p in key_prefixes(key) if p in message]
        assert mentioned, (message, given_keys)
        event("refused by the schema")
        return None
    assert isinstance(config, Config)
    event("accepted by the schema")
    return config


def assert_preflight_passes_or_refuses_in_one_line(config: Config) -> None:
    try:
        preflight(config)
    except UserError as error:
        assert str(error) and "\n" not in str(error), repr(str(error))
        event(f"refused by preflight: {str(error).partition(' ')[0]}")
    else:
        event("accepted by preflight")


@FUZZ
@given(st.lists(st.tuples(keys(), values), min_size=1, max_size=4))
def test_overrides(pairs):
    overrides = [f"{key}={render(value)}" for key, value in pairs]
    config = assert_valid_or_one_line_config_error(
        lambda: load_config(overrides=overrides),
        [override.partition("=")[0] for override in overrides],  # a key may hold '='
    )
    if config is not None:
        assert_preflight_passes_or_refuses_in_one_line(config)


@FUZZ
@given(pairs=st.lists(typed_pairs(), min_size=1, max_size=3), as_file=st.booleans())
def test_values_of_the_right_type(tmp_path_factory, pairs, as_file):
    """Mostly valid configs, so that preflight sees odd paths, devices and names."""
    if as_file:  # YAML carries what the override grammar cannot (a NUL, a quote)
        path = tmp_path_factory.mktemp("fuzz") / "config.yaml"
        path.write_text(yaml.safe_dump(nest(pairs), allow_unicode=True))
        load = lambda: load_config(path)  # noqa: E731
    else:
        overrides = [f"{key}={render(value)}" for key, value in pairs]
        load = lambda: load_config(overrides=overrides)  # noqa: E731
    config = assert_valid_or_one_line_config_error(load, [key for key, _ in pairs])
    if config is not None:
        assert_preflight_passes_or_refuses_in_one_line(config)


@FUZZ
@given(pairs=st.lists(st.tuples(keys(), values), min_size=1, max_size=4))
def test_yaml_files(tmp_path_factory, pairs):
    path = tmp_path_factory.mktemp("fuzz") / "config.yaml"
    path.write_text(yaml.safe_dump(nest(pairs), allow_unicode=True))
    config = assert_valid_or_one_line_config_error(
        lambda: load_config(path), [key for key, _ in pairs]
    )
    if config is not None:
        assert_preflight_passes_or_refuses_in_one_line(config)


@FUZZ
@given(document=values)
def test_any_yaml_document(tmp_path_factory, document):
    """A file whose top level is anything at all (a list, a number, a string...)."""
    path = tmp_path_factory.mktemp("fuzz") / "config.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    try:
        load_config(path)
    except ConfigError as error:
        assert "\n" not in str(error), repr(str(error))


@FUZZ
@given(st.lists(st.text(max_size=20), min_size=1, max_size=3))
def test_raw_override_strings(overrides):
    try:
        load_config(overrides=overrides)
    except ConfigError as error:
        assert "\n" not in str(error), repr(str(error))
