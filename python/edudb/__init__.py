"""edudb: an embedded document database with EDU coordinates and
structural indexing, from Python.

Open a store in this process with :func:`open`, or use one served by
``edudb serve`` with :func:`connect`; both give a :class:`Store` with the
same methods and the same results::

    import edudb

    with edudb.open("notes.db") as db:
        db.ingest("docs/")                       # files or directories
        result = db.query(
            "SELECT SPANS FROM * SEED BM25($q) BUDGET 256 TOKENS",
            q="unsafe operations",
        )
        for item in result.items:
            print(item.doc, item.edus, item.text)

Calls run without the GIL. Ctrl-C during an ingest cancels it after the
document being written (those written stay whole) and raises
KeyboardInterrupt. Errors are :class:`EdudbError` subclasses:
:class:`QueryError` (with ``line``, ``column``, ``source_line``, ``caret``
and ``hint``), :class:`NotFound`, :class:`UserError`, :class:`StoreBusy`,
:class:`Corrupt` and :class:`InternalError`.
"""

from __future__ import annotations

import datetime as _datetime
import json as _json
import os as _os
import re as _re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _edudb
from ._edudb import (
    Corrupt,
    EdudbError,
    InternalError,
    NotFound,
    QueryError,
    StoreBusy,
    UserError,
    __version__,
)
from .results import (
    AskResult,
    AskStep,
    BackupReport,
    CheckReport,
    Context,
    ContextItem,
    Dag,
    DagEdge,
    DagNode,
    Damaged,
    Document,
    Edu,
    IngestFailure,
    IngestReport,
    Item,
    LlmCost,
    Node,
    PageBox,
    QueryResult,
    SearchHit,
    SessionSummary,
    Stage,
    Stats,
    TurnReceipt,
    VacuumReport,
)

__all__ = [
    "open",
    "connect",
    "shard_of",
    "Store",
    "Preparer",
    "EdudbError",
    "UserError",
    "QueryError",
    "NotFound",
    "StoreBusy",
    "Corrupt",
    "InternalError",
    "AskResult",
    "AskStep",
    "BackupReport",
    "CheckReport",
    "Context",
    "ContextItem",
    "Dag",
    "DagEdge",
    "DagNode",
    "Damaged",
    "Document",
    "Edu",
    "IngestFailure",
    "IngestReport",
    "Item",
    "LlmCost",
    "Node",
    "PageBox",
    "QueryParam",
    "QueryResult",
    "SearchHit",
    "SessionSummary",
    "Stage",
    "Stats",
    "TurnReceipt",
    "VacuumReport",
    "__version__",
]

PathLike = Union[str, "_os.PathLike[str]"]

QueryParam = Union[str, int, float, Sequence[float]]
"""A value bound to a statement's ``$name``: text, a number, or a query
vector (a sequence of numbers, such as a list or a numpy array) for
``NEAR($name)``."""

_U16, _U32, _U63 = 2**16 - 1, 2**32 - 1, 2**63 - 1


def _whole(name: str, value: int, most: int) -> int:
    """``value`` when it is a whole number from 0 to ``most``; otherwise
    :class:`UserError` naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise UserError(f"`{name}` must be a whole number from 0 to {most}, not {value!r}")
    return value


def _maybe_whole(name: str, value: Optional[int], most: int) -> Optional[int]:
    """:func:`_whole`, None passing through."""
    return None if value is None else _whole(name, value, most)

Placement = Union[str, Dict[str, int]]
"""``"auto"``, ``"continue"``, ``"new_topic"``, ``{"topic": N}`` or
``{"fork": N}``."""


def open(  # noqa: A001 - the package's entry point, as sqlite3.connect is its
    path: PathLike,
    *,
    embedder: Optional[str] = None,
    model: Optional[PathLike] = None,
    embed_url: Optional[str] = None,
    embed_model: Optional[str] = None,
    embed_key_env: Optional[str] = None,
    dimension: Optional[int] = None,
    busy_timeout: float = 0.0,
    create: bool = True,
    llm_url: Optional[str] = None,
    llm_model: Optional[str] = None,
    llm_key_env: Optional[str] = None,
    shards: Optional[int] = None,
) -> "Store":
    """Opens the store at ``path`` in this process, creating it unless
    ``create`` is False.

    A directory that is a shard set (several stores as one, each document
    in the store :func:`shard_of` names) opens as one: queries, searches
    and listings run over all its stores, and a document's calls go to its
    store; sessions are refused (they live in one store). ``shards=N``
    creates a shard set of ``N`` new stores at ``path`` (new or empty).

    ``embedder`` picks the vectors of a new store: None or ``"hashed"``
    (built in, no model), ``"local"`` (a sentence-transformers directory
    ``model``, run in-process) or ``"openai"`` (an OpenAI-compatible
    server at ``embed_url`` with ``embed_model``; its key in the
    environment variable ``embed_key_env``). An existing store must be
    opened with the embedder it was built with (None: the recorded one).
    ``busy_timeout`` is how many seconds to wait while another process
    holds the store before raising :class:`StoreBusy`. ``llm_url`` and
    ``llm_model`` name the chat model (any OpenAI-compatible
    ``/v1/chat/completions`` server; its key in the environment variable
    ``llm_key_env``) that :meth:`Store.ask` and the ``"llm"`` structurer
    and IP maker of :meth:`Store.ingest` ask.
    """
    return Store(
        _edudb.Store.open(
            _os.fspath(path),
            embedder=embedder,
            model=None if model is None else _os.fspath(model),
            embed_url=embed_url,
            embed_model=embed_model,
            embed_key_env=embed_key_env,
            dimension=dimension,
            busy_timeout=busy_timeout,
            create=create,
            llm_url=llm_url,
            llm_model=llm_model,
            llm_key_env=llm_key_env,
            shards=None if shards is None else _whole("shards", shards, _U32),
        )
    )


def shard_of(id: str, shards: int) -> int:  # noqa: A002 - a document id, as everywhere
    """Which of a shard set's ``shards`` stores holds document ``id``
    (CRC-32 of its UTF-8 bytes modulo ``shards``): the placement every
    writer of a shard set follows, such as a distributed ingest's."""
    return _edudb.shard_of(id, _whole("shards", shards, _U32))


def connect(target: PathLike, token: Optional[str] = None) -> "Store":
    """Connects to a store served by ``edudb serve``: ``target`` is its
    ``http://HOST:PORT`` URL (or ``HOST:PORT``), the store's directory
    (its server's socket) or a socket path; ``token`` is the server's
    bearer token, if it has one. Raises :class:`UserError` saying what was
    tried when nothing is there or no server answers."""
    return Store(_edudb.Store.connect(_os.fspath(target), token))


class Preparer:
    """Prepares documents apart from any store: reads, analyses, embeds
    and links a document exactly as a store's :meth:`Store.ingest` would,
    and gives its bytes, which any store built with the same embedder
    writes with :meth:`Store.write_prepared`. The expensive part of ingest
    so runs wherever there are cores (a worker process, another machine),
    with no store open.

    The arguments name the embedder (and the chat model of the ``"llm"``
    steps) as :func:`open`'s do; none: the hashed default. A local model
    is loaded once, here."""

    def __init__(
        self,
        *,
        embedder: Optional[str] = None,
        model: Optional[PathLike] = None,
        embed_url: Optional[str] = None,
        embed_model: Optional[str] = None,
        embed_key_env: Optional[str] = None,
        dimension: Optional[int] = None,
        llm_url: Optional[str] = None,
        llm_model: Optional[str] = None,
        llm_key_env: Optional[str] = None,
    ) -> None:
        self._native = _edudb.Preparer(
            embedder=embedder,
            model=None if model is None else _os.fspath(model),
            embed_url=embed_url,
            embed_model=embed_model,
            embed_key_env=embed_key_env,
            dimension=dimension,
            llm_url=llm_url,
            llm_model=llm_model,
            llm_key_env=llm_key_env,
        )

    @property
    def embedder(self) -> str:
        """The embedder's identity; a store writes what this prepares only
        when its vectors are by the same one."""
        return self._native.embedder

    def prepare(
        self,
        source: Union[PathLike, bytes],
        id: Optional[str] = None,
        format: Optional[str] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> bytes:
        """The prepared document of ``source``: a file's path (its id by
        default the file's name without extension, its format from the
        extension or the content, as :meth:`Store.ingest` reads a file) or
        the bytes of one document (``id`` required). ``format``, ``structurer``,
        ``ip_maker`` and ``metadata`` are :meth:`Store.ingest`'s. Bad
        content raises the error ingest would (:class:`UserError`)."""
        metadata_json = None if metadata is None else _json.dumps(dict(metadata))
        if isinstance(source, (bytes, bytearray, memoryview)):
            if id is None:
                raise UserError("preparing bytes needs an id")
            return self._native.prepare(id, bytes(source), format, structurer, ip_maker, metadata_json)
        return self._native.prepare_path(
            _os.fspath(source), id, format, structurer, ip_maker, metadata_json
        )


class Store:
    """A store, open in this process (:func:`open`) or served
    (:func:`connect`). Use it as a context manager, or call
    :meth:`close`, to release it."""

    def __init__(self, native: "_edudb.Store") -> None:
        self._native = native

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the store (an in-process one is flushed and unlocked,
        so another process may open it). Later calls raise
        :class:`UserError`; closing twice does nothing."""
        self._native.close()

    @property
    def served(self) -> bool:
        """True when a server answers this store's calls."""
        return self._native.served

    # Documents

    def ingest(
        self,
        source: Union[PathLike, bytes, Sequence[PathLike]],
        id: Optional[str] = None,
        format: Optional[str] = None,
        progress: Optional[Callable[[int, int], object]] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> IngestReport:
        """Ingests ``source``: a file or directory path (directories
        recursively; a file's id is its name without extension, one under
        a directory its path below it), a list of them, or the bytes of
        one document (``id`` required). ``format``: ``"text"``,
        ``"markdown"``, ``"html"`` or ``"pdf"`` (default: from the
        extension or the content; a PDF by its ``%PDF-`` header). A PDF's
        stored text is the text read from its pages, and its EDUs and
        picks carry ``pages``. A document of an existing id replaces it. A
        file whose content is refused (binary, empty, not UTF-8, a PDF
        that cannot be read) is listed in ``failures`` while the rest of a
        directory or list go in; a single file refused raises its error
        (:class:`UserError`), as bytes do.

        ``progress(done, total)``, in bytes, is called from the calling
        thread as an ingest of paths advances (about every 50 ms, and at
        the end). An exception it raises is raised from ``ingest``; raised
        before the end, it cancels the ingest after the document being
        written, as Ctrl-C does (raised at the end, every document is in).

        ``structurer``: ``"layout"`` (default) or ``"llm"`` (LingoEDU's
        outline from the chat model); ``ip_maker``: ``"bridge"`` (default)
        or ``"llm"`` (information points the chat model writes). A served
        store asks its server's chat model. What the model cost is the
        report's ``llm``.

        ``metadata``: facts every ingested document is given, that
        queries and :meth:`docs` filter on (``WHERE meta.year >= 2020``):
        keys are names; values texts, numbers, booleans, dates
        (``"2020-01-31"``) or lists of texts."""
        metadata_json = None if metadata is None else _json.dumps(dict(metadata))
        if isinstance(source, (bytes, bytearray, memoryview)):
            if id is None:
                raise UserError("ingesting bytes needs an id")
            document = self._native.ingest_bytes(
                id, bytes(source), format, structurer, ip_maker, metadata_json
            )
            return IngestReport([Document.from_json(_json.loads(document))], [], None)
        if isinstance(source, (str, _os.PathLike)):
            paths = [_os.fspath(source)]
        else:
            paths = [_os.fspath(p) for p in source]
        answer = self._native.ingest_paths(
            paths, id, format, progress, structurer, ip_maker, metadata_json
        )
        report = IngestReport.from_json(_json.loads(answer))
        if isinstance(source, (str, _os.PathLike)) and not _os.path.isdir(source) and report.failures:
            # One file asked for and refused: its error, as for bytes.
            failure = report.failures[0]
            raise {"busy": StoreBusy, "internal": InternalError}.get(failure.cls, UserError)(failure.message)
        return report

    def docs(self, where: Optional[str] = None) -> List[Document]:
        """Every document, in id order, each with its ``metadata``; with
        ``where``, those meeting that condition on their metadata, written
        as a query's WHERE (``"meta.company = 'Boeing' AND meta.year >=
        2020"``)."""
        return [Document.from_json(d) for d in self._load(self._native.documents(where))]

    def metadata(self, doc: str) -> Dict[str, Any]:
        """Document ``doc``'s metadata (empty when it has none)."""
        metadata: Dict[str, Any] = self._load(self._native.metadata(doc))["metadata"]
        return metadata

    def update_metadata(
        self, doc: str, set: Optional[Mapping[str, Any]] = None, unset: Sequence[str] = ()
    ) -> Dict[str, Any]:
        """Sets the keys of ``set`` and removes those of ``unset`` in
        document ``doc``'s metadata, in one write, without re-ingesting
        it; returns the metadata as it now is."""
        answer = self._native.update_metadata(doc, _json.dumps(dict(set or {})), list(unset))
        metadata: Dict[str, Any] = self._load(answer)["metadata"]
        return metadata

    def write_prepared(self, docs: Sequence[bytes]) -> List[Document]:
        """Writes documents a :class:`Preparer` made (in this process or
        any other, such as a worker of a distributed ingest) in one atomic
        batch: all of them are written or, on any error, none. Each
        replaces a document of its id, and is the document this store's
        :meth:`ingest` would have written from the same input. Raises
        :class:`UserError` for bytes that are not a prepared document, a
        document made by another embedder than the store's, or an id given
        twice."""
        answer = self._native.write_prepared([bytes(d) for d in docs])
        return [Document.from_json(d) for d in self._load(answer)["documents"]]

    def remove(self, doc: str) -> None:
        """Deletes document ``doc`` completely."""
        self._native.remove(doc)

    def tree(self, doc: str) -> Node:
        """Document ``doc``'s structural tree (its root)."""
        return Node.from_json(self._load(self._native.tree(doc)))

    def pages(self, doc: str) -> Optional[Dict[str, Any]]:
        """Where document ``doc``'s text lies on the pages of the PDF it
        was read from, as ``GET /v1/docs/{id}/pages`` gives it: ``pages``
        (each page's first byte, width and height), ``lines`` (each line's
        ``start`` and ``end`` bytes, its 0-based ``page`` and its ``rect``
        in PDF units)
        and ``source_bytes``; ``None`` for a document not read from a PDF."""
        layout: Optional[Dict[str, Any]] = self._load(self._native.pages(doc))
        return layout

    def edus(self, doc: str, first: Optional[int] = None, last: Optional[int] = None) -> List[Edu]:
        """Document ``doc``'s EDUs ``first`` to ``last`` (both included;
        ``last`` defaults to ``first``), or all of them."""
        first, last = _maybe_whole("first", first, _U32), _maybe_whole("last", last, _U32)
        return [Edu.from_json(e) for e in self._load(self._native.edus(doc, first, last))]

    def dag(self, doc: str, level: Optional[int] = None) -> Dag:
        """Document ``doc``'s weighted DAG of information points, at
        ``level`` or all levels."""
        return Dag.from_json(self._load(self._native.dag(doc, _maybe_whole("level", level, _U16))))

    # Retrieval

    def search(self, text: str, limit: int = 10) -> List[SearchHit]:
        """BM25 search over EDUs and tree nodes, best first."""
        hits = self._native.search(text, _whole("limit", limit, _U63))
        return [SearchHit.from_json(h) for h in self._load(hits)]

    def query(self, statement: str, /, **params: QueryParam) -> QueryResult:
        """Runs a statement of the query language, its ``$name``
        parameters bound from ``params`` (text, numbers, or a sequence of
        numbers: a query vector of your own for ``NEAR($v)``)::

            db.query("SELECT SPANS FROM * SEED BM25($q) BUDGET $n TOKENS", q="ramen", n=128)
            db.query("SELECT FROM * SEED NEAR($v) LIMIT 10", v=my_embedding)

        ``explain=`` is refused unless the statement names ``$explain``: the
        plan is :meth:`explain`'s (or ``EXPLAIN`` in the statement).
        """
        if "explain" in params and not _re.search(r"\$explain\b", statement):
            raise TypeError(
                "query() binds keyword arguments as $parameters and the statement has no $explain; "
                "for the plan call Store.explain(statement, ...) or begin the statement with EXPLAIN"
            )
        return QueryResult.from_json(self._load(self._native.query(statement, params)))

    def explain(self, statement: str, /, **params: QueryParam) -> List[Stage]:
        """Runs ``statement`` as if it began with EXPLAIN and returns its
        plan: each stage's operator, rows in and out, and time. Error
        positions are those of ``statement`` as given."""
        return QueryResult.from_json(self._load(self._native.query(statement, params, True))).plan

    def ask(
        self,
        question: str,
        budget: int = 1024,
        statement: Optional[str] = None,
        group: int = 2,
        answer: bool = True,
    ) -> AskResult:
        """Answers ``question`` with the store's chat model (see
        :func:`open`; a served store asks its server's): evidence is
        retrieved best first by ``statement`` (default: BM25 on the
        question, ``$question`` and ``$budget`` bound) within ``budget``
        tokens, shown to the model ``group`` items at a time until it
        judges the useful evidence enough, then answered (unless ``answer``
        is False) citing evidence items by their coordinates."""
        budget = _whole("budget", budget, _U63)
        group = _whole("group", group, _U32)
        return AskResult.from_json(
            self._load(self._native.ask(question, budget, statement, group, answer))
        )

    # Agent memory

    def add_turn(
        self,
        session: str,
        text: str,
        role: str = "user",
        at: Union[None, str, _datetime.date, _datetime.datetime] = None,
        placement: Placement = "auto",
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> TurnReceipt:
        """Appends a turn to ``session`` (created by its first turn).
        ``role``: ``"user"``, ``"assistant"`` or ``"system"``;
        ``at``: when it was said (an aware datetime, a date, or RFC 3339
        text); ``placement``: where it goes in the dialogue tree;
        ``metadata``: what to keep about it (``{"speaker": "Caroline"}``),
        which ``WHERE meta.KEY`` filters on in a ``session('id')`` scope."""
        turn: Dict[str, Any] = {"text": text, "role": role, "placement": placement}
        if metadata is not None:
            turn["metadata"] = dict(metadata)
        if isinstance(at, _datetime.datetime):
            if at.tzinfo is None:
                raise UserError("`at` needs a time zone (an aware datetime)")
            turn["at"] = at.isoformat()
        elif isinstance(at, _datetime.date):
            turn["at"] = at.isoformat()
        elif at is not None:
            turn["at"] = at
        return TurnReceipt.from_json(self._load(self._native.add_turn(session, _json.dumps(turn))))

    def context(self, session: str, budget: int, query: Optional[str] = None) -> Context:
        """The context for ``session``'s next turn within ``budget``
        tokens: the active path and summaries of the rest, and with
        ``query`` (what was just said) the earlier turns relevant to it."""
        answer = self._native.context(session, _whole("budget", budget, _U63), query)
        return Context.from_json(self._load(answer))

    def session(self, id: str) -> Dict[str, Any]:
        """Session ``id``'s dialogue tree with text (``session show
        --json``: topics, their branches and turns)."""
        view: Dict[str, Any] = self._load(self._native.session(id))
        return view

    def sessions(self) -> List[SessionSummary]:
        """Every session, in id order."""
        return [SessionSummary.from_json(s) for s in self._load(self._native.sessions())]

    def remove_session(self, id: str) -> None:
        """Deletes session ``id`` with all its turns."""
        self._native.remove_session(id)

    def forget_turn(self, session: str, turn: int) -> None:
        """Forgets turn ``turn`` of ``session``: its text goes, while it
        keeps its place in the dialogue tree so later turns keep their
        numbers; contexts and queries leave it out."""
        self._native.forget_turn(session, _whole("turn", turn, _U32))

    # The store

    def stats(self) -> Stats:
        """The store's counts."""
        return Stats.from_json(self._load(self._native.stats()))

    def check(self) -> CheckReport:
        """Validates every document, session and index entry; damaged
        records are listed, not raised."""
        return CheckReport.from_json(self._load(self._native.check()))

    def reindex(self, progress: Optional[Callable[[int, int], object]] = None) -> Dict[str, Any]:
        """Rebuilds the full-text and vector indexes from the stored
        documents: ``{fulltext_entries, vectors, skipped}``.
        ``progress(done, total)`` counts documents, once for the full-text
        index and once for the vectors. In-process, Ctrl-C or
        an exception from ``progress`` stops it early and is raised; the
        indexes stay as they were (a served rebuild runs to its end)."""
        report: Dict[str, Any] = self._load(self._native.reindex(progress))
        return report

    def backup(
        self, dest: PathLike, progress: Optional[Callable[[int, int], object]] = None
    ) -> BackupReport:
        """Writes a consistent copy of the store to ``dest``, a directory
        that must not exist yet, while the store stays in use: the copy
        holds every write made before one moment and none after, and opens
        as a store of its own. Writers wait only for its last pass. A
        served store's copy is written by its server, on its machine (a
        relative ``dest`` is taken from this process's directory).
        ``progress(done, total)`` counts documents and sessions. In-process,
        Ctrl-C or an exception from ``progress`` stops it and leaves no
        copy."""
        answer = self._native.backup(_os.fspath(dest), progress)
        return BackupReport.from_json(self._load(answer))

    def vacuum(self) -> VacuumReport:
        """Rewrites the store compactly, giving back the space removed and
        replaced documents left. A served store is vacuumed by its server
        (its other requests wait); one open in this process waits for its
        other calls to end and is opened again afterwards. Raises
        :class:`UserError` when something in the store does not read whole
        (``check`` names it)."""
        return VacuumReport.from_json(self._load(self._native.vacuum()))

    @staticmethod
    def _load(answer: str) -> Any:
        return _json.loads(answer)
