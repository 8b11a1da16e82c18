"""Vacuum against a fresh ingest: the Rust RFCs ingested, every other
document removed and a quarter of the files ingested again (half of them
removed ones, which come back, half kept ones, which are replaced), then
`edudb vacuum`; its size is compared
with a fresh store holding the same documents, built in the same run
(issue 49's target: at most 1.2x).

Run with `.ci/python vacuum-bench` (needs only `target/release/edudb`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"
EDUDB = os.environ.get("EDUDB_BIN", str(ROOT / "target" / "release" / "edudb"))


def edudb(store: Path, *args: str) -> str:
    done = subprocess.run([EDUDB, "--db", str(store), *args], check=True, capture_output=True, text=True)
    return done.stdout


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def tree_of(ids: List[str], by_id: Dict[str, Path], dest: Path) -> Path:
    """The RFC files of `ids` copied under `dest` at their relative paths,
    so that a directory ingest gives them the same ids."""
    for i in ids:
        target = dest / by_id[i].relative_to(RFCS)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(by_id[i], target)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the stores (printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vacuum-bench."))
    by_id = {str(f.relative_to(RFCS).with_suffix("")): f for f in RFCS.rglob("*.md")}
    churned = work / "churned.db"
    edudb(churned, "ingest", "-q", str(RFCS))
    ids = sorted(d["id"] for d in json.loads(edudb(churned, "docs", "--json")))
    assert sorted(by_id) == ids, "the store's ids are not the files' relative paths"
    edudb(churned, "rm", *ids[::2])
    # A quarter again: half of it removed before (it comes back), half
    # kept (it is replaced).
    quarter = sorted(ids[0::8] + ids[1::8])
    edudb(churned, "ingest", "-q", str(tree_of(quarter, by_id, work / "quarter")))
    before = size(churned)
    started = time.perf_counter()
    report = json.loads(edudb(churned, "vacuum", "--json"))
    seconds = time.perf_counter() - started
    kept = sorted(d["id"] for d in json.loads(edudb(churned, "docs", "--json")))
    fresh = work / "fresh.db"
    edudb(fresh, "ingest", "-q", str(tree_of(kept, by_id, work / "kept")))
    fresh_ids = sorted(d["id"] for d in json.loads(edudb(fresh, "docs", "--json")))
    assert fresh_ids == kept, "the fresh store holds other documents"
    after, fresh_bytes = size(churned), size(fresh)
    print(f"documents kept: {len(kept)} of {len(ids)}")
    print("| store | bytes | ratio to fresh |")
    print("|---|---:|---:|")
    print(f"| churned, before vacuum | {before / 1e6:.1f} MB | {before / fresh_bytes:.2f}x |")
    print(f"| churned, after vacuum ({seconds:.1f} s) | {after / 1e6:.1f} MB | {after / fresh_bytes:.2f}x |")
    print(f"| fresh ingest of the same documents | {fresh_bytes / 1e6:.1f} MB | 1.00x |")
    print(f"vacuum's own report: {report}")
    if args.keep:
        print(f"stores kept in {work}")
    else:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
