"""metrics.jsonl on resume: rows past the checkpoint and a torn last row are dropped."""

import json
import logging

from rl.core.logging.sinks import trim_metrics_file


def test_a_torn_last_row_is_dropped_with_a_warning(tmp_path, caplog):
    rows = [json.dumps({"step": s, "loss": 0.5}) for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + '\n{"step": 4, "lo')
    with caplog.at_level(logging.WARNING):
        trim_metrics_file(tmp_path, last_step=2)
    kept = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in kept] == [1, 2]
    assert "line 4: dropped a torn" in caplog.text
