"""Code a user writes against edudb, type-checked by mypy --strict in
test_types.py (never run): the stubs and annotations must let it pass,
and the deliberate mistakes at the end must be caught."""

from __future__ import annotations

from typing import List, Optional

import edudb
from edudb.langchain import EdudbRetriever as LangChainRetriever
from edudb.llama_index import EdudbRetriever as LlamaIndexRetriever


def spans(db: edudb.Store, question: str) -> List[str]:
    result: edudb.QueryResult = db.query("SELECT SPANS FROM * SEED BM25($q) BUDGET 64 TOKENS", q=question)
    firsts: List[int] = [item.edus[0] for item in result.items]
    budget: Optional[int] = result.budget
    return [item.text for item in result.items if budget is None or firsts]


def tour(path: str) -> None:
    with edudb.open(path, busy_timeout=1.5) as db:
        report: edudb.IngestReport = db.ingest(b"# A\n\nText.", id="a", format="markdown")
        names: List[str] = [d.id for d in report.documents] + [f.source for f in report.failures]
        db.ingest(["docs/", "notes.md"], progress=lambda done, total: print(f"{done}/{total}"))
        root: edudb.Node = db.tree(names[0])
        edus: List[edudb.Edu] = db.edus("a", 0, root.span[1])
        hits: List[edudb.SearchHit] = db.search("text", limit=3)
        plan: List[edudb.Stage] = db.explain("SELECT SPANS FROM * WHERE level = 1")
        dag: edudb.Dag = db.dag("a")
        weights: List[float] = [edge.weight for edge in dag.edges]
        receipt: edudb.TurnReceipt = db.add_turn("s", "hello", role="user", placement={"topic": 0})
        context: edudb.Context = db.context("s", 128, query="hello")
        sessions: List[edudb.SessionSummary] = db.sessions()
        stats: edudb.Stats = db.stats()
        ok: bool = db.check().ok
        copied: edudb.BackupReport = db.backup("copy.db", progress=lambda done, total: None)
        skipped: List[edudb.Damaged] = copied.skipped
        vacuumed: edudb.VacuumReport = db.vacuum()
        given_back: int = vacuumed.bytes_before - vacuumed.bytes_after
        del edus, hits, plan, weights, receipt, context, sessions, stats, ok
        del copied, skipped, vacuumed, given_back
    try:
        edudb.connect("http://127.0.0.1:1", token="t").docs()
    except edudb.QueryError as error:
        where: str = f"{error.line}:{error.column} {error.source_line}\n{error.caret} {error.hint}"
        del where
    except (edudb.NotFound, edudb.StoreBusy, edudb.Corrupt, edudb.InternalError, edudb.UserError):
        pass


def adapters(db: edudb.Store) -> int:
    documents = LangChainRetriever(store=db, budget=64).invoke("text")
    nodes = LlamaIndexRetriever(db, budget=64).retrieve("text")
    return len(documents) + len(nodes)


def mistakes(db: edudb.Store) -> None:
    count: int = db.docs()  # MISTAKE: a list, not an int
    db.search(42)  # MISTAKE: the text is a str
    db.query("SELECT", q={"x": 1})  # MISTAKE: a parameter is text, a number or a vector
