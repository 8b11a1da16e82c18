"""Fixtures of the Python package's tests: stores in temporary
directories, the demo corpus, and a real `edudb serve` process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

import edudb

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "src" / "demo"
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"


def edudb_binary() -> Path:
    """The `edudb` executable the served-mode tests start (EDUDB_BIN, else
    the release build)."""
    path = Path(os.environ.get("EDUDB_BIN", ROOT / "target" / "release" / "edudb"))
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `cargo build --release` or set EDUDB_BIN")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[edudb.Store]:
    """A store holding the demo corpus (five RFCs and a README)."""
    with edudb.open(tmp_path / "demo.db") as db:
        db.ingest(DEMO)
        yield db


class Server(NamedTuple):
    """A running `edudb serve`: its store, TCP URL and socket."""

    path: Path
    url: str
    socket: Path
    process: subprocess.Popen


def start_server(path: Path, *args: str, env: dict | None = None) -> Server:
    """Starts `edudb serve` on the store at `path` (created if absent) on a
    free loopback port; returns once it listens."""
    edudb.open(path).close()
    process = subprocess.Popen(
        [str(edudb_binary()), "--db", str(path), "serve", "--listen", "127.0.0.1:0", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    line = process.stdout.readline()
    if not line:
        process.wait(timeout=30)
        pytest.fail(f"edudb serve did not start: {process.stderr.read()}")
    announced = json.loads(line)
    return Server(path, f"http://{announced['listen']}", Path(announced["socket"]), process)


def stop_server(server: Server) -> None:
    """SIGTERM; the server must exit cleanly and remove its socket."""
    server.process.send_signal(signal.SIGTERM)
    _, stderr = server.process.communicate(timeout=60)
    assert server.process.returncode == 0, stderr
    assert not server.socket.exists()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """`edudb serve` on a store holding the demo corpus."""
    path = tmp_path / "served.db"
    with edudb.open(path) as db:
        db.ingest(DEMO)
    running = start_server(path)
    try:
        yield running
    finally:
        stop_server(running)
