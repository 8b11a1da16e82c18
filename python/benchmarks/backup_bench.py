"""Online backup under a concurrent writer: how long `edudb backup` takes
on a served store of the Rust RFCs, how long its writers were held, and
what a writer appending turns through the server sees meanwhile (p50 and
p99 of `add_turn` before and during the backup).

Run with `.ci/python backup-bench` (the wheel and `target/release/edudb`
built); `--store DIR` keeps the RFC store between runs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import List

import edudb

ROOT = Path(__file__).resolve().parents[2]
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"
EDUDB = os.environ.get("EDUDB_BIN", str(ROOT / "target" / "release" / "edudb"))


def percentile(values: List[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", type=Path, help="the RFC store (built when absent)")
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds of writes before the backup")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="backup-bench."))
    store = args.store or work / "rfcs.db"
    if not store.exists():
        subprocess.run([EDUDB, "--db", str(store), "ingest", "-q", str(RFCS)], check=True)
    server = subprocess.Popen(
        [EDUDB, "--db", str(store), "serve", "--listen", "127.0.0.1:0", "--json"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        json.loads(server.stdout.readline())
        latencies: List[tuple] = []
        stop = threading.Event()

        def write() -> None:
            with edudb.connect(str(store)) as db:
                n = 0
                while not stop.is_set():
                    started = time.perf_counter()
                    db.add_turn("bench", f"Turn {n} about the backup bench.", placement="continue" if n else "auto")
                    latencies.append((started, time.perf_counter() - started))
                    n += 1

        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(args.baseline)
        dest = work / "copy.db"
        began = time.perf_counter()
        out = subprocess.run([EDUDB, "--db", str(store), "backup", str(dest), "--json"],
                             check=True, capture_output=True, text=True)
        ended = time.perf_counter()
        time.sleep(1.0)
        stop.set()
        writer.join()
        report = json.loads(out.stdout)
        before = [l for s, l in latencies if s + l < began]
        during = [l for s, l in latencies if s < ended and s + l > began]
        ms = lambda v: f"{1000 * v:.1f}"
        print(f"store: {report['documents']} documents, copy {report['bytes'] / 1e6:.1f} MB")
        print(f"backup: {report['seconds']:.2f} s (command {ended - began:.2f} s), writers held {report['writers_held_seconds']:.2f} s, "
              f"{report['caught_up']} copied again")
        print(f"add_turn before: n={len(before)} p50 {ms(statistics.median(before))} ms p99 {ms(percentile(before, 0.99))} ms")
        print(f"add_turn during: n={len(during)} p50 {ms(statistics.median(during))} ms p99 {ms(percentile(during, 0.99))} ms "
              f"max {ms(max(during))} ms")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
