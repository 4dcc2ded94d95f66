"""One rank of the 2-process broadcast test: `python _broadcast_worker.py RANK PORT OUT_DIR`.

Rank 0 owns the trainer's tiny model and sends twice (delta mode) through
`BroadcastSender`; rank 1 receives into a differently seeded tiny model.
Both save what they hold for the test to compare.
"""

import sys
from itertools import chain
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
from _receiver import BufferingEngine, tiny_model

from rl.core.weight_sync import BroadcastReceiver, BroadcastSender, WeightSender


def extras() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return {
        "extra.ids": torch.arange(10).reshape(2, 5),
        "extra.half": torch.randn(5, generator=generator).half(),
        "extra.bf16": torch.randn(3, 4, generator=generator).bfloat16(),
        "extra.empty": torch.empty(0),
    }


def send(out: Path) -> None:
    model = tiny_model(1)
    sender = WeightSender(bucket_bytes=16 << 10, delta=True, transport=BroadcastSender(src=0))
    metrics = [sender.sync(chain(model.state_dict().items(), extras().items()))]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".layers.1." in name:
                param.add_(0.5)
    metrics.append(sender.sync(chain(model.state_dict().items(), extras().items())))
    torch.save({"state": model.state_dict(), "extra": extras(), "metrics": metrics}, out / "0.pt")


def receive(out: Path) -> None:
    engine = BufferingEngine(tiny_model(2))
    receiver = BroadcastReceiver(src=0)
    received = [receiver.receive(engine), receiver.receive(engine)]
    state = {"state": engine.model.state_dict(), "extra": engine.extras, "received": received}
    torch.save({**state, "calls": engine.calls}, out / "1.pt")


def main() -> None:
    rank, port, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        send(out) if rank == 0 else receive(out)
        dist.barrier()  # leave together (a lone teardown can abort gloo's peer)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
