"""Distributed-ingest throughput (issue 52): the Rust RFCs ingested by
`edudb.ray.ingest` into a shard set of 4 stores on a local Ray cluster with
1 and 2 preparing workers, against `Store.ingest` of the same files into
one store in this process, all in one run (the ingest is the baseline of
the ratios). Ray's start is outside the timings; each distributed ingest's
own start (its actors, the pipeline) is inside. The default embedder;
`--documents N` for a quick run.

Run with `.ci/python ray-bench`."""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

import ray

import edudb
import edudb.ray

ROOT = Path(__file__).resolve().parents[2]
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"
SHARDS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, help="only the first N RFCs")
    parser.add_argument("--machine", default=platform.node())
    parser.add_argument("--batch-size", type=int, default=16, help="edudb.ray.ingest's batch_size")
    args = parser.parse_args()
    files = sorted(RFCS.glob("*.md"))[: args.documents]
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    rows: List[Tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        with edudb.open(Path(work) / "one.db") as db:
            db.ingest(files)
        baseline = time.perf_counter() - started
        rows.append(("Store.ingest, one process, one store (baseline)", baseline))
        for workers in (1, 2):
            report = edudb.ray.ingest(files, Path(work) / f"set-{workers}", shards=SHARDS, concurrency=workers,
                                      batch_size=args.batch_size)
            assert len(report.documents) == len(files) and not report.failures
            rows.append((f"edudb.ray.ingest, {workers} preparing worker{'s' if workers > 1 else ''}, "
                         f"{SHARDS} stores", report.seconds))
    ray.shutdown()
    print(f"{len(files)} RFCs, {megabytes:.2f} MB of text; Ray {ray.__version__}; "
          f"{args.machine}, {time.strftime('%Y-%m-%d')}\n")
    print("| step | s | documents/s | MB of text/s | × the ingest's time |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {len(files) / seconds:.0f} | {megabytes / seconds:.2f} | "
              f"{seconds / baseline:.2f} |")


if __name__ == "__main__":
    main()
