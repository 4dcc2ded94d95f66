"""The benchmark harness every package's benchmarks share."""

import csv
import json

import torch

from rl.kernels.bench import harness


def test_quantiles_and_time_fn():
    assert harness.quantiles([2.0]) == {"median": 2.0, "p20": 2.0, "p80": 2.0}
    cuts = harness.quantiles([1.0, 2.0, 3.0, 4.0, 5.0])
    assert cuts["median"] == 3.0 and cuts["p20"] < cuts["median"] < cuts["p80"]
    calls = []
    timing = harness.time_fn(lambda: calls.append(1), torch.device("cpu"), repeats=4, warmup=2)
    assert list(timing) == ["median_ms", "p20_ms", "p80_ms"] and len(calls) == 6
    assert harness.elapsed(lambda: None) >= 0.0


def test_alternating_reverses_every_other_round():
    assert harness.alternating(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert harness.alternating({"a": 1, "b": 2}, 1) == ["b", "a"]


def test_header_names_device_versions_and_date():
    head = harness.header("cpu", ["torch", "no-such-distribution-q"])
    assert {"date", "device", "python", "torch", "cuda"} <= set(head)
    assert "no-such-distribution-q" not in head and head["torch"] == torch.__version__
    # the kernel CSV columns stay as the committed files have them
    tags = harness.environment_tags(torch.device("cpu"))
    assert list(tags) == ["date", "device", "torch", "cuda", "triton", "rl_kernels"]


def test_csv_and_jsonl_output(tmp_path):
    path = tmp_path / "out" / "rows.csv"
    harness.append_csv(path, [{"a": 1, "b": 2.5}])
    harness.append_csv(path, [{"a": 3, "b": 4.0}])
    with path.open() as handle:
        assert list(csv.DictReader(handle)) == [{"a": "1", "b": "2.5"}, {"a": "3", "b": "4.0"}]
    jsonl = tmp_path / "rows.jsonl"
    harness.write_jsonl(jsonl, [{"x": 1}])
    harness.append_jsonl(jsonl, iter([{"x": 2}]))
    assert [json.loads(line) for line in jsonl.read_text().splitlines()] == [{"x": 1}, {"x": 2}]
    harness.write_jsonl(jsonl, [{"x": 3}])
    assert jsonl.read_text() == '{"x": 3}\n'


def test_report_prints_the_table_and_appends_every_column(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    harness.report([{"a": 1, "b": 2.5}], ["b"], path)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["b    ", "2.500", f"appended 1 rows to {path}"]
    with path.open() as handle:
        assert list(csv.DictReader(handle)) == [{"a": "1", "b": "2.5"}]
