"""Data fuzzer: random rows and raw bytes as jsonl / json / csv / parquet files. Reading and
tokenizing them either works or fails with a one-line `UserError` naming the file — never
another exception (which the CLI would show as a bug)."""

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rl.core.data import PromptDataset, read_rows
from rl.core.errors import UserError
from rl.core.models import build_char_tokenizer

TOKENIZER = build_char_tokenizer()
KEYS = ["prompt", "answer", "data_source", "messages", "question", "extra_info"]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=6,
)
rows = st.lists(
    st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), values, max_size=5),
    min_size=0,
    max_size=4,
)
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def load(path, **options):
    dataset = PromptDataset(read_rows([str(path)]), TOKENIZER, max_prompt_length=16, **options)
    for item in dataset.items:
        assert isinstance(item.prompt_ids, list) and len(item.prompt_ids) <= 16
        assert isinstance(item.data_source, str)
    return dataset


def assert_loads_or_says_why(path, **options):
    try:
        load(path, **options)
    except UserError as error:
        message = str(error)
        assert "\n" not in message, message
        assert str(path) in message or "dataset is empty" in message, message


@pytest.mark.parametrize("truncation", ["right", "error"])
@FUZZ
@given(data=rows)
def test_fuzzed_jsonl_and_json_rows(tmp_path, data, truncation):
    text = "\n".join(json.dumps(row, allow_nan=True) for row in data)
    (tmp_path / "d.jsonl").write_text(text)
    (tmp_path / "d.json").write_text(json.dumps(data, allow_nan=True))
    for name in ("d.jsonl", "d.json"):
        assert_loads_or_says_why(tmp_path / name, truncation=truncation)


@FUZZ
@given(data=rows)
def test_fuzzed_parquet_rows(tmp_path, data):
    try:
        pq.write_table(pa.Table.from_pylist(data), tmp_path / "d.parquet")
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return  # not representable in parquet: nothing to read
    assert_loads_or_says_why(tmp_path / "d.parquet", truncation="right")


@FUZZ
@given(raw=st.binary(max_size=64), suffix=st.sampled_from([".jsonl", ".json", ".csv", ".parquet"]))
def test_fuzzed_raw_bytes(tmp_path, raw, suffix):
    path = tmp_path / f"d{suffix}"
    path.write_bytes(raw)
    assert_loads_or_says_why(path, truncation="right")


def test_nan_prompt_is_refused_naming_the_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": math.nan, "answer": "1"}) + "\n")
    with pytest.raises(UserError, match=r"row 0: the prompt must be a string"):
        load(path)
