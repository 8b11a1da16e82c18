"""Evidence recall on FinanceBench dev: edudb's statements against flat BM25.

For every question of `questions.jsonl` (each asks about one filing), at
each budget, every edudb statement runs scoped to the question's filing
(`edudb query --json`, store built once with `edudb ingest` of the
filings), and every flat baseline ranks units of pypdf's text of the same
filing with BM25 (rank_bm25's Okapi, words lowercased) and takes the best
until it holds as many characters as edudb's best-by-name statement
returned for that question and budget (the last unit cut to fit). Score:
the share of the question's `evidence_text` word bigrams (runs of letters
and digits, lowercased: extractors.py's definition, imported) found in
what was returned.

    python benches/pdf/financebench.py --edudb target/release/edudb \
        [--data ../shared/data/financebench_dev] [--budgets 512,1024,2048] \
        [--store DIR] [--embedder hashed|local:DIR]

Prints a table (mean recall per method and budget, with a 95% bootstrap
interval) and writes every observation as JSON lines to --out.
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from extractors import bigrams, pypdf_pages, words

STATEMENTS = {
    "seed": "SELECT SPANS FROM doc($doc) SEED BM25($question) BUDGET $budget TOKENS",
    "traverse": "SELECT SPANS FROM doc($doc) SEED BM25($question) TRAVERSE BUDGET $budget TOKENS",
    "propagate": "SELECT SPANS FROM doc($doc) SEED BM25($question) PROPAGATE BUDGET $budget TOKENS",
    "hybrid": "SELECT SPANS FROM doc($doc) SEED HYBRID($question) BUDGET $budget TOKENS",
}
# The fill target of the flat baselines: what this statement returned.
FILL_FROM = "seed"


def recall(evidence, returned):
    wanted = set().union(*(bigrams(e) for e in evidence))
    if not wanted:
        return None
    return len(wanted & bigrams(returned)) / len(wanted)


def cached_pypdf_pages(path, cache):
    cached = cache / (path.stem + ".pages.json")
    if cached.exists():
        return json.loads(cached.read_text())
    pages = pypdf_pages(path)
    cached.write_text(json.dumps(pages))
    return pages


def chunks(pages, size):
    text = "\n".join(pages)
    return [text[i : i + size] for i in range(0, len(text), size)]


class Flat:
    """BM25 over one document's units."""

    def __init__(self, units):
        from rank_bm25 import BM25Okapi

        self.units = units
        self.bm25 = BM25Okapi([words(u) or ["\0"] for u in units])

    def fill(self, question, characters):
        scores = self.bm25.get_scores(words(question))
        order = sorted(range(len(self.units)), key=lambda i: -scores[i])
        out, held = [], 0
        for i in order:
            if held >= characters:
                break
            unit = self.units[i][: characters - held]
            out.append(unit)
            held += len(unit)
        return "\n".join(out)


def edudb_query(binary, store, statement, params):
    args = [binary, "--db", str(store), "query", statement, "--format", "json"]
    for name, value in params.items():
        args += ["-p", f"{name}={value}"]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:5])}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def interval(values, resamples=1000, seed=7):
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choice(values) for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--edudb", required=True)
    parser.add_argument("--data", default="../shared/data/financebench_dev")
    parser.add_argument("--budgets", default="512,1024,2048")
    parser.add_argument("--store", help="keep the store here (built when absent)")
    parser.add_argument(
        "--embedder", default=None, help="the new store's embedder: hashed, or local:DIR (the in-process model in DIR)"
    )
    parser.add_argument("--cache", default=str(Path.home() / ".cache/edudb/financebench"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    data = Path(args.data)
    budgets = [int(b) for b in args.budgets.split(",")]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    questions = [json.loads(line) for line in open(data / "questions.jsonl")]
    filings = sorted({q["doc_name"] for q in questions})
    store = Path(args.store) if args.store else Path(tempfile.mkdtemp()) / "store"
    if not store.exists():
        if args.embedder:
            kind, _, model = args.embedder.partition(":")
            chosen = ["--embedder", kind] + (["--model", model] if model else [])
            subprocess.run([args.edudb, "--db", str(store), "init"] + chosen, check=True)
        started = time.perf_counter()
        subprocess.run(
            [args.edudb, "--db", str(store), "ingest"] + [str(data / "pdfs" / f"{f}.pdf") for f in filings],
            check=True,
        )
        print(f"ingested {len(filings)} filings in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    flats = {}
    for filing in filings:
        pages = cached_pypdf_pages(data / "pdfs" / f"{filing}.pdf", cache)
        flats[filing] = {"bm25-pages": Flat(pages)}
        for size in (200, 400, 800):
            flats[filing][f"bm25-{size}ch"] = Flat(chunks(pages, size))
    rows = []
    for q in questions:
        evidence = [e["evidence_text"] for e in q["evidence"]]
        for budget in budgets:
            returned = {}
            for name, statement in STATEMENTS.items():
                result = edudb_query(
                    args.edudb, store, statement, {"doc": q["doc_name"], "question": q["question"], "budget": budget}
                )
                text = "\n".join(item["text"] for item in result["results"])
                returned[name] = text
                pages = sorted({p for item in result["results"] for p in range(item["pages"][0], item["pages"][1] + 1)}) if result["results"] and "pages" in result["results"][0] else []
                evidence_pages = [e["evidence_page_num"] + 1 for e in q["evidence"]]
                rows.append({"question": q["financebench_id"], "budget": budget, "method": name,
                             "recall": recall(evidence, text), "characters": len(text),
                             "evidence_page_hit": any(p in pages for p in evidence_pages)})
            target = len(returned[FILL_FROM])
            for name, flat in flats[q["doc_name"]].items():
                text = flat.fill(q["question"], target)
                rows.append({"question": q["financebench_id"], "budget": budget, "method": name,
                             "recall": recall(evidence, text), "characters": len(text)})
    if args.out:
        with open(args.out, "w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
    methods = list(STATEMENTS) + list(next(iter(flats.values())))
    print(f"{'method':14}" + "".join(f"{b:>24}" for b in budgets))
    for method in methods:
        cells = []
        for budget in budgets:
            values = [r["recall"] for r in rows if r["method"] == method and r["budget"] == budget and r["recall"] is not None]
            low, high = interval(values)
            cells.append(f"{sum(values) / len(values):.3f} [{low:.3f},{high:.3f}]")
        print(f"{method:14}" + "".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
