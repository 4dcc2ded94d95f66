"""How many settings of the committed upstream examples rl refuses, file by file.

    python scripts/count_refusals.py [--keys]

Every config and launch script under packages/cli/tests/dialects/<system>/upstream/ is
converted as `rl convert --from <system> FILE` would (verl's scripts from its newest fetched
release's folder, as verl runs them from its checkout; the others with their environment
unset): the count of refused ("unsupported") settings per file, the files that fail to
convert with the first line of the error, and the total. `--keys` lists each refused key.
Helper files (a `base_env.sh` sourced by the others) are skipped."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIALECTS = ROOT / "packages" / "cli" / "tests" / "dialects"
SYSTEMS = ("verl", "roll", "chatlearn", "rlinf")
HELPERS = ("base_env.sh",)
VERL_RELEASE = ROOT / ".upstream" / "verl-0.9.1"


def examples() -> Iterator[tuple[str, Path]]:
    for system in SYSTEMS:
        for path in sorted((DIALECTS / system / "upstream").rglob("*")):
            helper = path.name in HELPERS or "tool_config" in path.parts  # inputs a config names
            if path.suffix in (".yaml", ".yml", ".sh") and not helper:
                yield system, path


@contextlib.contextmanager
def where_it_runs(system: str, path: Path) -> Iterator[None]:
    """The current folder a user runs the file from, and a clean environment of the script's
    own variables (so the script's defaults apply)."""
    before, saved = Path.cwd(), dict(os.environ)
    os.chdir(VERL_RELEASE if system == "verl" and path.suffix == ".sh" else path.parent)
    for name in ("NNODES", "NGPUS_PER_NODE", "MODEL_PATH", "TRAIN_FILE", "TEST_FILE"):
        os.environ.pop(name, None)
    try:
        yield
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(saved)


def count(keys: bool) -> int:
    from rl.cli.dialects import convert

    total, failed = 0, 0
    for system, path in examples():
        shown = path.relative_to(DIALECTS)
        try:
            with where_it_runs(system, path):
                report = convert(system, path).report
        except Exception as error:  # a file that does not convert at all: say why
            failed += 1
            first = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
            print(f"  error  {shown}: {first}")
            continue
        refused = [e for e in report.entries if e.status == "unsupported"]
        total += len(refused)
        print(f"{len(refused):7d}  {shown}")
        if keys:
            for entry in refused:
                print(f"           {entry.source} = {entry.value!r}")
    print(f"{total:7d}  refused settings in all; {failed} file(s) did not convert")
    return total


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", action="store_true", help="list each refused key")
    count(parser.parse_args(argv).keys)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
