"""The native half of edudb (a PyO3 extension). Use the ``edudb`` package
instead: its ``Store`` wraps this one and turns its JSON answers into
typed results."""

from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

class EdudbError(Exception):
    """Every error edudb raises. One that stopped an ingest of several
    documents part-way also has ``stored`` and ``not_stored``."""

    stored: List[str]
    """Set only when an ingest failed part-way: the ids of the documents it
    stored before the failure, each whole (they stay)."""
    not_stored: List[str]
    """Set with ``stored``: the ids of the documents it did not store
    (those refused for their content are in neither); ingesting them again
    resumes it."""

class UserError(EdudbError):
    """The caller's input is wrong; repeating the call cannot succeed."""

class QueryError(UserError):
    """A query statement is wrong, located in it."""

    line: int
    """1-based line of the fault."""
    column: int
    """1-based column (in characters) of the fault."""
    hint: Optional[str]
    """A suggestion, such as the nearest keyword."""
    source_line: str
    """The statement's line holding the fault (cut around it when long)."""
    caret: str
    """``^`` under the fault's characters of ``source_line``."""

class NotFound(UserError):
    """No document, session, turn or topic has the id given."""

class StoreBusy(EdudbError):
    """Another process holds the store, or its server is busy: retry."""

class Corrupt(EdudbError):
    """Stored records are damaged, in-process or on a server."""

class InternalError(EdudbError):
    """The store or server failed."""

Param = Union[str, int, float, Sequence[float]]

class Store:
    """A store, in-process or served; every call answers JSON text."""

    @staticmethod
    def open(
        path: str,
        *,
        embedder: Optional[str] = None,
        model: Optional[str] = None,
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
    ) -> "Store": ...
    @staticmethod
    def connect(target: str, token: Optional[str] = None) -> "Store": ...
    @property
    def served(self) -> bool: ...
    def close(self) -> None: ...
    def documents(self, condition: Optional[str] = None) -> str: ...
    def metadata(self, id: str) -> str: ...
    def update_metadata(self, id: str, set_json: str, unset: List[str]) -> str: ...
    def ingest_paths(
        self,
        paths: List[str],
        id: Optional[str] = None,
        format: Optional[str] = None,
        progress: Optional[Callable[[int, int], object]] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata_json: Optional[str] = None,
    ) -> str: ...
    def ingest_bytes(
        self,
        id: str,
        data: bytes,
        format: Optional[str] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata_json: Optional[str] = None,
    ) -> str: ...
    def write_prepared(self, docs: List[bytes]) -> str: ...
    def remove(self, id: str) -> str: ...
    def tree(self, id: str) -> str: ...
    def pages(self, id: str) -> str: ...
    def edus(self, id: str, first: Optional[int] = None, last: Optional[int] = None) -> str: ...
    def dag(self, id: str, level: Optional[int] = None) -> str: ...
    def search(self, text: str, limit: int) -> str: ...
    def query(self, statement: str, params: Dict[str, Param], explain: bool = False) -> str: ...
    def ask(
        self, question: str, budget: int, statement: Optional[str], group: int, answer: bool
    ) -> str: ...
    def stats(self) -> str: ...
    def check(self) -> str: ...
    def reindex(self, progress: Optional[Callable[[int, int], object]] = None) -> str: ...
    def backup(self, dest: str, progress: Optional[Callable[[int, int], object]] = None) -> str: ...
    def vacuum(self) -> str: ...
    def add_turn(self, session: str, turn: str) -> str: ...
    def sessions(self) -> str: ...
    def session(self, id: str) -> str: ...
    def context(self, session: str, budget: int, query: Optional[str] = None) -> str: ...
    def remove_session(self, id: str) -> str: ...
    def forget_turn(self, session: str, turn: int) -> str: ...
    def rust_query_seconds(self, statement: str, params: Dict[str, Param], runs: int) -> float:
        """Seconds per run of the statement in Rust alone (benchmarks)."""

class Preparer:
    """Prepares documents apart from any store; each call answers bytes."""

    def __init__(
        self,
        *,
        embedder: Optional[str] = None,
        model: Optional[str] = None,
        embed_url: Optional[str] = None,
        embed_model: Optional[str] = None,
        embed_key_env: Optional[str] = None,
        dimension: Optional[int] = None,
        llm_url: Optional[str] = None,
        llm_model: Optional[str] = None,
        llm_key_env: Optional[str] = None,
    ) -> None: ...
    @property
    def embedder(self) -> str: ...
    def prepare(
        self,
        id: str,
        data: bytes,
        format: Optional[str] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata_json: Optional[str] = None,
    ) -> bytes: ...
    def prepare_path(
        self,
        path: str,
        id: Optional[str] = None,
        format: Optional[str] = None,
        structurer: Optional[str] = None,
        ip_maker: Optional[str] = None,
        metadata_json: Optional[str] = None,
    ) -> bytes: ...

def shard_of(id: str, shards: int) -> int:
    """Which of a shard set's ``shards`` stores holds document ``id``."""
    ...

def shard_stores(path: str) -> List[Path]:
    """Where the stores of the shard set at ``path`` are, in placement order."""
    ...

def expand_sources(paths: List[str]) -> List[Tuple[str, Path]]:
    """The documents ``paths`` name: ``(id, path)`` pairs, by id."""
    ...

def check_condition(condition: str) -> None:
    """Raises QueryError unless ``condition`` is one WHERE condition."""
    ...
