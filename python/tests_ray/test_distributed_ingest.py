"""`edudb.ray` on a real Ray cluster on this machine: a head and a second
node started with `ray start` (one CPU each), the RFCs and 2WikiMultihopQA
passages prepared by Ray Data workers and written by one actor per store
into shard sets of 2 and 4 stores, answering every statement as one store
ingested directly does; a preparing worker and a writer killed
mid-ingest, after which nothing is lost or duplicated; and a source whose
worker is killed each time it is prepared, which ends as a failure."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest

# A loopback cluster of the tests' own, without token authentication: Ray
# reads the mode when imported, and would turn tokens on by itself if a
# token file of another cluster (~/.ray/auth_token) were lying around,
# which its second node then does not present.
os.environ["RAY_AUTH_MODE"] = "disabled"
import ray  # noqa: E402

import edudb
import edudb.ray

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
NOTE = ("inline-note", b"A note given as bytes, about lifetimes.")
RFCS = 60
PASSAGES = 600
STATEMENTS = [
    "SELECT SPANS FROM * SEED BM25($q) BUDGET 256 TOKENS",
    "SELECT SPANS FROM * SEED BM25($q) TRAVERSE BUDGET 256 TOKENS",
    "SELECT SPANS FROM * SEED BM25($q) PROPAGATE BUDGET 256 TOKENS",
    "SELECT NODES FROM * SEED BM25($q) LIMIT 8",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def cluster() -> Iterator[str]:
    """A local Ray cluster of two nodes: a head and a worker node, each of
    one CPU; stopped at the end."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    temp = tempfile.mkdtemp(prefix="/tmp/edray")  # socket paths must stay short
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=1", "--disable-usage-stats"]
    try:
        subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--include-dashboard=false",
                        f"--temp-dir={temp}", *common], check=True, env=env, timeout=180,
                       stdout=subprocess.DEVNULL)
        subprocess.run([ray_cli, "start", f"--address=127.0.0.1:{port}", *common], check=True, env=env,
                       timeout=180, stdout=subprocess.DEVNULL)
        ray.init(address=f"127.0.0.1:{port}", logging_level="ERROR", log_to_driver=False)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        yield f"127.0.0.1:{port}"
    finally:
        ray.shutdown()
        subprocess.run([ray_cli, "stop", "--force"], env=env, timeout=120, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    """60 RFCs and 600 2WikiMultihopQA passages, each a file."""
    files = sorted((SHARED / "rust_rfcs" / "text").glob("*.md"))[:RFCS]
    passages = json.loads((SHARED / "wiki2" / "hipporag_2wikimultihopqa_corpus.json").read_text())
    folder = tmp_path_factory.mktemp("wiki2")
    for i, passage in enumerate(passages[:PASSAGES]):
        path = folder / f"w{i:05}.md"
        path.write_text(f"# {passage['title']}\n\n{passage['text']}\n")
        files.append(path)
    return files


def questions() -> List[str]:
    """Questions over both halves: each passage's title asked about, and
    what RFCs discuss."""
    passages = json.loads((SHARED / "wiki2" / "hipporag_2wikimultihopqa_corpus.json").read_text())
    titles = [f"Who or what is {p['title']}?" for p in passages[:PASSAGES:40]]
    return titles + ["lifetime elision in impls", "drawbacks of the new syntax", "unsafe trait implementations",
                     "macro hygiene and scoping", "stability of the standard library"]


def answers(db: edudb.Store) -> list:
    return [[(i.doc, i.edus, i.score) for i in db.query(s, q=q).items] for s in STATEMENTS for q in questions()]


@pytest.fixture(scope="session")
def one_store(tmp_path_factory: pytest.TempPathFactory, corpus: List[Path]) -> Path:
    path = tmp_path_factory.mktemp("one") / "one.edudb"
    with edudb.open(path) as db:
        db.ingest(corpus)
        db.write_prepared([edudb.Preparer().prepare(NOTE[1], id=NOTE[0])])
    return path


@pytest.mark.parametrize("shards", [2, 4])
def test_a_distributed_ingest_answers_as_one_store(cluster: str, corpus: List[Path], one_store: Path,
                                                   tmp_path: Path, shards: int) -> None:
    bad = (tmp_path / "empty.pdf", b"%PDF-1.7 nothing else")
    Path(bad[0]).write_bytes(bad[1])
    report = edudb.ray.ingest([*corpus, NOTE], tmp_path / "set",
                              shards=shards, batch_size=16)
    assert report.shards == shards
    assert len(report.documents) == len(corpus) + 1 == len(set(report.documents))
    assert report.failures == []
    failed = edudb.ray.ingest([bad[0]], tmp_path / "set")
    assert [f.source for f in failed.failures] == ["empty"] and failed.documents == []
    with edudb.open(tmp_path / "set") as sharded, edudb.open(one_store) as one:
        assert sharded.docs() == one.docs()
        assert answers(sharded) == answers(one)
        assert sharded.check().ok
    for i, store in enumerate(sorted((tmp_path / "set").glob("shard-*"))):
        with edudb.open(store, create=False) as db:
            assert all(edudb.shard_of(d.id, shards) == i for d in db.docs())


def ray_processes(title: str) -> List[int]:
    """The processes whose command line (a Ray worker's names what it
    runs) holds `title`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and title in (entry / "cmdline").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_workers_killed_mid_ingest_lose_and_duplicate_nothing(cluster: str, corpus: List[Path],
                                                             tmp_path: Path) -> None:
    written: List[int] = []
    killed: List[str] = []

    def kill_when_under_way() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (written and written[-1] >= 64):
            time.sleep(0.05)
        for title in ["MapBatches(_Prepare)", "_ShardWriter"]:
            pids = ray_processes(title)
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(title)

    killer = threading.Thread(target=kill_when_under_way)
    killer.start()
    report = edudb.ray.ingest(corpus, tmp_path / "set", shards=2, batch_size=8,
                              progress=lambda done, total: written.append(done))
    killer.join()
    assert killed == ["MapBatches(_Prepare)", "_ShardWriter"], killed
    assert report.documents == sorted(p.stem for p in corpus)
    assert report.failures == []
    with edudb.open(tmp_path / "set") as db:
        assert [d.id for d in db.docs()] == report.documents
        assert db.check().ok


def test_a_source_whose_worker_dies_each_time_is_a_failure_not_an_endless_retry(cluster: str, corpus: List[Path],
                                                                               tmp_path: Path) -> None:
    # A source large enough to be watched at: every time a worker begins
    # preparing it, that worker is killed (as the kernel kills a process
    # out of memory), and the ingest must still end.
    poison = ("poison", (corpus[0].read_bytes() + b"\n\n") * 200)
    kills: List[int] = []
    done = threading.Event()

    def kill_each_attempt() -> None:
        deadline = time.monotonic() + 240
        while not done.is_set() and time.monotonic() < deadline:
            for name in ray.util.list_named_actors():
                if not name.startswith(edudb.ray._ATTEMPTS_ACTOR_PREFIX):
                    continue
                try:  # an earlier ingest's, being killed, has no answer
                    in_flight = ray.get(ray.get_actor(name).in_flight.remote(), timeout=5)
                except (ValueError, ray.exceptions.RayError):
                    continue
                attempt, pid = in_flight.get(poison[0], (0, 0))
                if attempt > len(kills):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    kills.append(pid)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_each_attempt)
    killer.start()
    try:
        report = edudb.ray.ingest([*corpus[:6], poison], tmp_path / "set", shards=2, batch_size=4,
                                  max_retries=1)
    finally:
        done.set()
        killer.join()
    assert len(kills) == 2, kills
    assert [f.source for f in report.failures] == ["poison"], report.failures
    assert "died each of the 2 times" in report.failures[0].message
    assert report.documents == sorted(p.stem for p in corpus[:6])
    with edudb.open(tmp_path / "set") as db:
        assert [d.id for d in db.docs()] == report.documents
        assert db.check().ok


def test_the_readme_ray_example_runs(cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    readme = (ROOT / "README.md").read_text()
    [example] = re.findall(r"```py\n(.*?)```", readme, re.S)
    (tmp_path / "filings").mkdir()
    for path in sorted((SHARED / "rust_rfcs" / "text").glob("*.md"))[:12]:
        (tmp_path / "filings" / path.name).write_text(path.read_text())
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("12 []\n")
    with edudb.open(tmp_path / "corpus") as db:
        assert db.stats().shards == 4 and db.stats().documents == 12
