"""Turn a plain nested dict into typed, frozen dataclasses, with errors that help.

An unknown key names the closest valid key; a value of the wrong type names
the key, the value and the type expected. A section's own checks name its fields
relative to it (`FieldError`); `from_dict` puts the section path in front.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from rl.core.config import sections as sections_module
from rl.core.config.errors import ConfigError, FieldError

T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any] | None, prefix: str = "") -> T:
    """Build dataclass `cls` from `data` (missing keys take the defaults)."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {data!r}")
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    sections = None
    if sections_module.FIELD in names:  # the backends' own sections, routed by their keys
        data, sections = sections_module.read_sections(data, prefix)
        names = [n for n in names if n != sections_module.FIELD]
        names += list(sections_module.section_classes())
    for key in data:
        if key not in names:
            raise ConfigError(_unknown_key_message(prefix, str(key), names))
    values = {key: _convert(hints[key], value, prefix + key) for key, value in data.items()}
    if sections is not None:
        values[sections_module.FIELD] = sections
    try:
        return cls(**values)
    except FieldError as error:
        raise error.within(prefix.rstrip(".")) from None
    except ConfigError:
        raise
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: {error}") from error


def _unknown_key_message(prefix: str, key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f" Did you mean '{prefix}{close[0]}'?" if close else ""
    valid = ", ".join(sorted(names))
    return f"unknown config key {prefix + key!r}.{hint} Valid keys here: {valid}"


def _convert(annotation: Any, value: Any, path: str) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, path)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(
            errors[0] if len(errors) == 1 else f"{path} = {value!r}: expected {_name(annotation)}"
        )
    if origin is Literal:
        allowed = get_args(annotation)
        if value not in allowed:
            raise ConfigError(f"{path} = {value!r} is not allowed; choose one of {list(allowed)}")
        return value
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, path + ".")  # type: ignore[arg-type]
    if origin in (tuple, list):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{path} = {value!r}: expected a list")
        (item_type, *_) = get_args(annotation) or (Any,)
        return tuple(_convert(item_type, item, f"{path}[{i}]") for i, item in enumerate(items))
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path} = {value!r}: expected a mapping")
        _, item_type = get_args(annotation) or (str, Any)
        if not dataclasses.is_dataclass(item_type):
            return dict(value)
        # sections by name (reward.domains.<d>): each typed and checked
        return {str(key): _convert(item_type, item, f"{path}.{key}") for key, item in value.items()}
    return _convert_scalar(annotation, value, path)


def _convert_scalar(annotation: Any, value: Any, path: str) -> Any:
    if annotation is Any:
        return value
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path} = {value!r}: expected true or false")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{path} = {value!r}: expected an integer")
    if annotation is float:
        number = _number(value)
        if number is None:
            raise ConfigError(f"{path} = {value!r}: expected a number")
        if not math.isfinite(number):  # inf passes `> 0` checks, and nan poisons every update
            raise ConfigError(f"{path} = {value!r}: expected a finite number")
        return number
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path} = {value!r}: expected a string")
        if "\x00" in value:  # no name, path or id holds one; the OS refuses such paths
            raise ConfigError(f"{path} = {value!r}: expected a string without NUL characters")
        return value
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer beyond float range
            return math.inf
    if isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads 1e-5 as a string
        except ValueError:
            return None
    return None


def _name(annotation: Any) -> str:
    return str(getattr(annotation, "__name__", annotation)).replace("typing.", "")


def to_dict(instance: Any) -> Any:
    """Plain nested dict/list of a config dataclass (for YAML and logging)."""
    if dataclasses.is_dataclass(instance) and not isinstance(instance, type):
        plain = {f.name: to_dict(getattr(instance, f.name)) for f in dataclasses.fields(instance)}
        plain.update(plain.pop(sections_module.FIELD, None) or {})  # under their own keys
        return plain
    if isinstance(instance, (list, tuple)):
        return [to_dict(item) for item in instance]
    if isinstance(instance, dict):
        return {key: to_dict(value) for key, value in instance.items()}
    return instance
