"""Ctrl-C during a long ingest cancels it through the library's cancel
token: the call raises KeyboardInterrupt promptly, and the store keeps
whole documents only."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import edudb
from conftest import RFCS, start_server, stop_server


@pytest.mark.parametrize("served", [False, True], ids=["in-process", "served"])
def test_an_interrupted_ingest_stops_and_keeps_whole_documents(tmp_path: Path, served: bool) -> None:
    """In-process the ingest's cancel token is cancelled; served, the
    client cancels the server's running job."""
    if not RFCS.is_dir():
        pytest.fail(f"{RFCS} is missing (../shared/data beside the repository)")
    ingesting = threading.Event()
    interrupted_at: list = []

    def interrupt_while_ingesting(signum: int, frame: object) -> None:
        # Only the ingest may be interrupted: a late signal is ignored
        # rather than stopping the test run.
        if ingesting.is_set():
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt_while_ingesting)
    try:

        def send() -> None:
            interrupted_at.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

        server = start_server(tmp_path / "s.db") if served else None
        try:
            opened = edudb.connect(server.url) if server else edudb.open(tmp_path / "s.db")
            with opened as db:
                timer = threading.Timer(0.5, send)
                ingesting.set()
                timer.start()
                with pytest.raises(KeyboardInterrupt):
                    db.ingest(RFCS)
                stopped = time.monotonic()
                ingesting.clear()
                timer.join()
                assert stopped - interrupted_at[0] < 5.0, "the ingest stopped promptly"
                written = db.docs()
                assert db.check().ok
                for document in written:
                    edus = db.edus(document.id)
                    assert len(edus) == document.edus
                # The rest goes in when asked again.
                total = len(db.ingest(RFCS).documents)
                assert len(written) < total == len(db.docs())
        finally:
            if server:
                stop_server(server)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_progress_is_reported_and_an_exception_from_it_cancels(tmp_path: Path) -> None:
    seen: list = []
    with edudb.open(tmp_path / "s.db") as db:
        report = db.ingest(RFCS, progress=lambda done, total: seen.append((done, total)))
        assert len(seen) >= 2
        totals = {total for _, total in seen}
        assert len(totals) == 1 and totals.pop() > 0
        dones = [done for done, _ in seen]
        assert dones == sorted(dones) and dones[-1] == seen[-1][1], "ends at the total"
        assert len(report.documents) == len(db.docs())

    class Enough(Exception):
        pass

    def stop_early(done: int, total: int) -> None:
        if done > 0:
            raise Enough(done)

    with edudb.open(tmp_path / "t.db") as db:
        with pytest.raises(Enough):
            db.ingest(RFCS, progress=stop_early)
        assert 0 < len(db.docs()) < len(report.documents)
        assert db.check().ok
