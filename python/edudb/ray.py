"""Distributed ingest on a Ray cluster into a shard set.

Needs Ray Data (``pip install edudb[ray]``)::

    import edudb.ray

    report = edudb.ray.ingest(["filings/"], "corpus.edudb", shards=4)

Documents are independent units (each has its own tree, DAG and vectors),
so the expensive, pure part of ingest (:class:`edudb.Preparer`) runs in a
Ray Data pipeline's workers, as many as the cluster gives (CPU workers, or
GPU actors with ``num_gpus`` for the local model's vectors and DAG), each
with its preparer built once; each worker hands every prepared document
to the writer of its store itself (the driver sees only ids and errors):
one Ray actor per store of the shard set, writing each call's documents
with :meth:`edudb.Store.write_prepared`, whole or not at all. The store
of a document is :func:`edudb.shard_of` of its id, so a query over the
set (``edudb.open(path)``) finds every document where any writer would
have put it.

Faults: a preparing worker that dies is restarted and its batch prepared
again, and a writer that dies is restarted on its store and its batch
written again (a document written twice replaces itself), so a worker
lost mid-ingest loses and duplicates nothing. A source whose content is
bad (not a document, a PDF without text) is reported in
:attr:`DistributedIngest.failures` and written nowhere; the rest go on.
So is a source whose preparing worker dies every time it is prepared
(killed for memory, say): each source is prepared at most ``1 +
max_retries`` times, counted by a small actor beside the pipeline, so one
such source cannot keep the pipeline restarting workers forever.
"""

from __future__ import annotations

import os as _os
import time as _time
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import ray  # type: ignore[import-not-found, unused-ignore]
import ray.data  # type: ignore[import-not-found, unused-ignore]

import edudb
from edudb import _edudb

PathLike = Union[str, "_os.PathLike[str]"]
Source = Union[PathLike, Tuple[str, bytes]]
"""A file or a directory (its files, as :meth:`edudb.Store.ingest` reads
them), or one document as ``(id, bytes)``."""

__all__ = ["ingest", "DistributedIngest", "Failure", "Source"]


@dataclass(frozen=True)
class Failure:
    """A source that was not written, and why."""

    source: str
    message: str


@dataclass(frozen=True)
class DistributedIngest:
    """What a distributed ingest wrote: the documents' ids (sorted), the
    sources it could not prepare, the shard set's size and how long it
    took."""

    documents: List[str]
    failures: List[Failure]
    shards: int
    seconds: float


_ATTEMPTS_ACTOR_PREFIX = "edudb-attempts-"
"""The name of each ingest's :class:`_Attempts` actor starts with this."""


class _Attempts:
    """The preparations of each source that began and did not end (their
    worker died at it), and which worker process is at each: one Ray actor
    per ingest, beside its pipeline, so that a count outlives the workers
    Ray Data restarts."""

    def __init__(self) -> None:
        self._begun: Dict[str, int] = {}
        self._workers: Dict[str, int] = {}

    def begin(self, doc: str, pid: int, tries: int) -> bool:
        """Records that process ``pid`` prepares ``doc``, or returns False
        when ``doc``'s workers died at it on each of its ``tries`` (then it
        is not to be prepared)."""
        if self._begun.get(doc, 0) >= tries:
            return False
        self._begun[doc] = self._begun.get(doc, 0) + 1
        self._workers[doc] = pid
        return True

    def end(self, doc: str) -> None:
        """Records that an attempt at ``doc`` ended in its worker (prepared
        or refused), not with the worker's death."""
        self._begun[doc] -= 1
        self._workers.pop(doc, None)

    def in_flight(self) -> Dict[str, Tuple[int, int]]:
        """Each source whose latest attempt began and has not ended: its
        attempt and the process at it (a dead one's, until the next)."""
        return {doc: (self._begun[doc], pid) for doc, pid in self._workers.items()}


class _Prepare:
    """A Ray Data worker: one :class:`edudb.Preparer`, built once, preparing
    a batch of sources and handing the prepared documents to the writers of
    their stores itself (the driver never holds them); a batch is done once
    every writer it called has written its part. A source with bad content
    gives its error instead, and is written nowhere; so does one whose
    workers died at it on each of its tries (``attempts``, the ingest's
    :class:`_Attempts`)."""

    def __init__(self, preparer: Mapping[str, Any], options: Mapping[str, Any], writers: Sequence[Any],
                 attempts: Any, tries: int) -> None:
        self._preparer = edudb.Preparer(**preparer)
        self._options = dict(options)
        self._writers = list(writers)
        self._attempts = attempts
        self._tries = tries

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        by_store: Dict[int, List[bytes]] = {}
        errors: List[str] = []
        for doc, shard, path, data in zip(batch["id"], batch["shard"], batch["path"], batch["data"]):
            source: Union[str, bytes] = str(path) if path else bytes(data)
            if not ray.get(self._attempts.begin.remote(str(doc), _os.getpid(), self._tries)):
                errors.append(f"its preparing worker died each of the {self._tries} times it was prepared "
                              "(killed, or out of memory); not prepared again")
                continue
            try:
                prepared = self._preparer.prepare(source, id=str(doc), **self._options)
                by_store.setdefault(int(shard), []).append(prepared)
                errors.append("")
            except edudb.UserError as err:
                errors.append(str(err))
            ray.get(self._attempts.end.remote(str(doc)))
        ray.get([self._writers[shard].write.remote(docs) for shard, docs in by_store.items()])
        return {"id": list(batch["id"]), "error": errors}


class _ShardWriter:
    """The one writer of a shard set's store: writes batches of prepared
    documents, each whole or not at all. Run as a Ray actor that Ray
    restarts (opening the store again) when its process dies, its
    unfinished batch retried."""

    def __init__(self, path: str) -> None:
        self._store = edudb.open(path, create=False, busy_timeout=30.0)

    def write(self, docs: Sequence[bytes]) -> List[str]:
        return [doc.id for doc in self._store.write_prepared(docs)]

    def close(self) -> None:
        self._store.close()


def ingest(
    sources: Iterable[Source],
    into: PathLike,
    *,
    shards: Optional[int] = None,
    embedder: Optional[str] = None,
    model: Optional[PathLike] = None,
    dimension: Optional[int] = None,
    format: Optional[str] = None,  # noqa: A002 - Store.ingest's name for it
    structurer: Optional[str] = None,
    ip_maker: Optional[str] = None,
    batch_size: int = 16,
    concurrency: Optional[int] = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    max_retries: int = 3,
    progress: Optional[Callable[[int, int], object]] = None,
) -> DistributedIngest:
    """Prepares ``sources`` on the Ray cluster this process is connected
    to (``ray.init``; when it is not, the one ``ray.init()`` finds: the
    address in ``RAY_ADDRESS``, else a cluster started here) and writes
    each document into its store of the shard set at ``into``: an
    existing set, or a new one of ``shards`` stores (made with
    ``embedder``, ``model`` and ``dimension``, as :func:`edudb.open` makes
    a store; an existing set's stores must have been made with the
    embedder given here).

    ``format``, ``structurer`` and ``ip_maker`` are
    :meth:`edudb.Store.ingest`'s. ``concurrency`` preparing workers (the
    cluster's CPUs divided by ``num_cpus`` when None), each asking
    ``num_cpus`` CPUs and ``num_gpus`` GPUs; ``batch_size`` documents per
    preparing call, whose documents go to their stores in one write per
    store. A lost preparing worker is replaced and its batch prepared
    again (Ray Data's fault tolerance), but no source is prepared more
    than ``1 + max_retries`` times: one whose worker died at it each time
    is a failure. A lost writer is restarted and its batch written again,
    up to ``max_retries`` times. ``progress(done, total)`` is called as
    documents are written.
    The shard set is not held open while this runs (its writers hold its
    stores, and close them before it returns).
    """
    started = _time.monotonic()
    if not ray.is_initialized():
        ray.init()
    # Workers run in directories of their own: every path is absolute.
    into = _os.path.abspath(into)
    if shards is not None:
        edudb.open(into, shards=shards, embedder=embedder, model=model, dimension=dimension).close()
    stores = [str(path) for path in _edudb.shard_stores(into)]
    rows = _rows(sources, len(stores))
    preparer = {"embedder": embedder, "model": model, "dimension": dimension}
    options = {"format": format, "structurer": structurer, "ip_maker": ip_maker}
    workers = concurrency or max(1, int(ray.cluster_resources().get("CPU", 1) // max(num_cpus, 0.01)))
    writer = ray.remote(num_cpus=0, max_restarts=max_retries, max_task_retries=max_retries)(_ShardWriter)
    writers = [writer.remote(path) for path in stores]
    tries = 1 + max_retries
    attempts = ray.remote(num_cpus=0)(_Attempts).options(name=_ATTEMPTS_ACTOR_PREFIX + _uuid.uuid4().hex).remote()
    written: List[str] = []
    failures: List[Failure] = []
    try:
        # Ray Data restarts a preparing worker whose process dies and gives
        # its batch to a worker again, without limit (its default for actor
        # pools); the batch's documents are then written again, each
        # replacing itself. The attempts actor is what bounds the retries.
        # Blocks enough for every worker to have batches of its own.
        blocks = max(1, min(len(rows), 4 * workers))
        outcomes = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
            _Prepare,
            fn_constructor_kwargs={"preparer": preparer, "options": options, "writers": writers,
                                   "attempts": attempts, "tries": tries},
            batch_size=batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=num_cpus,
            num_gpus=num_gpus,
        )
        for batch in outcomes.iter_batches(batch_size=batch_size, batch_format="numpy"):
            for doc, error in zip(batch["id"], batch["error"]):
                if error:
                    failures.append(Failure(str(doc), str(error)))
                else:
                    written.append(str(doc))
            if progress is not None:
                progress(len(written), len(rows) - len(failures))
    finally:
        ray.get([w.close.remote() for w in writers])
        for w in writers:
            ray.kill(w)
        ray.kill(attempts)
    return DistributedIngest(
        documents=sorted(set(written)),
        failures=sorted(failures, key=lambda f: f.source),
        shards=len(stores),
        seconds=_time.monotonic() - started,
    )


def _rows(sources: Iterable[Source], shards: int) -> List[Dict[str, Any]]:
    """One row per document: its id, its file (or its bytes) and its store;
    an id given twice is refused before anything is prepared."""
    rows: List[Dict[str, Any]] = []
    paths: List[str] = []
    for source in sources:
        if isinstance(source, tuple):
            doc, data = source
            rows.append({"id": str(doc), "path": "", "data": bytes(data)})
        else:
            paths.append(_os.fspath(source))
    for doc, path in _edudb.expand_sources(paths) if paths else []:
        rows.append({"id": doc, "path": _os.path.abspath(path), "data": b""})
    seen = set()
    for row in rows:
        if row["id"] in seen:
            raise edudb.UserError(f"two sources have the id {row['id']!r}: each document needs its own")
        seen.add(row["id"])
        row["shard"] = edudb.shard_of(row["id"], shards)
    return rows
