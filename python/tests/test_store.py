"""A store opened in this process: every method, its typed results and
their invariants, parameters, errors, reopening."""

from __future__ import annotations

import datetime
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import threading
from pathlib import Path

import pytest

import edudb
from conftest import DEMO

SPANS = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"

MARKDOWN = (
    b"# Trips\n\n"
    b"## Japan\n\n"
    b"We fly to Sapporo in February. The snow festival fills the park with ice sculptures.\n\n"
    b"Ramen in Sapporo is made with miso, and the shops open late.\n\n"
    b"## Norway\n\n"
    b"In Tromso we hope to see the northern lights from a fjord cabin.\n"
)


def test_ingest_reports_each_document_and_docs_lists_them(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "s.db") as db:
        report = db.ingest(DEMO)
        assert report.failures == []
        ids = sorted(d.id for d in report.documents)
        assert ids == sorted(p.stem for p in DEMO.iterdir() if p.suffix == ".md")
        assert [d.id for d in db.docs()] == ids
        for document in db.docs():
            assert document.edus > 0 and document.tokens > 0 and document.bytes > 0
            assert isinstance(document.title, str)


def test_ingest_takes_bytes_lists_of_paths_an_id_and_a_format(tmp_path: Path) -> None:
    one, two = sorted(DEMO.glob("*.md"))[:2]
    with edudb.open(tmp_path / "s.db") as db:
        report = db.ingest(MARKDOWN, id="trips", format="markdown")
        assert [d.id for d in report.documents] == ["trips"]
        assert report.documents[0].bytes == len(MARKDOWN)
        assert {d.id for d in db.ingest([one, str(two)]).documents} == {one.stem, two.stem}
        assert db.ingest(one, id="renamed").documents[0].id == "renamed"
        plain = db.ingest(b"# not a heading here\n\nJust text.", id="plain", format="text")
        assert plain.documents[0].edus >= 1
        assert all(node.kind != "section" for node in db.tree("plain").walk())
        assert any(node.kind == "section" for node in db.tree("trips").walk())
        with pytest.raises(edudb.UserError, match="standard input"):
            db.ingest("-")
        assert {d.id for d in db.docs()} == {"trips", one.stem, two.stem, "renamed", "plain"}
        with pytest.raises(edudb.UserError, match="id"):
            db.ingest(MARKDOWN)
        with pytest.raises(edudb.UserError, match="format"):
            db.ingest(MARKDOWN, id="x", format="docx")


def test_content_refused_is_a_failure_while_the_rest_go_in(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA sentence about ramen.\n")
    (docs / "binary.md").write_bytes(b"\x00\x01\x02 binary")
    with edudb.open(tmp_path / "s.db") as db:
        report = db.ingest(docs)
        assert [d.id for d in report.documents] == ["good"]
        assert [(f.source.endswith("binary.md"), f.cls) for f in report.failures] == [(True, "user")]
        assert "binary" in report.failures[0].message
        with pytest.raises(edudb.UserError):
            db.ingest(b"\x00\x00", id="nul")
        with pytest.raises(edudb.UserError):
            db.ingest(tmp_path / "missing.md")
        # One file refused raises its error; in a list it is a failure.
        with pytest.raises(edudb.UserError, match="binary"):
            db.ingest(docs / "binary.md")
        listed = db.ingest([docs / "binary.md"])
        assert [f.cls for f in listed.failures] == ["user"]


def test_edus_are_exact_byte_ranges_that_tile_the_text(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "s.db") as db:
        db.ingest(MARKDOWN, id="trips")
        edus = db.edus("trips")
        assert [e.id for e in edus] == list(range(len(edus)))
        for edu in edus:
            start, end = edu.bytes
            assert MARKDOWN[start:end].decode() == edu.text
            assert edu.tokens > 0
        # Consecutive EDUs never overlap, and only markup lies between them.
        for before, after in zip(edus, edus[1:]):
            assert before.bytes[1] <= after.bytes[0]
            assert MARKDOWN[before.bytes[1] : after.bytes[0]].strip(b" \n#") == b""
        assert db.edus("trips", 1, 2) == edus[1:3]
        assert db.edus("trips", 3) == [edus[3]]
        with pytest.raises(edudb.UserError, match="last"):
            db.edus("trips", None, 2)
        with pytest.raises(edudb.UserError):
            db.edus("trips", 2, 1)
        with pytest.raises(edudb.UserError):
            db.edus("trips", 0, len(edus))


def test_tree_spans_nest_and_cover_every_edu(store: edudb.Store) -> None:
    for document in store.docs():
        root = store.tree(document.id)
        assert root.span == (0, document.edus - 1)
        nodes = root.walk()
        assert len(nodes) == document.nodes
        for node in nodes:
            first, last = node.span
            assert first <= last
            previous_last = first - 1
            for child in node.children:
                assert child.level > node.level
                assert first <= child.span[0] <= child.span[1] <= last
                assert child.span[0] > previous_last, "siblings are disjoint and in order"
                previous_last = child.span[1]


def test_dag_out_weights_sum_to_one(store: edudb.Store) -> None:
    checked = 0
    for document in store.docs():
        dag = store.dag(document.id)
        assert dag.doc == document.id
        ids = {node.id for node in dag.nodes}
        totals: dict = {}
        for edge in dag.edges:
            assert edge.source in ids and edge.target in ids
            assert edge.weight > 0
            totals[edge.source] = totals.get(edge.source, 0.0) + edge.weight
        for total in totals.values():
            assert total == pytest.approx(1.0, abs=1e-4)
        checked += len(totals)
        top = store.dag(document.id, level=dag.top_level)
        assert all(node.level == dag.top_level for node in top.nodes)
    assert checked > 0, "some node has out-edges"


def test_search_ranks_edus_and_nodes(store: edudb.Store) -> None:
    hits = store.search("unsafe operations", limit=5)
    assert 0 < len(hits) <= 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert any("unsafe" in h.text.lower() for h in hits)
    for hit in hits:
        assert hit.edus[0] <= hit.edus[1]
    with pytest.raises(edudb.UserError):
        store.search("title:(", limit=5)


def test_query_binds_text_and_numbers_and_keeps_the_budget(store: edudb.Store) -> None:
    small = store.query(SPANS, q="unsafe operations", budget=64)
    large = store.query(SPANS, q="unsafe operations", budget=512.0)
    assert small.budget == 64 and 0 < small.tokens_used <= 64
    assert large.budget == 512 and small.tokens_used < large.tokens_used <= 512
    assert sum(item.tokens for item in large.items) == large.tokens_used
    # Linearised in original document order, each span its own text.
    keys = [(item.doc, item.edus[0]) for item in large.items]
    assert keys == sorted(keys)
    for item in large.items:
        text = (DEMO / f"{item.doc}.md").read_bytes()
        assert text[item.bytes[0] : item.bytes[1]].decode() == item.text
    assert large.text == "\n\n".join(item.text for item in large.items)
    # Seed hits carry their BM25 score as it is; MIN keeps those above it.
    seeded = [item for item in large.items if item.match_score is not None]
    assert seeded and all(item.match_score > 0 for item in seeded)
    least = min(item.match_score for item in seeded)
    cut = store.query(
        "SELECT SPANS FROM * SEED BM25($q) MIN $least BUDGET 512 TOKENS",
        q="unsafe operations",
        least=least + 1e-3,
    )
    assert all(item.match_score is None or item.match_score > least for item in cut.items)
    assert large.plan == []
    with pytest.raises(edudb.UserError, match="bool"):
        store.query(SPANS, q="x", budget=True)
    with pytest.raises(edudb.UserError, match="list"):
        store.query(SPANS, q=["x"], budget=64)
    with pytest.raises(edudb.QueryError):
        store.query(SPANS, q="unsafe")  # $budget unbound


def test_near_takes_a_query_vector_of_the_stores_dimension(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "db", embedder="hashed", dimension=32) as db:
        db.ingest(DEMO)
        vector = [((i * 7) % 5) - 2.0 for i in range(32)]
        near = "SELECT SPANS FROM * SEED NEAR($v) LIMIT 4"
        listed = db.query(near, v=vector)
        assert len(listed.items) == 4
        assert all(item.match_score is not None for item in listed.items)
        assert db.query(near, v=tuple(vector)).items == listed.items
        with pytest.raises(edudb.QueryError, match="a vector of 3 numbers; this store's vectors have 32"):
            db.query(near, v=[1.0, 2.0, 3.0])
        with pytest.raises(edudb.QueryError, match="only NEAR takes"):
            db.query("SELECT SPANS FROM * SEED BM25($v)", v=vector)


def test_show_statements_answer_their_rows(store: edudb.Store) -> None:
    shown = store.query("SHOW DOCS")
    assert shown.items == []
    assert [d["id"] for d in shown.value["documents"]] == [d.id for d in store.docs()]


def test_explain_gives_the_plan_and_errors_keep_their_position(store: edudb.Store) -> None:
    plan = store.explain(SPANS, q="unsafe", budget=64)
    assert [stage.operator for stage in plan][0] == "seed"
    assert all(stage.rows_out >= 0 and stage.elapsed >= 0 for stage in plan)
    written = store.query("EXPLAIN " + SPANS, q="unsafe", budget=64).plan
    assert [s.operator for s in written] == [s.operator for s in plan]
    # explain= is not silently bound as a parameter the statement lacks.
    with pytest.raises(TypeError, match="Store.explain"):
        store.query(SPANS, q="unsafe", budget=64, explain=True)
    named = store.query("SELECT SPANS FROM * SEED BM25($explain) BUDGET 64 TOKENS", explain="unsafe")
    assert named.items
    bad = "SELECT SPANS\nFROM * WERE level = 1"
    for run in (store.query, store.explain):
        with pytest.raises(edudb.QueryError) as raised:
            run(bad)
        error = raised.value
        assert (error.line, error.column) == (2, 8)
        assert error.source_line == "FROM * WERE level = 1"
        assert error.caret == "       ^^^^"
        assert error.hint == "did you mean WHERE?"
        assert "line 2, column 8" in str(error)
        assert isinstance(error, edudb.UserError) and isinstance(error, edudb.EdudbError)


def test_remove_and_not_found(store: edudb.Store) -> None:
    victim = store.docs()[0].id
    store.remove(victim)
    assert victim not in [d.id for d in store.docs()]
    for call in (store.tree, store.edus, store.dag, store.remove):
        with pytest.raises(edudb.NotFound, match=victim):
            call(victim)
    with pytest.raises(edudb.UserError):
        store.ingest(MARKDOWN, id="..")


def test_a_session_round_trip(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "s.db") as db:
        monday = datetime.datetime(2026, 2, 2, 9, 30, tzinfo=datetime.timezone.utc)
        first = db.add_turn("trip", "We fly to Sapporo on Monday for the snow festival.", at=monday)
        assert (first.session, first.turn, first.parent, first.role) == ("trip", 0, None, "user")
        assert first.at == "2026-02-02T09:30:00Z"
        second = db.add_turn("trip", "Book a ramen place near the park.", role="assistant", placement="continue")
        assert (second.turn, second.parent, second.topic) == (1, 0, first.topic)
        third = db.add_turn("trip", "Separately: renew the car insurance.", at=datetime.date(2026, 2, 3), placement="new_topic")
        assert third.topic != first.topic and third.at.startswith("2026-02-03")
        db.add_turn("trip", "The hotel is by Odori park.", placement={"topic": first.topic})
        with pytest.raises(edudb.UserError, match="time zone"):
            db.add_turn("trip", "naive", at=datetime.datetime(2026, 2, 2, 9, 30))
        with pytest.raises(edudb.UserError):
            db.add_turn("trip", "   ")
        with pytest.raises(edudb.UserError):
            db.add_turn("trip", "who?", role="narrator")
        with pytest.raises(edudb.NotFound):
            db.add_turn("trip", "to a topic that is not there", placement={"topic": 99})

        [summary] = db.sessions()
        assert (summary.id, summary.turns, summary.topics, summary.current) == ("trip", 4, 2, 3)
        view = db.session("trip")
        assert view["id"] == "trip" and view["turns"] == 4

        context = db.context("trip", budget=256, query="when do we fly to Sapporo?")
        assert 0 < context.tokens_used <= 256 and context.budget == 256
        assert any("fly to Sapporo" in item.text for item in context.items)
        relevant = [i for i in context.items if i.kind == "relevant_turn"]
        assert any(i.turn == 0 and i.score is not None for i in relevant)
        assert context.text.count("\n\n") == len(context.items) - 1
        plain = db.context("trip", budget=256)
        assert all(item.kind != "relevant_turn" for item in plain.items)

        db.forget_turn("trip", 0)
        forgotten = db.context("trip", budget=256, query="when do we fly to Sapporo?")
        assert all("Sapporo" not in item.text and item.turn != 0 for item in forgotten.items)
        [summary] = db.sessions()
        assert (summary.turns, summary.current) == (4, 3)
        assert db.session("trip")["topics"][0]["branches"][0]["turns"][0]["summary"] is None
        with pytest.raises(edudb.NotFound):
            db.forget_turn("trip", 9)

        db.remove_session("trip")
        assert db.sessions() == []
        with pytest.raises(edudb.NotFound):
            db.session("trip")
        with pytest.raises(edudb.NotFound):
            db.context("trip", budget=64)


def test_backup_copies_the_store_in_use_and_vacuum_gives_space_back(
    store: edudb.Store, tmp_path: Path
) -> None:
    store.add_turn("trip", "We fly to Sapporo on Monday.", at="2026-02-02")
    store.update_metadata(store.docs()[0].id, set={"team": "lang"})
    seen: list = []
    copy = tmp_path / "copy.db"
    report = store.backup(copy, progress=lambda done, total: seen.append((done, total)))
    assert isinstance(report, edudb.BackupReport)
    documents = store.docs()
    assert (report.documents, report.sessions, report.skipped) == (len(documents), 1, [])
    assert report.path == str(copy) and report.bytes > 0
    assert seen and seen[-1] == (len(documents) + 1, len(documents) + 1)
    # The store stays in use, and the copy is a store of its own.
    store.add_turn("trip", "Pack the snow boots.")
    with edudb.open(copy, create=False) as copied:
        assert copied.docs() == documents
        assert copied.session("trip")["turns"] == 1
        assert copied.check().ok
    with pytest.raises(edudb.UserError, match="not empty"):
        store.backup(copy)

    class Enough(Exception):
        pass

    def stop(done: int, total: int) -> None:
        raise Enough

    with pytest.raises(Enough):
        store.backup(tmp_path / "stopped.db", progress=stop)
    assert not (tmp_path / "stopped.db").exists()

    for document in documents[: len(documents) // 2]:
        store.remove(document.id)
    kept = store.docs()
    vacuumed = store.vacuum()
    assert isinstance(vacuumed, edudb.VacuumReport)
    assert vacuumed.bytes_after < vacuumed.bytes_before
    assert (vacuumed.documents, vacuumed.sessions) == (len(kept), 1)
    # Opened again: every call goes on, on the vacuumed store.
    assert store.docs() == kept
    assert store.query(SPANS, q="unsafe", budget=64).items
    assert store.session("trip")["turns"] == 2


def test_stats_check_and_reindex(store: edudb.Store) -> None:
    stats = store.stats()
    assert stats.documents == len(store.docs())
    assert stats.edus == sum(d.edus for d in store.docs())
    assert stats.tokenizer == "o200k_base"
    report = store.check()
    assert report.ok and report.documents == stats.documents
    seen: list = []
    rebuilt = store.reindex(progress=lambda done, total: seen.append((done, total)))
    assert rebuilt["fulltext_entries"] == stats.fulltext_entries and rebuilt["skipped"] == []
    assert seen and seen[-1] == (stats.documents, stats.documents)
    hits = store.search("unsafe", 3)
    assert hits

    class Enough(Exception):
        pass

    def stop(done: int, total: int) -> None:
        raise Enough

    with pytest.raises(Enough):
        store.reindex(progress=stop)
    # Stopped early, the indexes are as they were, through later writes.
    store.ingest(b"Figs ripen in summer.", id="figs")
    assert [(h.doc, h.edus) for h in store.search("unsafe", 3)] == [(h.doc, h.edus) for h in hits]
    assert len(store.search("summer", 3)) == 1
    assert store.check().ok


def test_reopening_keeps_everything_and_a_closed_store_refuses(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = edudb.open(path)
    db.ingest(MARKDOWN, id="trips")
    db.add_turn("chat", "Remember the fjord cabin.")
    before = (db.docs(), db.edus("trips"), db.tree("trips"))
    db.close()
    db.close()  # twice is fine
    with pytest.raises(edudb.UserError, match="closed"):
        db.docs()
    with edudb.open(path, create=False) as again:
        assert (again.docs(), again.edus("trips"), again.tree("trips")) == before
        assert again.sessions()[0].turns == 1
        assert not again.served
    with pytest.raises(edudb.UserError, match="no edudb store"):
        edudb.open(tmp_path / "absent.db", create=False)


def test_a_store_held_elsewhere_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with edudb.open(path):
        with pytest.raises(edudb.StoreBusy, match="locked"):
            edudb.open(path)
        with pytest.raises(edudb.StoreBusy):
            edudb.open(path, busy_timeout=0.2)
    with pytest.raises(edudb.UserError, match="busy_timeout"):
        edudb.open(path, busy_timeout=-1)


def test_embedders_are_chosen_and_recorded(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "h.db", embedder="hashed", dimension=64) as db:
        db.ingest(MARKDOWN, id="trips")
        assert db.query("SELECT SPANS FROM * SEED NEAR($q) BUDGET 64 TOKENS", q="ramen").items
    with pytest.raises(edudb.UserError, match="embedder"):
        edudb.open(tmp_path / "h.db", embedder="hashed", dimension=32)
    with pytest.raises(edudb.UserError, match="unknown embedder"):
        edudb.open(tmp_path / "x.db", embedder="word2vec")
    with pytest.raises(edudb.UserError, match="model"):
        edudb.open(tmp_path / "x.db", embedder="local")
    with pytest.raises(edudb.UserError, match="embed_url"):
        edudb.open(tmp_path / "x.db", embedder="openai")


def test_a_damaged_index_is_corrupt_and_reindex_repairs_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with edudb.open(path) as db:
        db.ingest(DEMO)
        expected = db.search("unsafe operations", 5)
    # The middle of the full-text index's fast-field file overwritten.
    [fast] = [p for p in (path / "fulltext").iterdir() if p.suffix == ".fast"]
    data = bytearray(fast.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 200] = b"\x5a" * 200
    fast.write_bytes(bytes(data))
    with edudb.open(path) as db:
        with pytest.raises(edudb.Corrupt, match="reindex"):
            db.search("unsafe operations", 5)
        db.reindex()
        assert db.search("unsafe operations", 5) == expected


def test_arguments_out_of_range_are_user_errors(store: edudb.Store) -> None:
    doc = store.docs()[0].id
    for call in (
        lambda: store.edus(doc, -1),
        lambda: store.edus(doc, 0, 2**40),
        lambda: store.dag(doc, level=70000),
        lambda: store.search("unsafe", limit=-1),
        lambda: store.context("s", budget=-5),
        lambda: store.edus(doc, True),
    ):
        with pytest.raises(edudb.UserError, match="whole number"):
            call()
    with pytest.raises(edudb.UserError, match="too large"):
        store.query(SPANS, q="x", budget=10**400)


def test_calls_release_the_gil(tmp_path: Path) -> None:
    """Another Python thread runs while a plain call (not the ingest of
    paths, which waits in a loop of its own) works in Rust."""
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    paragraphs = b"".join(b"The oven number %d bakes loaf %d in the morning.\n\n" % (i, i) for i in range(20000))
    with edudb.open(tmp_path / "s.db") as db:
        counter.start()
        before = ticks
        db.ingest(paragraphs, id="bakery", format="text")
        during = ticks - before
        stop.set()
        counter.join()
    assert during > 1000, during


def test_documents_lost_to_damage_are_named_until_stored_again_or_removed(tmp_path: Path) -> None:
    import shutil

    path = tmp_path / "s.db"
    with edudb.open(path) as db:
        db.ingest(MARKDOWN, id="kept")
    shutil.copytree(path / "sled", tmp_path / "older")
    with edudb.open(path) as db:
        db.ingest(b"Zebras gallop at dawn.", id="zebras")
        db.ingest(b"Herons stand in the river.", id="herons")
    # The older copy of the store put back under the newer index: the
    # changes after it are lost, as after damage to sled's log.
    shutil.rmtree(path / "sled")
    shutil.copytree(tmp_path / "older", path / "sled")
    with edudb.open(path) as db:
        assert [d.id for d in db.docs()] == ["kept"]
        report = db.check()
        assert not report.ok
        assert sorted(d.doc for d in report.damaged) == ["herons", "zebras"]
        assert all("lost to damage" in d.problem for d in report.damaged)
        db.ingest(b"Zebras gallop at dawn.", id="zebras")
        db.remove("herons")
        assert db.check().ok
        with pytest.raises(edudb.NotFound):
            db.remove("herons")


def test_threads_share_a_store_and_close_ends_their_calls(store: edudb.Store) -> None:
    failures: list = []
    closed: list = []

    def read() -> None:
        try:
            for _ in range(20):
                assert store.query(SPANS, q="unsafe operations", budget=64).items
        except Exception as error:  # noqa: BLE001 - collected for the assertion below
            failures.append(error)

    def write() -> None:
        try:
            for i in range(8):
                store.add_turn("chat", f"Turn {i} is about unsafe code.")
        except Exception as error:  # noqa: BLE001
            failures.append(error)

    threads = [threading.Thread(target=read) for _ in range(3)] + [threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "no call deadlocked"
    assert failures == []
    assert store.sessions()[0].turns == 8

    def keep_reading() -> None:
        while True:
            try:
                store.search("unsafe", 3)
            except edudb.UserError as error:
                closed.append(str(error))
                return

    readers = [threading.Thread(target=keep_reading) for _ in range(2)]
    for reader in readers:
        reader.start()
    store.close()
    for reader in readers:
        reader.join(timeout=60)
    assert not any(reader.is_alive() for reader in readers)
    assert closed == ["the store is closed"] * 2


def one_page_pdf(lines: list) -> bytes:
    """A one-page PDF with ``lines`` of Helvetica text, its cross-reference
    table correct."""
    content = "BT /F1 12 Tf 72 700 Td 14 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.7\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def test_a_pdf_goes_in_by_its_bytes_and_its_spans_carry_pages(tmp_path: Path) -> None:
    pdf = one_page_pdf(["Moss grows on the north side of old trees.", "Ferns like the deep shade."])
    with edudb.open(tmp_path / "db") as db:
        db.ingest(pdf, id="moss")
        edus = db.edus("moss")
        assert [e.text for e in edus] == [
            "Moss grows on the north side of old trees.",
            "Ferns like the deep shade.",
        ]
        assert all(e.pages == (1, 1) for e in edus)
        layout = db.pages("moss")
        assert layout is not None and len(layout["pages"]) == 1
        lines = layout["lines"]
        # One line per sentence, each where its EDU's bytes are.
        assert [(line["start"], line["end"]) for line in lines] == [tuple(e.bytes) for e in edus]
        assert all(line["page"] == 0 for line in lines)
        db.ingest(b"Plain words, no pages.", id="plain", format="text")
        assert db.pages("plain") is None
        picked = db.query("SELECT SPANS FROM * WHERE page = 1 SEED BM25('ferns') BUDGET 50 TOKENS")
        assert picked.items and all(item.pages == (1, 1) for item in picked.items)
        assert all(item.boxes is None for item in picked.items)
        boxed = db.query("SELECT SPANS FROM * SEED BM25('ferns') BUDGET 50 TOKENS WITH BOXES")
        assert boxed.items
        for item in boxed.items:
            assert item.boxes, item
            for box in item.boxes:
                assert isinstance(box, edudb.PageBox)
                assert box.page == 1 and box.x0 < box.x1 and box.y0 < box.y1
        with pytest.raises(edudb.UserError, match="not a readable PDF|PDF"):
            db.ingest(b"%PDF-1.7\nnot really", id="broken")
        assert "broken" not in {d.id for d in db.docs()}


def _open_after_fork(path: str, answers: multiprocessing.queues.Queue) -> None:
    """In a child: opens the store at `path`, and says what happened."""
    try:
        with edudb.open(path) as db:
            answers.put(f"opened, {len(db.docs())} documents")
    except edudb.UserError as err:
        answers.put(f"refused: {err}")


def _use_inherited(db: edudb.Store, answers: multiprocessing.queues.Queue) -> None:
    """In a forked child: calls the store the parent opened, then closes it."""
    try:
        db.docs()
        answers.put("answered")
    except edudb.UserError as err:
        answers.put(f"refused: {err}")
    db.close()


def _outcome(context: str, target: object, *args: object) -> str:
    """Runs `target(*args, answers)` in a child process started by the
    start method `context`; what it put on the queue (it must not hang)."""
    ctx = multiprocessing.get_context(context)
    answers = ctx.Queue()
    child = ctx.Process(target=target, args=(*args, answers))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
        pytest.fail(f"the {context} child hung")
    assert child.exitcode == 0
    return str(answers.get(timeout=10))


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork here"
)
def test_a_forked_child_is_refused_with_the_way_out_and_spawn_works(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    with edudb.open(path) as db:
        db.ingest(MARKDOWN, id="trips", format="markdown")
        # A copy of an open store in a forked child refuses its calls, and
        # closing it there neither hangs nor closes the parent's.
        said = _outcome("fork", _use_inherited, db)
        assert said.startswith("refused") and "'spawn'" in said, said
        assert [d.id for d in db.docs()] == ["trips"]
    # Opened and closed before the fork: the child still cannot open one.
    said = _outcome("fork", _open_after_fork, path)
    assert said.startswith("refused") and "forkserver" in said, said
    # The way out the error names.
    assert _outcome("spawn", _open_after_fork, path) == "opened, 1 documents"


def _wait_for(release: multiprocessing.synchronize.Event) -> None:
    """In a forked child: waits until told to end."""
    release.wait(120)


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork here"
)
def test_a_child_forked_while_the_store_is_open_does_not_keep_it_locked(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.db")
    ctx = multiprocessing.get_context("fork")
    release = ctx.Event()
    with edudb.open(path) as db:
        db.ingest(MARKDOWN, id="trips", format="markdown")
        child = ctx.Process(target=_wait_for, args=(release,))
        child.start()
    try:
        # The parent reopens the store while the child lives.
        with edudb.open(path) as db:
            assert [d.id for d in db.docs()] == ["trips"]
    finally:
        release.set()
        child.join(60)
    assert child.exitcode == 0


def test_a_turn_s_metadata_is_kept_and_filtered_on_in_its_session(tmp_path: Path) -> None:
    with edudb.open(tmp_path / "s.db") as db:
        first = db.add_turn("trip", "We fly to Sapporo on Monday.", metadata={"speaker": "Caroline", "day": 1})
        db.add_turn("trip", "Then we take the train to Sapporo.", metadata={"speaker": "Mel"})
        db.add_turn("trip", "Sapporo has a snow festival.")
        assert db.metadata(first.doc) == {"speaker": "Caroline", "day": 1}
        hits = db.query(
            "SELECT SPANS FROM session('trip') WHERE meta.speaker = 'Mel' SEED BM25($q) BUDGET 200 TOKENS",
            q="Sapporo",
        )
        assert [item.doc for item in hits.items] == ["@session/trip/000001"]
        with pytest.raises(edudb.UserError, match="speaker"):
            db.add_turn("trip", "Nested?", metadata={"speaker": {"name": "Mel"}})


def test_metadata_is_given_at_ingest_filtered_on_and_changed_in_place(tmp_path: Path) -> None:
    one, two = sorted(DEMO.glob("*.md"))[:2]
    with edudb.open(tmp_path / "s.db") as db:
        db.ingest(one, metadata={"company": "Boeing", "year": 2019, "tags": ["risk"]})
        db.ingest(two, metadata={"company": "Boeing", "year": 2021, "filed": "2021-02-03"})
        db.ingest(MARKDOWN, id="trips", format="markdown", metadata={"company": "Apple"})
        assert [d.id for d in db.docs(where="meta.company = 'Boeing' AND meta.year >= 2020")] == [two.stem]
        assert [d.id for d in db.docs(where="meta.tags CONTAINS 'risk'")] == [one.stem]
        by_id = {d.id: d.metadata for d in db.docs()}
        assert by_id[one.stem] == {"company": "Boeing", "year": 2019, "tags": ["risk"]}
        assert by_id["trips"] == {"company": "Apple"}
        changed = db.update_metadata("trips", set={"year": 2022}, unset=["company"])
        assert changed == {"year": 2022} == db.metadata("trips")
        hits = db.query(
            "SELECT SPANS FROM * WHERE meta.year >= 2022 SEED BM25($q) BUDGET 200 TOKENS", q="snow festival"
        )
        assert hits.items and {item.doc for item in hits.items} == {"trips"}
        with pytest.raises(edudb.QueryError) as refused:
            db.docs(where="meta.year >")
        assert refused.value.column == 12
        with pytest.raises(edudb.UserError, match="nested"):
            db.ingest(MARKDOWN, id="bad", metadata={"nested": {"a": 1}})
        with pytest.raises(edudb.UserError):
            db.update_metadata("nope", set={"a": 1})
