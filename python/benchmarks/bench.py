"""The Python package's costs, measured in one run and printed as a table
(run by `.ci/python bench [--quick]` from the repository root):

- the per-call overhead of `Store.query` from Python over the same
  statement run by the Rust library alone in the same process (the
  issue's target: at most 1.3x at 100k EDUs);
- session `add_turn` calls per second in-process (target: at least 100/s
  on two cores).

The store holds the Rust RFCs and the 2WikiMultihopQA and MuSiQue passage
corpora of ../shared/data (50 passages per Markdown document), as
`benches/vectors.rs` builds it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import edudb

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
PASSAGES_PER_DOCUMENT = 50
STATEMENT = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"
QUERIES = [
    "unsafe operations in unsafe functions",
    "trait objects and dynamic dispatch",
    "which film director was born first",
    "error handling with the question mark operator",
    "the capital city of the country",
    "lifetime elision rules",
    "who is the spouse of the performer",
    "macro hygiene and expansion",
]


def passage_documents(corpus: str, prefix: str) -> list:
    passages = json.loads((SHARED / corpus).read_text())
    documents = []
    for start in range(0, len(passages), PASSAGES_PER_DOCUMENT):
        chunk = passages[start : start + PASSAGES_PER_DOCUMENT]
        text = f"# {prefix} passages {start // PASSAGES_PER_DOCUMENT}\n\n"
        text += "".join(f"## {p['title']}\n\n{p['text']}\n\n" for p in chunk)
        documents.append((f"{prefix}/{start // PASSAGES_PER_DOCUMENT:04}", text.encode()))
    return documents


def build(path: Path) -> tuple:
    started = time.perf_counter()
    db = edudb.open(path)
    db.ingest(SHARED / "rust_rfcs" / "text", format="markdown")
    for corpus, prefix in [
        ("wiki2/hipporag_2wikimultihopqa_corpus.json", "wiki2"),
        ("musique/hipporag_musique_train100_corpus.json", "musique"),
    ]:
        for doc_id, text in passage_documents(corpus, prefix):
            db.ingest(text, id=doc_id, format="markdown")
    return db, time.perf_counter() - started


def per_call(seconds: float, calls: int) -> float:
    return seconds / calls * 1000.0


def measure_query(db: edudb.Store, rounds: int, runs: int) -> dict:
    """Milliseconds per call, median over rounds, of each way of running
    every query `runs` times: Rust alone, the native call (JSON text) and
    the typed Python call."""
    ways = {"rust": [], "native": [], "python": []}
    for _ in range(rounds):
        rust = native = python = 0.0
        for q in QUERIES:
            params = {"q": q, "budget": 256}
            rust += db._native.rust_query_seconds(STATEMENT, params, runs) * runs
            started = time.perf_counter()
            for _ in range(runs):
                db._native.query(STATEMENT, params)
            native += time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(runs):
                db.query(STATEMENT, **params)
            python += time.perf_counter() - started
        calls = runs * len(QUERIES)
        ways["rust"].append(per_call(rust, calls))
        ways["native"].append(per_call(native, calls))
        ways["python"].append(per_call(python, calls))
    return {way: statistics.median(times) for way, times in ways.items()}


def measure_turns(path: Path, turns: int) -> float:
    """add_turn calls per second, in-process, on a new store."""
    texts = [
        "We fly to Sapporo on Monday for the snow festival.",
        "Book a ramen place near Odori park for the evening.",
        "Remember to renew the car insurance before March.",
        "The fjord cabin in Tromso has a sauna and a view north.",
    ]
    with edudb.open(path) as db:
        started = time.perf_counter()
        for i in range(turns):
            db.add_turn("bench", f"{texts[i % len(texts)]} (note {i})", role="user" if i % 2 else "assistant")
        return turns / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and turns")
    args = parser.parse_args()
    rounds, runs, turns = (3, 5, 100) if args.quick else (7, 20, 400)
    with tempfile.TemporaryDirectory() as work:
        # The turns first: a file system that has just created and deleted
        # the big store's thousands of index files allocates new ones
        # slower (see docs/benchmarks.md).
        per_second = measure_turns(Path(work) / "turns", turns)
        db, built = build(Path(work) / "store")
        with db:
            stats = db.stats()
            for q in QUERIES:  # warm the caches the way a service's would be
                db.query(STATEMENT, q=q, budget=256)
            times = measure_query(db, rounds, runs)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"store: {stats.documents} documents, {stats.edus} EDUs, {stats.tokens} tokens (built in {built:.1f} s)")
    print(f"statement: {STATEMENT} with $budget = 256, {len(QUERIES)} queries x {runs} runs, median of {rounds} rounds")
    print()
    print("| way | ms per query | vs Rust alone |")
    print("|---|---:|---:|")
    for way, label in [
        ("rust", "Rust library alone (`Db::run`)"),
        ("native", "Python, native call (JSON text)"),
        ("python", "Python, `Store.query` (typed results)"),
    ]:
        print(f"| {label} | {times[way]:.3f} | {times[way] / times['rust']:.2f}x |")
    print()
    print(f"add_turn in-process: {per_second:.0f} turns/s ({turns} turns, one session)")


if __name__ == "__main__":
    main()
