"""Prepared-document throughput (issue 52): the Rust RFCs prepared by
`edudb.Preparer` in 1 and 2 worker processes (no store open), then written
with `Store.write_prepared` in batches, against `Store.ingest` of the same
files in one process, all in one run (the ingest is the baseline of the
ratios). The default embedder; `--documents N` for a quick run.

Run with `.ci/python prepare-bench`."""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import edudb

ROOT = Path(__file__).resolve().parents[2]
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"
BATCH = 64

_preparer: Optional[edudb.Preparer] = None


def _start_worker() -> None:
    global _preparer
    _preparer = edudb.Preparer()


def _prepare(path: str) -> bytes:
    assert _preparer is not None
    return _preparer.prepare(path)


def prepared_in(workers: int, files: List[str]) -> tuple[float, List[bytes]]:
    """Seconds to prepare `files` in `workers` processes (their start and
    the bytes' return included), and the prepared documents."""
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_start_worker) as pool:
        docs = pool.map(_prepare, files, chunksize=8)
    return time.perf_counter() - started, docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, help="only the first N RFCs")
    parser.add_argument("--machine", default=platform.node())
    args = parser.parse_args()
    files = sorted(str(p) for p in RFCS.glob("*.md"))[: args.documents]
    megabytes = sum(Path(f).stat().st_size for f in files) / 1e6
    rows = []
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        with edudb.open(Path(work) / "ingested.db") as db:
            db.ingest(files)
        baseline = time.perf_counter() - started
        rows.append(("Store.ingest, one process (baseline)", baseline))
        for workers in (1, 2):
            seconds, docs = prepared_in(workers, files)
            rows.append((f"Preparer.prepare, {workers} worker process{'es' if workers > 1 else ''}", seconds))
        prepared_bytes = sum(len(d) for d in docs)
        started = time.perf_counter()
        with edudb.open(Path(work) / "written.db") as db:
            for at in range(0, len(docs), BATCH):
                db.write_prepared(docs[at : at + BATCH])
        rows.append((f"Store.write_prepared, batches of {BATCH}", time.perf_counter() - started))
    print(
        f"{len(files)} RFCs, {megabytes:.2f} MB of text, {prepared_bytes / 1e6:.1f} MB prepared; "
        f"{args.machine}, {time.strftime('%Y-%m-%d')}\n"
    )
    print("| step | s | documents/s | MB of text/s | × the ingest's time |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds in rows:
        print(
            f"| {name} | {seconds:.2f} | {len(files) / seconds:.0f} | {megabytes / seconds:.2f} | {seconds / baseline:.2f} |"
        )


if __name__ == "__main__":
    main()
