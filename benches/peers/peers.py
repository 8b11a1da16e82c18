"""edudb beside LanceDB and Chroma on the same corpus and the same vectors
(issue 48), run by `.ci/python peers-bench [--corpus wiki2|rfcs]` from the
repository root; prints a Markdown table and writes results.json and
peers.png to --out.

Every system is embedded, in-process, and gets the same all-MiniLM-L6-v2
vectors for the same texts (vectors.py: computed once, cached under
~/.cache/edudb/peers/). Units: edudb ingests the documents (its EDUs and
tree nodes are what it indexes); each peer loads the chunks a user of
theirs would make (a passage, or a document's paragraphs packed to at most
CHUNK_CHARACTERS), and, as a second table, edudb's own EDU texts, so that
the unit counts match.

Phases, each system alternating with the others:
- load (each in a process of its own, for its peak RSS): seconds, bytes on
  disk. edudb twice: with its default (hashed) embedder, building
  everything it builds (tree, DAG, full-text and vector indexes), and with
  the cached MiniLM vectors through its HTTP embedder (the store the
  queries run on); then its bytes once its vector graph is built and
  saved (`reindex`), which edudb defers to the first searches. The peers
  load precomputed vectors and build their full-text and vector indexes.
- queries (one process, systems alternating per query): full-text top-10,
  vector top-10 with recall@10 against an exact scan of the same vectors,
  and a vector top-10 filtered to a tenth of the documents.
- evidence recall on the dev HotpotQA and MuSiQue questions (shared
  corpora, `edudb eval convert --setting shared`): edudb's budgeted
  statement against each peer's vector top-k passages filled to the same
  characters; a gold sentence counts when its text is in what came back.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
CACHE = Path.home() / ".cache" / "edudb" / "peers"
CHUNK_CHARACTERS = 1000
GROUPS = 10
FILTER_GROUP = 3
K = 10
# A store's first searches in a process that are scored exactly, before
# its graph loads (`FLAT_SEARCHES` in src/engine/reads.rs).
FLAT_SEARCHES = 4
EDUDB_FULLTEXT = f"SELECT FROM * SEED BM25($q) LIMIT {K}"
# Given the query's vector, as the peers are; and given its text, which edudb embeds.
EDUDB_VECTOR = f"SELECT FROM * SEED NEAR($v) LIMIT {K}"
EDUDB_FILTERED = f"SELECT FROM * WHERE meta.grp = {FILTER_GROUP} SEED NEAR($v) LIMIT {K}"
EDUDB_BUDGETED = "SELECT SPANS FROM * SEED HYBRID($q) PROPAGATE BUDGET $budget TOKENS"
BUDGETS = (256, 1024)
SYSTEMS = ("edudb", "lancedb", "chroma")
os.environ.setdefault("LANCEDB_LOG", "error")  # lance's deprecation warnings
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # chroma


# ---------------------------------------------------------------- corpus


def documents(corpus: str) -> list[dict]:
    """The corpus as documents: id, Markdown text, paragraphs, group."""
    if corpus == "wiki2":
        passages = json.loads((SHARED / "wiki2" / "hipporag_2wikimultihopqa_corpus.json").read_text())
        return [
            {"id": f"w{i:05}", "text": f"# {p['title']}\n\n{p['text']}\n", "paragraphs": [p["text"]], "grp": i % GROUPS}
            for i, p in enumerate(passages)
        ]
    if corpus == "rfcs":
        files = sorted((SHARED / "rust_rfcs" / "text").glob("*.md"))
        out = []
        for i, path in enumerate(files):
            text = path.read_text()
            paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
            out.append({"id": path.stem, "text": text, "paragraphs": paragraphs, "grp": i % GROUPS})
        return out
    raise SystemExit(f"unknown corpus {corpus!r} (wiki2 or rfcs)")


def chunks(docs: list[dict]) -> list[dict]:
    """A peer user's chunks: each document's paragraphs packed in order to
    at most CHUNK_CHARACTERS (a longer paragraph is a chunk alone)."""
    out = []
    for doc in docs:
        current = ""
        for paragraph in doc["paragraphs"]:
            if current and len(current) + 2 + len(paragraph) > CHUNK_CHARACTERS:
                out.append({"doc": doc["id"], "text": current, "grp": doc["grp"]})
                current = ""
            current = f"{current}\n\n{paragraph}" if current else paragraph
        if current:
            out.append({"doc": doc["id"], "text": current, "grp": doc["grp"]})
    return out


def questions() -> list[str]:
    """Query texts: the dev HotpotQA and MuSiQue questions."""
    hotpot = json.loads((SHARED / "hotpotqa" / "hipporag_hotpotqa_train100.json").read_text())
    musique = json.loads((SHARED / "musique" / "hipporag_musique_train100.json").read_text())
    return [q["question"] for q in hotpot] + [q["question"] for q in musique]


# --------------------------------------------------------------- vectors


class Vectors:
    """The cached MiniLM vectors server (vectors.py), started for the run."""

    def __init__(self, work: Path, model_dir: str):
        port_file = work / "vectors.port"
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("vectors.py")), "--cache", str(CACHE / "minilm.vectors"),
             "--port-file", str(port_file), "--model-dir", model_dir],
        )
        deadline = time.time() + 60
        while not port_file.exists():
            if self.process.poll() is not None or time.time() > deadline:
                raise SystemExit("the vectors server did not start")
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}/v1"

    def embed(self, texts: list[str]) -> np.ndarray:
        """The vectors of `texts`, one row each."""
        out = []
        for start in range(0, len(texts), 512):
            body = json.dumps({"input": texts[start : start + 512], "model": "all-MiniLM-L6-v2"}).encode()
            request = urllib.request.Request(f"{self.url}/embeddings", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=3600) as response:
                out += [row["embedding"] for row in json.load(response)["data"]]
        return np.asarray(out, np.float32).reshape(len(texts), -1)

    def stop(self):
        """Stops the server."""
        self.process.terminate()
        self.process.wait()


# --------------------------------------------------------------- systems


def open_edudb(path: Path, url: str | None):
    """The edudb store at `path`: the hashed default, or MiniLM from `url`."""
    import edudb

    if url is None:
        return edudb.open(path)
    return edudb.open(path, embedder="openai", embed_url=url, embed_model="all-MiniLM-L6-v2", dimension=384)


def load_edudb(path: Path, docs: list[dict], url: str | None, staging: Path) -> None:
    """Ingests the documents (written as Markdown files beforehand), a
    batch per group so that each carries its `grp` metadata."""
    db = open_edudb(path, url)
    for group in range(GROUPS):
        files = [staging / f"{d['id']}.md" for d in docs if d["grp"] == group]
        db.ingest(files, format="markdown", metadata={"grp": group})
    db.close()


def lance_table(path: Path, units: list[dict], vectors: np.ndarray):
    """A LanceDB table of the units, with its full-text and vector indexes."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS, HnswSq

    db = lancedb.connect(str(path))
    table = db.create_table(
        "units",
        pa.table(
            {
                "id": [str(i) for i in range(len(units))],
                "doc": [u["doc"] for u in units],
                "text": [u["text"] for u in units],
                "grp": [u["grp"] for u in units],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
            }
        ),
    )
    table.create_index("text", config=FTS())
    table.create_index("vector", config=HnswSq(distance_type="cosine"))
    return table


def chroma_collection(path: Path, units: list[dict], vectors: np.ndarray):
    """A persistent Chroma collection of the units (HNSW, cosine)."""
    import chromadb

    client = chromadb.PersistentClient(path=str(path))
    collection = client.create_collection("units", configuration={"hnsw": {"space": "cosine"}})
    batch = client.get_max_batch_size()
    for start in range(0, len(units), batch):
        part = units[start : start + batch]
        collection.add(
            ids=[str(i) for i in range(start, start + len(part))],
            embeddings=vectors[start : start + len(part)],
            documents=[u["text"] for u in part],
            metadatas=[{"doc": u["doc"], "grp": u["grp"]} for u in part],
        )
    return collection


class Edudb:
    """edudb's queries: the vector ones take the query's vector, as the
    peers' do; `vector_from_text` lets edudb embed the text instead."""

    name = "edudb"

    def __init__(self, path: Path, url: str):
        self.path, self.url = path, url
        self.db = open_edudb(path, url)
        self.db.reindex()  # the vector graph loaded, as a long-running user has it

    def fulltext(self, q: str):
        return [hit_key(h) for h in self.db.query(EDUDB_FULLTEXT, q=q).items]

    def vector(self, q: str, vector: np.ndarray):
        return [hit_key(h) for h in self.db.query(EDUDB_VECTOR, v=vector).items]

    def vector_from_text(self, q: str, vector: np.ndarray):
        return [hit_key(h) for h in self.db.query(EDUDB_VECTOR.replace("$v", "$q"), q=q).items]

    def filtered(self, q: str, vector: np.ndarray):
        return [hit_key(h) for h in self.db.query(EDUDB_FILTERED, v=vector).items]

    def exact(self, vectors: np.ndarray) -> list[list[str]]:
        """The exact top-10 of each query: a store's first searches in a
        process, before its graph loads, are scored exactly from the stored
        vectors, so the store is reopened every FLAT_SEARCHES queries."""
        self.db.close()
        out = []
        for start in range(0, len(vectors), FLAT_SEARCHES):
            db = open_edudb(self.path, self.url)
            batch = vectors[start : start + FLAT_SEARCHES]
            out += [[hit_key(h) for h in db.query(EDUDB_VECTOR, v=v).items] for v in batch]
            db.close()
        self.db = open_edudb(self.path, self.url)
        self.db.reindex()
        return out


def hit_key(item) -> str:
    """What identifies an item of edudb's answer: its document and EDUs."""
    return f"{item.doc}:{item.edus}"


class Lance:
    """LanceDB's queries, over a loaded table."""

    name = "lancedb"

    def __init__(self, path: Path):
        import lancedb

        self.table = lancedb.connect(str(path)).open_table("units")

    def fulltext(self, q: str):
        return [r["id"] for r in self.table.search(q, query_type="fts").limit(K).select(["id"]).to_list()]

    def vector(self, q: str, vector: np.ndarray):
        return [r["id"] for r in self.table.search(vector).distance_type("cosine").limit(K).select(["id"]).to_list()]

    def filtered(self, q: str, vector: np.ndarray):
        search = self.table.search(vector).distance_type("cosine").where(f"grp = {FILTER_GROUP}", prefilter=True)
        return [r["id"] for r in search.limit(K).select(["id"]).to_list()]


class Chroma:
    """Chroma's queries, over a loaded collection."""

    name = "chroma"

    def __init__(self, path: Path):
        import chromadb

        self.collection = chromadb.PersistentClient(path=str(path)).get_collection("units")

    def fulltext(self, q: str):
        return None  # no ranked full-text search in an embedded Chroma

    def vector(self, q: str, vector: np.ndarray):
        return self.collection.query(query_embeddings=[vector], n_results=K, include=[])["ids"][0]

    def filtered(self, q: str, vector: np.ndarray):
        found = self.collection.query(query_embeddings=[vector], n_results=K, where={"grp": FILTER_GROUP}, include=[])
        return found["ids"][0]


def exact_ids(vectors: np.ndarray, queries: np.ndarray) -> list[list[str]]:
    """Each query's exact top-10 rows by cosine (the vectors are unit)."""
    scores = queries @ vectors.T
    top = np.argsort(-scores, axis=1)[:, :K]
    return [[str(i) for i in row] for row in top]


# ------------------------------------------------------------ measuring


def child(args: list[str]) -> dict:
    """Runs this script's `load` step in a process of its own; its JSON
    answer."""
    done = subprocess.run([sys.executable, __file__, *args], stdout=subprocess.PIPE)
    if done.returncode != 0:
        raise SystemExit(f"load step {args} failed ({done.returncode})")
    return json.loads(done.stdout)


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: since its exec, unlike
    ru_maxrss, which Linux carries over from the forking parent)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def size_mb(path: Path) -> float:
    """Bytes of the files under `path`, in MB."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def load_step(argv: list[str]) -> None:
    """`peers.py load SYSTEM DIR UNITS.json VECTORS.npy|URL` (a child process)."""
    system, path, units_file, source = argv
    path, units = Path(path), json.loads(Path(units_file).read_text())
    vectors = None if system.startswith("edudb") else np.load(source)
    started = time.perf_counter()
    if system.startswith("edudb"):
        load_edudb(path, units, None if system == "edudb-hashed" else source, Path(units_file).parent / "staging")
    else:
        (lance_table if system == "lancedb" else chroma_collection)(path, units, vectors)
    seconds = time.perf_counter() - started
    row = {"seconds": seconds, "mb": size_mb(path)}
    if system.startswith("edudb"):
        # edudb builds its vector graph at the first searches, not at
        # ingest: the store a searching user has holds the graph's dump too
        # (the peers' loads above include their vector indexes).
        db = open_edudb(path, None if system == "edudb-hashed" else source)
        started = time.perf_counter()
        db.reindex()
        db.close()
        row["graph_seconds"] = time.perf_counter() - started
    row |= {"mb_searched": size_mb(path), "peak_rss_mb": peak_rss_mb()}
    print(json.dumps(row))


def percentile(values: list[float], p: float) -> float:
    """The `p`th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def timed(call, *args):
    """(milliseconds, result) of one call."""
    started = time.perf_counter()
    result = call(*args)
    return (time.perf_counter() - started) * 1e3, result


def recall_at_k(found: list[list[str]], exact: list[list[str]]) -> float:
    """Mean share of each exact top-10 found."""
    return statistics.fmean(len(set(f) & set(e)) / max(1, len(e)) for f, e in zip(found, exact))


def query_phase(systems: list, texts: list[str], vectors: np.ndarray, exact: dict, rounds: int) -> dict:
    """p50/p99 milliseconds of each system's full-text, vector and filtered
    top-10 (and edudb's vector top-10 from the query's text), systems
    alternating per query; vector recall@10."""
    times = {s.name: {"fulltext": [], "vector": [], "filtered": [], "vector_from_text": []} for s in systems}
    found = {s.name: [] for s in systems}
    for s in systems:  # warm-up
        for q, v in zip(texts[:5], vectors[:5]):
            s.fulltext(q), s.vector(q, v)
    for round_ in range(rounds):
        for q, v in zip(texts, vectors):
            for s in systems:
                ms, hits = timed(s.fulltext, q)
                if hits is not None:
                    times[s.name]["fulltext"].append(ms)
                ms, hits = timed(s.vector, q, v)
                times[s.name]["vector"].append(ms)
                if round_ == 0:
                    found[s.name].append(hits)
                ms, _ = timed(s.filtered, q, v)
                times[s.name]["filtered"].append(ms)
                if hasattr(s, "vector_from_text"):
                    ms, _ = timed(s.vector_from_text, q, v)
                    times[s.name]["vector_from_text"].append(ms)
    out = {}
    for s in systems:
        row = {}
        for kind, values in times[s.name].items():
            row[kind] = {"p50": percentile(values, 50), "p99": percentile(values, 99)} if values else None
        row["recall_at_10"] = recall_at_k(found[s.name], exact[s.name])
        out[s.name] = row
    return out


# ------------------------------------------------------ evidence recall


def convert(kind: str, setting_dir: Path) -> Path:
    """The dev set as `edudb eval convert --setting shared` writes it."""
    data = {"hotpotqa": "hotpotqa/hipporag_hotpotqa_train100", "musique": "musique/hipporag_musique_train100"}[kind]
    out = setting_dir / f"{kind}-shared.jsonl"
    subprocess.run(
        [os.environ.get("EDUDB_BIN", str(ROOT / "target/release/edudb")), "eval", "convert", kind,
         str(SHARED / f"{data}.json"), "--corpus", str(SHARED / f"{data}_corpus.json"), "--setting", "shared",
         "-o", str(out)],
        check=True, stdout=subprocess.DEVNULL,
    )
    return out


def normalised(text: str) -> str:
    """Whitespace runs as one space."""
    return " ".join(text.split())


def evidence_phase(kind: str, work: Path, vectors: Vectors) -> dict:
    """Mean evidence recall per system and budget on one dev set."""
    rows = [json.loads(line) for line in convert(kind, work).read_text().splitlines()]
    docs = {r["id"]: r for r in rows if r["type"] == "document"}
    asked = [r for r in rows if r["type"] == "question"]
    passages = [
        {"doc": d["id"], "text": f"{s['title']}\n" + " ".join(s["sentences"]), "grp": 0}
        for d in docs.values() for s in d["sections"]
    ]
    passage_vectors = vectors.embed([p["text"] for p in passages])
    question_vectors = vectors.embed([q["question"] for q in asked])
    db = open_edudb(work / f"{kind}-edudb", vectors.url)
    for d in docs.values():
        text = "".join(f"# {s['title']}\n\n" + " ".join(s["sentences"]) + "\n\n" for s in d["sections"])
        db.ingest(text.encode(), id=d["id"], format="markdown")
    lance = lance_table(work / f"{kind}-lance", passages, passage_vectors)
    chroma = chroma_collection(work / f"{kind}-chroma", passages, passage_vectors)
    scores = {s: {b: [] for b in BUDGETS} for s in SYSTEMS}
    for q, qv in zip(asked, question_vectors):
        gold = [normalised(sentence) for e in q["evidence"] for sentence in gold_sentences(docs, e)]
        for budget in BUDGETS:
            result = db.query(EDUDB_BUDGETED, q=q["question"], budget=budget)
            picked = normalised(" ".join(h.text for h in result.items))
            characters = len(picked)
            ranked_lance = [r["text"] for r in lance.search(qv).distance_type("cosine").limit(50).select(["text"]).to_list()]
            ranked_chroma = chroma.query(query_embeddings=[qv], n_results=50, include=["documents"])["documents"][0]
            for name, text in (("edudb", picked), ("lancedb", filled(ranked_lance, characters)),
                               ("chroma", filled(ranked_chroma, characters))):
                scores[name][budget].append(sum(g in text for g in gold) / len(gold))
    db.close()
    return {s: {b: statistics.fmean(v) for b, v in per.items()} for s, per in scores.items()}


def gold_sentences(docs: dict, evidence: dict) -> list[str]:
    """The sentences a piece of evidence names: one, or its whole section."""
    sentences = docs[evidence["doc"]]["sections"][evidence["section"]]["sentences"]
    return [sentences[evidence["sentence"]]] if "sentence" in evidence else sentences


def filled(ranked: list[str], characters: int) -> str:
    """Top-ranked passages in order until `characters` are reached (the
    last one cut to fit)."""
    out = ""
    for text in ranked:
        room = characters - len(out)
        if room <= 0:
            break
        out = f"{out} {normalised(text)[:room]}".strip()
    return out


# ------------------------------------------------------------- reporting


def versions() -> dict:
    """The versions measured."""
    import chromadb
    import edudb
    import lancedb

    return {"edudb": edudb.__version__, "lancedb": lancedb.__version__, "chromadb": chromadb.__version__,
            "python": platform.python_version()}


def report(results: dict) -> str:
    """The results as Markdown tables."""
    loads, queries = results["load"], results["queries"]
    lines = [
        f"{results['corpus']}: {results['documents']} documents, {results['chunks']} chunks, "
        f"{results['edus']} EDUs; {results['text_mb']:.2f} MB of text; {results['date']}, {results['machine']}; "
        + ", ".join(f"{k} {v}" for k, v in results["versions"].items()),
        "",
        "| system | units | load s | MB on disk after the load | MB on disk once searched (per MB of text) "
        "| peak RSS MB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, row in loads.items():
        graph = f" (+{row['graph_seconds']:.1f} s: `reindex`)" if "graph_seconds" in row else ""
        lines.append(
            f"| {name} | {row['units']} | {row['seconds']:.1f}{graph} | {row['mb']:.1f} "
            f"| {row['mb_searched']:.1f} ({row['mb_searched'] / results['text_mb']:.1f}) | {row['peak_rss_mb']:.0f} |"
        )
    lines += ["", "| system | full-text p50 / p99 ms | vector p50 / p99 ms | recall@10 | filtered p50 / p99 ms |",
              "|---|---:|---:|---:|---:|"]

    def cell(timing):
        return "n/a" if timing is None else f"{timing['p50']:.2f} / {timing['p99']:.2f}"

    for name, row in queries.items():
        lines.append(f"| {name} | {cell(row['fulltext'])} | {cell(row['vector'])} | {row['recall_at_10']:.3f} "
                     f"| {cell(row['filtered'])} |")
    from_text = queries["edudb"]["vector_from_text"]
    lines += ["", "Every system is given the query vectors (edudb through `NEAR($v)`). Given the query text instead, "
              f"edudb's vector top-10 takes {cell(from_text)} ms (p50 / p99), embedding it through its HTTP "
              f"embedder (a cached vector; the round trip alone, from Python: {results['query_embedding_ms']:.2f} ms "
              "at p50)."]
    if results.get("evidence"):
        lines += ["", "| system | " + " | ".join(f"{kind} @ {b}" for kind in results["evidence"] for b in BUDGETS) + " |",
                  "|---|" + "---:|" * (len(results["evidence"]) * len(BUDGETS))]
        for name in SYSTEMS:
            cells = [f"{results['evidence'][kind][name][str(b)]:.3f}" for kind in results["evidence"] for b in BUDGETS]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(results: dict, path: Path) -> None:
    """Bars of load time, size and the two top-10 p50s, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads, queries = results["load"], results["queries"]
    panels = [
        ("load (s)", {k: v["seconds"] for k, v in loads.items()}),
        ("MB on disk once searched", {k: v["mb_searched"] for k, v in loads.items()}),
        ("full-text top-10 p50 (ms)", {k: v["fulltext"]["p50"] for k, v in queries.items() if v["fulltext"]}),
        ("vector top-10 p50 (ms)", {k: v["vector"]["p50"] for k, v in queries.items()}),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    for axis, (title, values) in zip(axes, panels):
        axis.barh(list(values), list(values.values()), color="#4c72b0")
        axis.set_title(title, fontsize=10)
        axis.invert_yaxis()
        axis.tick_params(labelsize=8)
    figure.suptitle(f"{results['corpus']}: edudb, LanceDB and Chroma ({results['date']}, {results['machine']})", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# ------------------------------------------------------------------ main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "load":
        load_step(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description="edudb beside LanceDB and Chroma")
    parser.add_argument("--corpus", default="wiki2", choices=["wiki2", "rfcs"])
    parser.add_argument("--documents", type=int, help="only the corpus's first N documents (a quick run)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the queries")
    parser.add_argument("--machine", default=platform.node())
    parser.add_argument("--model-dir", required=True, help="all-MiniLM-L6-v2 (`.ci/embedding-server model-dir`)")
    parser.add_argument("--no-evidence", action="store_true", help="leave out the dev-set evidence recall")
    parser.add_argument("--out", type=Path, default=ROOT / "target" / "peers")
    parser.add_argument("--keep", type=Path, help="build the stores in this new directory and keep them")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.keep:
        args.keep.mkdir(parents=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="edudb-peers-"))
    vectors = Vectors(work, args.model_dir)
    try:
        results = run(args, work, vectors)
    finally:
        vectors.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    chart(results, args.out / "peers.png")
    print(report(results))


def run(args, work: Path, vectors: Vectors) -> dict:
    """Every phase, in `work`; the results."""
    docs = documents(args.corpus)[: args.documents]
    staging = work / "staging"
    staging.mkdir()
    for d in docs:
        (staging / f"{d['id']}.md").write_text(d["text"])
    (work / "docs.json").write_text(json.dumps(docs))
    say = lambda text: print(f"peers: {text}", file=sys.stderr, flush=True)  # noqa: E731
    say(f"{len(docs)} documents; loading edudb (hashed)")
    load = {"edudb (hashed)": child(["load", "edudb-hashed", str(work / "edudb-hashed"), str(work / "docs.json"), "-"])}
    import edudb

    hashed = edudb.open(work / "edudb-hashed")
    edus = [
        {"doc": d["id"], "text": e.text, "grp": d["grp"]}
        for d in docs for e in hashed.edus(d["id"]) if e.kind != "heading"
    ]
    hashed.close()
    edudb_units = f"{len(edus)} EDUs + nodes"
    load["edudb (hashed)"]["units"] = edudb_units
    units = {"chunks": chunks(docs), "edus": edus}
    say(f"{len(units['chunks'])} chunks, {len(edus)} EDUs; their vectors (cached after the first run)")
    unit_vectors = {kind: vectors.embed([u["text"] for u in rows]) for kind, rows in units.items()}
    for kind, rows in units.items():
        (work / f"{kind}.json").write_text(json.dumps(rows))
        np.save(work / f"{kind}.npy", unit_vectors[kind])
    say("loading edudb (MiniLM through the cache)")
    load["edudb (MiniLM)"] = child(["load", "edudb-minilm", str(work / "edudb"), str(work / "docs.json"), vectors.url])
    load["edudb (MiniLM)"]["units"] = edudb_units
    for kind, rows in units.items():
        for system in ("lancedb", "chroma"):
            say(f"loading {system} ({kind})")
            load[f"{system} ({kind})"] = child(
                ["load", system, str(work / f"{system}-{kind}"), str(work / f"{kind}.json"), str(work / f"{kind}.npy")]
            ) | {"units": str(len(rows))}
    texts = questions()
    query_vectors = vectors.embed(texts)
    round_trips = [timed(vectors.embed, [t])[0] for t in texts]
    queries = {}
    edudb_store = Edudb(work / "edudb", vectors.url)
    edudb_exact = edudb_store.exact(query_vectors)
    for kind in units:
        say(f"queries ({kind} for the peers)")
        peers = [Lance(work / f"lancedb-{kind}"), Chroma(work / f"chroma-{kind}")]
        exact = {p.name: exact_ids(unit_vectors[kind], query_vectors) for p in peers}
        # edudb's units are its own, whichever the peers load: measured once, beside the chunks.
        systems = [edudb_store, *peers] if kind == "chunks" else peers
        measured = query_phase(systems, texts, query_vectors, exact | {"edudb": edudb_exact}, args.rounds)
        for name, row in measured.items():
            queries[name if name == "edudb" else f"{name} ({kind})"] = row
    edudb_store.db.close()
    evidence = {}
    if not args.no_evidence:
        for kind in ("hotpotqa", "musique"):
            say(f"evidence recall, {kind}")
            evidence[kind] = {s: {str(b): r for b, r in per.items()} for s, per in evidence_phase(kind, work, vectors).items()}
    return {
        "corpus": args.corpus, "documents": len(docs), "chunks": len(units["chunks"]), "edus": len(edus),
        "text_mb": sum(len(d["text"].encode()) for d in docs) / 1e6, "date": time.strftime("%Y-%m-%d"),
        "machine": args.machine, "versions": versions(), "load": load, "queries": queries, "evidence": evidence,
        "query_embedding_ms": percentile(round_trips, 50),
    }


if __name__ == "__main__":
    main()
