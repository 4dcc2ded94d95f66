"""`python -m rl.bench weight-sync`: every carrier moves the trainer's weights into an HF
rollout engine (checked by a checksum on both sides) and is timed against a plain copy."""

import torch

from rl.bench import weight_sync


def test_every_carrier_delivers_and_is_timed_against_the_floor(model_folder, tmp_path, capsys):
    folder = model_folder("qwen2.5-0.5b", num_layers=2, hidden_size=128, intermediate_size=256)
    # this worker's thread count kept (vLLM engines built later in it check theirs)
    threads = str(torch.get_num_threads())
    argv = ["--model", str(folder), "--repeats", "2", "--threads", threads, "--out", str(tmp_path)]
    weight_sync.main(argv)
    report = capsys.readouterr().out
    rows = [
        line.split(" | ")
        for line in report.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    carriers = [row[0].removeprefix("| ") for row in rows[1:]]
    assert carriers[0].startswith("a plain copy_") and len(carriers) == 5
    assert any(c.startswith("across processes") for c in carriers)
    assert all(float(row[1]) > 0 for row in rows[1:])
    assert rows[1][3].strip(" |") == "1.00"  # the floor against itself
