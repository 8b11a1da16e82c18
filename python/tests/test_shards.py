"""A shard set (several stores as one) from Python and over MCP: made by
``edudb.open(path, shards=N)``, opened like a store, each document in the
store ``edudb.shard_of`` names, every reading call answering what one
store of the same documents answers, its upkeep done store by store, and
sessions refused by name."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

import edudb
from conftest import DEMO
from test_mcp import call, over_stdio, refusal

STATEMENTS = [
    "SELECT FROM * SEED BM25('unsafe operations') LIMIT 15",
    "SELECT SPANS FROM * SEED BM25('who reviews an RFC') TRAVERSE BUDGET 300 TOKENS",
    "SELECT SPANS FROM * SEED BM25('option filter') PROPAGATE BUDGET 300 TOKENS",
]


def readings(db: edudb.Store) -> list:
    """What readers see: documents, trees, EDUs, searches and rankings."""
    docs = db.docs()
    return [
        docs,
        [db.tree(d.id) for d in docs],
        [db.edus(d.id) for d in docs],
        db.search("process AND review", 10),
        [dataclasses.replace(i, score=round(i.score, 6)) for s in STATEMENTS for i in db.query(s).items],
    ]


def test_a_shard_set_answers_as_one_store_holding_its_documents(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "set", shards=3) as sharded, edudb.open(tmp_path / "one") as one:
        sharded.ingest(DEMO)
        one.ingest(DEMO)
        assert readings(sharded) == readings(one)
        stats, alone = sharded.stats(), one.stats()
        assert stats.shards == 3 and alone.shards is None
        assert (stats.documents, stats.edus, stats.nodes, stats.tokens) == (
            alone.documents, alone.edus, alone.nodes, alone.tokens)
        assert sharded.check().ok
        ids = [d.id for d in sharded.docs()]
    # Each document is in the store its id places it in, and only there.
    for shard in range(3):
        with edudb.open(tmp_path / "set" / f"shard-{shard:03}", create=False) as store:
            held = {d.id for d in store.docs()}
        assert held == {i for i in ids if edudb.shard_of(i, 3) == shard}
    # Opened again, the directory is the set, not a store.
    with edudb.open(tmp_path / "set") as again:
        assert again.stats().shards == 3
        assert [d.id for d in again.docs()] == ids


def test_prepared_documents_and_removals_go_to_their_stores(tmp_path: Path) -> None:
    preparer = edudb.Preparer()
    texts = {f"note-{i}": f"Note {i} is about the {word} of the harbour." for i, word in
             enumerate(["lighthouse", "ferry", "pier", "crane", "tide", "gulls"])}
    with edudb.open(tmp_path / "set", shards=2) as db:
        written = db.write_prepared([preparer.prepare(t.encode(), id=i) for i, t in texts.items()])
        assert [d.id for d in written] == list(texts)
        assert db.search("ferry", 3)[0].doc == "note-1"
        db.remove("note-1")
        assert "note-1" not in {d.id for d in db.docs()}
        db.update_metadata("note-2", {"dock": 4})
        assert db.metadata("note-2") == {"dock": 4}
        assert [d.id for d in db.docs(where="meta.dock = 4")] == ["note-2"]


def test_a_shard_set_is_backed_up_and_vacuumed_and_refuses_sessions(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "set", shards=2) as db:
        db.ingest(DEMO)
        first = db.docs()[0].id
        db.remove(first)
        copy = db.backup(tmp_path / "copy")
        assert copy.documents == len(db.docs())
        report = db.vacuum()
        assert report.documents == len(db.docs())
        assert db.sessions() == []
        with pytest.raises(edudb.UserError, match="shard set holds documents only"):
            db.add_turn("trip", "We fly on Monday.")
        after = readings(db)
    with edudb.open(tmp_path / "copy") as copy_db:
        assert copy_db.stats().shards == 2
        assert readings(copy_db) == after


def test_shard_of_is_the_placement_and_checks_its_count() -> None:
    assert [edudb.shard_of("123456789", n) for n in (1, 2, 7)] == [0, 0xCBF43926 % 2, 0xCBF43926 % 7]
    with pytest.raises(edudb.UserError, match="1 to 4096"):
        edudb.shard_of("a", 0)
    with pytest.raises(edudb.UserError, match="shards"):
        edudb.open("unused", shards=-1)


def test_mcp_serves_a_shard_set_like_a_store(tmp_path: Path) -> None:
    path = tmp_path / "set"
    with edudb.open(path, shards=3) as db:
        db.ingest(DEMO)
        ids = [d.id for d in db.docs()]

    async def run() -> None:
        async with over_stdio(path) as session:
            _, documents = await call(session, "list_documents")
            assert [d["id"] for d in documents["documents"]] == ids
            _, found = await call(session, "search", question="who reviews an RFC", budget=200)
            assert found["results"] and found["tokens_used"] <= 200
            item = found["results"][0]
            first, last = item["edus"]
            _, read = await call(session, "read", document=item["doc"], first=first, last=last)
            assert all(e["text"] in item["text"] for e in read["edus"])
            _, tree = await call(session, "document_tree", document=ids[0], depth=1)
            assert tree["children"]
            text, _ = await refusal(session, "remember", session="trip", text="We fly on Monday.")
            assert "shard set" in text

    asyncio.run(run())
