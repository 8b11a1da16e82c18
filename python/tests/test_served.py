"""A store served by a real `edudb serve` on loopback: the same methods
give the same results as in-process, over TCP and over the store's
socket, with the same exception classes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import edudb
from conftest import DEMO, Server, start_server, stop_server

SPANS = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"


def untimed(result: edudb.QueryResult) -> tuple:
    """A result without its timings, scores to 5 decimals (two stores of
    the same documents may sum a BM25 score in another order)."""
    items = [dataclasses.replace(item, score=round(item.score, 5)) for item in result.items]
    return (items, result.tokens_used, result.budget, [s.operator for s in result.plan])


def reads(db: edudb.Store) -> list:
    """Everything a reader sees of the demo corpus."""
    first = db.docs()[0].id
    return [
        db.docs(),
        [db.tree(d.id) for d in db.docs()],
        db.edus(first, 2, 5),
        db.dag(first),
        [dataclasses.replace(hit, score=round(hit.score, 5)) for hit in db.search("unsafe operations", 7)],
        untimed(db.query(SPANS, q="unsafe operations", budget=200)),
        [s.operator for s in db.explain(SPANS, q="unsafe", budget=64)],
        db.query("SHOW DOCS").value["documents"],
        db.check().ok,
    ]


def test_a_served_store_answers_as_the_same_store_in_process(server: Server, tmp_path: Path) -> None:
    with edudb.open(tmp_path / "twin.db") as twin:
        twin.ingest(DEMO)
        expected = reads(twin)
    for target in (server.url, server.path, server.socket):
        with edudb.connect(target) as db:
            assert db.served
            assert reads(db) == expected, target


def test_writes_and_sessions_through_a_server(server: Server, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nThe fjord cabin has a sauna.\n")
    (notes / "b.md").write_bytes(b"\x00binary")
    with edudb.connect(server.path) as db:
        report = db.ingest(notes)
        assert [d.id for d in report.documents] == ["a"]
        assert [(f.cls, f.source.endswith("b.md")) for f in report.failures] == [("user", True)]
        assert db.ingest(b"# B\n\nNorthern lights.\n", id="b", format="markdown").documents[0].id == "b"
        assert {"a", "b"} <= {d.id for d in db.docs()}
        db.remove("b")
        with pytest.raises(edudb.NotFound):
            db.tree("b")

        receipt = db.add_turn("trip", "We fly to Sapporo on Monday.", at="2026-02-02")
        assert (receipt.session, receipt.turn) == ("trip", 0)
        with pytest.raises(edudb.NotFound):
            db.add_turn("trip", "Back to a topic never opened.", placement={"topic": 99})
        with pytest.raises(edudb.NotFound):
            db.add_turn("trip", "A fork at a turn never said.", placement={"fork": 99})
        db.add_turn("trip", "Pack the snow boots.", role="assistant")
        assert [s.id for s in db.sessions()] == ["trip"]
        context = db.context("trip", budget=128, query="when do we fly?")
        assert any("Sapporo" in item.text for item in context.items)
        assert db.session("trip")["turns"] == 2
        db.remove_session("trip")
        with pytest.raises(edudb.NotFound):
            db.context("trip", budget=64)
        assert db.stats().documents == len(db.docs())
        assert db.reindex()["skipped"] == []


def test_a_served_store_is_backed_up_and_vacuumed_by_its_server(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with edudb.connect(server.url) as db:
        documents = db.docs()
        # A relative destination is this process's, made absolute here.
        monkeypatch.chdir(tmp_path)
        report = db.backup("copy.db")
        assert report.path == str(tmp_path / "copy.db")
        assert (report.documents, report.skipped) == (len(documents), [])
        with pytest.raises(edudb.UserError, match="not empty"):
            db.backup(tmp_path / "copy.db")
        db.remove(documents[0].id)
        # The server vacuums its store and serves the new one (a store this
        # small gives back little: the space test is the in-process one).
        vacuumed = db.vacuum()
        assert isinstance(vacuumed, edudb.VacuumReport) and vacuumed.bytes_after > 0
        assert (vacuumed.documents, vacuumed.sessions) == (len(documents) - 1, 0)
        assert db.docs() == documents[1:]
    with edudb.open(tmp_path / "copy.db", create=False) as copied:
        assert copied.docs() == documents
        assert copied.check().ok


def test_served_errors_have_the_local_classes_and_locations(server: Server, tmp_path: Path) -> None:
    bad = "SELECT SPANS\nFROM * WERE level = 1"
    with edudb.open(tmp_path / "twin.db") as twin:
        with pytest.raises(edudb.QueryError) as local:
            twin.query(bad)
    with edudb.connect(server.url) as db:
        with pytest.raises(edudb.QueryError) as served:
            db.query(bad)
        for field in ("line", "column", "hint", "source_line", "caret"):
            assert getattr(served.value, field) == getattr(local.value, field), field
        assert str(served.value) == str(local.value)
        with pytest.raises(edudb.NotFound):
            db.edus("nowhere")
        with pytest.raises(edudb.UserError):
            db.edus(db.docs()[0].id, 5, 1)
        with pytest.raises(edudb.UserError):
            db.query(SPANS, q="x", budget=True)
        with pytest.raises(edudb.UserError, match="(?i)rust"):
            db._native.rust_query_seconds(SPANS, {"q": "x", "budget": 8}, 1)


def test_a_token_is_required_where_set_and_a_missing_server_is_a_user_error(tmp_path: Path) -> None:
    secured = start_server(tmp_path / "s.db", "--token-env", "EDUDB_TEST_TOKEN", env={"EDUDB_TEST_TOKEN": "s3cret"})
    try:
        with pytest.raises(edudb.UserError, match="token"):
            edudb.connect(secured.url, token="wrong")
        with edudb.connect(secured.url, token="s3cret") as db:
            assert db.docs() == []
    finally:
        stop_server(secured)
    with pytest.raises(edudb.UserError, match=f"no edudb server answers at {secured.url}"):
        edudb.connect(secured.url)
    with pytest.raises(edudb.UserError, match="no server runs on the store"):
        edudb.connect(tmp_path / "s.db")
    with pytest.raises(edudb.UserError, match="no such store, socket or address"):
        edudb.connect(tmp_path / "nowhere")


def test_opening_a_served_store_says_to_connect(tmp_path: Path) -> None:
    running = start_server(tmp_path / "s.db")
    try:
        with pytest.raises(edudb.StoreBusy, match=r"edudb serve` holds it; use edudb.connect"):
            edudb.open(tmp_path / "s.db")
        with edudb.connect(running.url.removeprefix("http://")) as db:  # HOST:PORT
            assert db.docs() == []
    finally:
        stop_server(running)


def test_a_client_whose_server_stopped_fails_as_internal(tmp_path: Path) -> None:
    running = start_server(tmp_path / "s.db")
    db = edudb.connect(running.url)
    assert db.docs() == []
    stop_server(running)
    with pytest.raises(edudb.InternalError):
        db.docs()
    db.close()
    # The store is free again for this process.
    with edudb.open(tmp_path / "s.db") as local:
        assert local.docs() == []


def test_damage_a_server_finds_is_corrupt_as_in_process(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with edudb.open(path) as db:
        db.ingest(DEMO)
    [fast] = [p for p in (path / "fulltext").iterdir() if p.suffix == ".fast"]
    data = bytearray(fast.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 200] = b"\x5a" * 200
    fast.write_bytes(bytes(data))
    running = start_server(path)
    try:
        with edudb.connect(running.url) as db:
            with pytest.raises(edudb.Corrupt, match="reindex"):
                db.search("unsafe operations", 5)
            db.reindex()
            assert db.search("unsafe operations", 5)
    finally:
        stop_server(running)
