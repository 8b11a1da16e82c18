"""Documents prepared apart from any store (`edudb.Preparer`), in another
process, and written in one batch (`Store.write_prepared`), in-process and
through a server: the documents the store's own ingest writes."""

from __future__ import annotations

import dataclasses
import multiprocessing
from pathlib import Path

import pytest

import edudb
from conftest import DEMO, start_server, stop_server

STATEMENTS = [
    "SELECT FROM * SEED BM25('unsafe operations') LIMIT 15",
    "SELECT FROM * SEED NEAR('formatting arguments') LIMIT 15",
    "SELECT SPANS FROM * SEED HYBRID('option filter') PROPAGATE BUDGET 300 TOKENS",
]


def answers(db: edudb.Store) -> list:
    """What readers see: documents, trees, DAGs and rankings with scores."""
    docs = db.docs()
    return [
        docs,
        [db.tree(d.id) for d in docs],
        [db.dag(d.id) for d in docs],
        [[dataclasses.replace(i, score=round(i.score, 6)) for i in db.query(s).items] for s in STATEMENTS],
    ]


def prepare_files(paths: list[str]) -> list[bytes]:
    """A worker process's share: its files prepared, no store open."""
    preparer = edudb.Preparer()
    return [preparer.prepare(path) for path in paths]


def demo_files() -> list[str]:
    return sorted(str(p) for p in DEMO.iterdir() if p.is_file())


def test_documents_prepared_in_other_processes_are_the_ones_ingest_writes(tmp_path: Path) -> None:
    files = demo_files()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        prepared = [doc for share in pool.map(prepare_files, [files[0::2], files[1::2]]) for doc in share]
    with edudb.open(tmp_path / "ingested.db") as ingested, edudb.open(tmp_path / "written.db") as written:
        ingested.ingest(files)
        docs = written.write_prepared(prepared)
        assert sorted(d.id for d in docs) == sorted(d.id for d in ingested.docs())
        assert answers(written) == answers(ingested)
        assert written.check().ok


def test_a_served_store_writes_a_batch_whole_or_refuses_it(tmp_path: Path) -> None:
    preparer = edudb.Preparer()
    good = [preparer.prepare(b"Alpha is the first letter.", id="alpha"),
            preparer.prepare(b"Beta is the second letter.", id="beta")]
    foreign = edudb.Preparer(embedder="hashed", dimension=32).prepare(b"Gamma.", id="gamma")
    assert preparer.embedder != edudb.Preparer(embedder="hashed", dimension=32).embedder
    server = start_server(tmp_path / "served.db")
    try:
        with edudb.connect(server.url) as db:
            with pytest.raises(edudb.UserError, match='"gamma".*dimension 32'):
                db.write_prepared([*good, foreign])
            assert db.docs() == []
            with pytest.raises(edudb.UserError, match="not a prepared document"):
                db.write_prepared([b"%PDF-1.7 and then nothing"])
            written = db.write_prepared(good)
            assert [d.id for d in written] == ["alpha", "beta"]
            assert db.search("second letter", 3)[0].doc == "beta"
    finally:
        stop_server(server)


def test_preparing_bad_input_raises_what_ingest_raises(tmp_path: Path) -> None:
    preparer = edudb.Preparer()
    with pytest.raises(edudb.UserError, match="needs an id"):
        preparer.prepare(b"text")
    with pytest.raises(edudb.UserError, match="binary"):
        preparer.prepare(b"\x00\x01\x02", id="blob")
    with pytest.raises(edudb.UserError, match="directory"):
        preparer.prepare(DEMO)
    with pytest.raises(edudb.UserError, match="reserved for session turns"):
        preparer.prepare(b"text", id="@session/s/000001")
