"""Print the markdown tables of a results file: ``python -m benchmarks.tables FILE.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import bench_decode, bench_ffn, bench_spcn, bench_throughput, bench_traces, bench_train

RENDER = {
    "traces": bench_traces.render,
    "chunks": bench_traces.render_chunks,
    "train": bench_train.render,
    "decode": bench_decode.render,
    "spcn": bench_spcn.render,
    "ffn": bench_ffn.render,
    "throughput": bench_throughput.render,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_file():
        print("usage: python -m benchmarks.tables FILE.json (FILE must exist)", file=sys.stderr)
        return 2
    report = json.loads(Path(args[0]).read_text())
    print(f"`{report['command']}` ({report['suite']} suite, {report['started_utc']})\n")
    for name, result in report["results"].items():
        print(RENDER[name](result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
