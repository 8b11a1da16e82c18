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
from conftest import RFCS


def test_an_interrupted_ingest_stops_and_keeps_whole_documents(tmp_path: Path) -> None:
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

        with edudb.open(tmp_path / "s.db") as db:
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
        signal.signal(signal.SIGINT, previous)
