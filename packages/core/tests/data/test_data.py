"""Reading real files, tokenizing prompts, truncation, filtering, and the resumable sampler."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl.core.data import PromptDataset, PromptSampler, SourcedRow, read_rows
from rl.core.errors import ConfigError, DataError
from rl.core.models import build_char_tokenizer

ROWS = [
    {"prompt": "1+2=", "answer": "3", "data_source": "arithmetic"},
    {"prompt": "7-5=", "answer": "2", "data_source": "arithmetic"},
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer()


def write_all_formats(folder):
    pq.write_table(pa.Table.from_pylist(ROWS), folder / "d.parquet")
    (folder / "d.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (folder / "d.json").write_text(json.dumps(ROWS))
    (folder / "d.csv").write_text(
        "prompt,answer,data_source\n1+2=,3,arithmetic\n7-5=,2,arithmetic\n"
    )
    return [folder / f"d.{ext}" for ext in ("parquet", "jsonl", "json", "csv")]


def test_every_format_reads_the_same_rows_with_provenance(tmp_path):
    files = write_all_formats(tmp_path)
    for file in files:
        rows = read_rows(str(file))
        assert [r.data for r in rows] == ROWS, file.suffix
        assert [(r.source, r.index) for r in rows] == [(str(file), 0), (str(file), 1)]
    assert len(read_rows([str(f) for f in files])) == 8


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"data file .*nope.parquet does not exist"):
        read_rows(str(tmp_path / "nope.parquet"))
    (tmp_path / "d.xlsx").write_text("x")
    with pytest.raises(DataError, match=r"unsupported data format '.xlsx'; use one of .parquet"):
        read_rows(str(tmp_path / "d.xlsx"))
    (tmp_path / "bad.jsonl").write_text('{"prompt": "1"}\n{oops\n')
    with pytest.raises(DataError, match=r"bad.jsonl, line 2: not valid JSON"):
        read_rows(str(tmp_path / "bad.jsonl"))
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    with pytest.raises(DataError, match=r"list.jsonl, line 1: expected a JSON object"):
        read_rows(str(tmp_path / "list.jsonl"))
    (tmp_path / "scalar.json").write_text("3")
    with pytest.raises(DataError, match=r"scalar.json: expected a JSON list of objects, got int"):
        read_rows(str(tmp_path / "scalar.json"))
    (tmp_path / "mixed.json").write_text('[{"prompt": "1"}, 2]')
    with pytest.raises(DataError, match=r"mixed.json, item 1: expected a JSON object, got int"):
        read_rows(str(tmp_path / "mixed.json"))
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match=r"broken.parquet: not a readable parquet file"):
        read_rows(str(tmp_path / "broken.parquet"))
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin1.jsonl: not UTF-8 text"):
        read_rows(str(tmp_path / "latin1.jsonl"))


def test_prompt_string_messages_and_chat_templates(tokenizer):
    rows = [
        SourcedRow("f", 0, {"prompt": "1+2=", "answer": "3"}),
        SourcedRow(
            "f",
            1,
            {
                "messages": [{"role": "user", "content": "4+4="}],
                "reward_model": {"ground_truth": "8"},
            },
        ),
    ]
    expected = tokenizer.apply_chat_template(
        [{"role": "user", "content": "4+4="}], add_generation_prompt=True, tokenize=False
    )
    # auto (the default): text as it is, messages through the chat template as verl does;
    # a row in verl's layout has its ground truth read from reward_model.ground_truth
    auto = PromptDataset(rows, tokenizer, answer_key="answer")
    assert auto[0].prompt_text == "1+2=" and auto[0].prompt_ids == tokenizer("1+2=").input_ids
    assert auto[1].prompt_text == expected and auto[1].ground_truth == "8"
    assert auto[1].prompt_ids == tokenizer(expected, add_special_tokens=False).input_ids
    native = PromptDataset(
        rows, tokenizer, chat_template="native", answer_key="reward_model.ground_truth"
    )
    assert native[1].prompt_text == expected and native[1].ground_truth == "8"
    assert native[0].ground_truth is None  # an explicit answer_key is read as it says
    joined = PromptDataset(rows, tokenizer, chat_template="none")
    assert joined[1].prompt_text == "4+4="


def test_missing_prompt_column_names_file_row_and_columns(tokenizer):
    rows = [
        SourcedRow("train.parquet", 0, {"prompt": "1="}),
        SourcedRow("train.parquet", 1, {"question": "2="}),
    ]
    with pytest.raises(
        DataError,
        match=r"train.parquet, row 1: no prompt column 'prompt' .*columns are \['question'\]",
    ):
        PromptDataset(rows, tokenizer)
    with pytest.raises(DataError, match=r"f, row 0: the prompt must be a string or a list"):
        PromptDataset([SourcedRow("f", 0, {"prompt": 3})], tokenizer)


def test_truncation_modes(tokenizer):
    rows = [SourcedRow("f.jsonl", 3, {"prompt": "12345678+1="})]
    with pytest.raises(
        DataError,
        match=r"f.jsonl, row 3: the prompt has 11 tokens, more than data.max_prompt_length = 4",
    ):
        PromptDataset(rows, tokenizer, max_prompt_length=4)
    ids = tokenizer("12345678+1=").input_ids
    assert (
        PromptDataset(rows, tokenizer, max_prompt_length=4, truncation="left")[0].prompt_ids
        == ids[-4:]
    )
    assert (
        PromptDataset(rows, tokenizer, max_prompt_length=4, truncation="right")[0].prompt_ids
        == ids[:4]
    )


def test_filter_overlong_prompts_with_worker_processes(tokenizer):
    rows = [SourcedRow("f", i, {"prompt": "1" * (i % 7) + "="}) for i in range(40)]
    serial = PromptDataset(rows, tokenizer, max_prompt_length=4, filter_overlong_prompts=True)
    pooled = PromptDataset(
        rows, tokenizer, max_prompt_length=4, filter_overlong_prompts=True, filter_num_workers=2
    )
    assert [it.prompt_text for it in serial] == [it.prompt_text for it in pooled]
    assert all(len(it.prompt_ids) <= 4 for it in serial)
    assert serial.num_filtered == sum(1 for i in range(40) if i % 7 + 1 > 4)


def test_sampler_resumes_exactly():
    straight = PromptSampler(23, 5, shuffle=True, seed=3)
    expected = [straight.next_batch() for _ in range(12)]  # crosses epochs (4 per epoch)
    first = PromptSampler(23, 5, shuffle=True, seed=3)
    seen = [first.next_batch() for _ in range(6)]
    resumed = PromptSampler(23, 5, shuffle=True, seed=3)
    resumed.load_state_dict(first.state_dict())
    seen += [resumed.next_batch() for _ in range(6)]
    assert seen == expected
    epoch0 = [i for batch in expected[:4] for i in batch]
    assert len(set(epoch0)) == 20 and expected[:4] != expected[4:8]
    with pytest.raises(ConfigError, match="resume with the same data"):
        PromptSampler(24, 5).load_state_dict(first.state_dict())
    with pytest.raises(ConfigError, match=r"3 prompts, fewer than data.train_batch_size = 5"):
        PromptSampler(3, 5)


def test_an_empty_file_or_dataset_says_so(tmp_path, tokenizer):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match=r"empty.jsonl: no rows; check data.train_files"):
        read_rows(str(tmp_path / "empty.jsonl"))
    with pytest.raises(DataError, match=r"the dataset is empty: no rows"):
        PromptDataset([], tokenizer)
    rows = [SourcedRow("f", i, {"prompt": "123="}) for i in range(3)]
    with pytest.raises(
        DataError,
        match=r"the dataset is empty: all 3 prompts are longer than data.max_prompt_length = 2 "
        r"and data.filter_overlong_prompts dropped them",
    ):
        PromptDataset(rows, tokenizer, max_prompt_length=2, filter_overlong_prompts=True)


def test_a_native_chat_template_needs_a_tokenizer_with_one():
    plain = build_char_tokenizer()
    plain.chat_template = None
    with pytest.raises(
        ConfigError,
        match=r"data.chat_template = 'native', but the tokenizer has no chat template; set "
        r"data.chat_template: none",
    ):
        PromptDataset([SourcedRow("f", 0, {"prompt": "1="})], plain, chat_template="native")
