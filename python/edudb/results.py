"""Typed results of edudb's calls.

Each class is built from the JSON the store answers (the CLI's ``--json``
contracts, the same in-process and served). Spans are closed: ``edus`` is
``(first, last)`` EDU ids, both included; ``bytes`` is ``(start, end)``
into the document's text, end excluded, so ``text[start:end]`` is the span
exactly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Type, TypeVar

Span = Tuple[int, int]
"""A closed EDU range ``(first, last)`` or a byte range ``(start, end)``."""

T = TypeVar("T")


def _build(cls: Type[T], data: Dict[str, Any], **nested: Any) -> T:
    """``cls`` from the JSON object ``data``: its fields by name (fields
    the JSON lacks are None), spans as tuples, and the fields in
    ``nested`` as given."""
    values = {}
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        if item.name in nested:
            values[item.name] = nested[item.name]
            continue
        value = data.get(item.name)
        if isinstance(value, list) and "Span" in str(item.type):
            value = tuple(value)
        values[item.name] = value
    return cls(**values)


class _FromJson:
    """``from_json`` for the results whose fields are the JSON's own."""

    @classmethod
    def from_json(cls: Type[T], data: Dict[str, Any]) -> T:
        """The result the JSON object ``data`` describes."""
        return _build(cls, data)


@dataclass(frozen=True)
class Document(_FromJson):
    """A stored document: its id, title, sizes and (in listings) its
    metadata."""

    id: str
    title: str
    edus: int
    nodes: int
    tokens: int
    bytes: int
    metadata: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class IngestFailure:
    """A source refused for its content (the others were ingested)."""

    source: str
    cls: str
    message: str

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "IngestFailure":
        return cls(source=data["source"], cls=data["class"], message=data["message"])


@dataclass(frozen=True)
class LlmCost(_FromJson):
    """What language-model steps cost: calls, tokens, time, units that
    fell back to the model-free path, written points dropped."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    millis: int
    fallbacks: int
    dropped_points: int


@dataclass(frozen=True)
class IngestReport:
    """What an ingest wrote, what it refused, and what its language-model
    steps cost (None for the bytes of one document)."""

    documents: List[Document]
    failures: List[IngestFailure]
    llm: Optional[LlmCost]

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "IngestReport":
        return cls(
            documents=[Document.from_json(d) for d in data["documents"]],
            failures=[IngestFailure.from_json(f) for f in data["failures"]],
            llm=LlmCost.from_json(data["llm"]),
        )


@dataclass(frozen=True)
class Node:
    """A node of a document's structural tree, with its children."""

    id: int
    kind: str
    level: int
    title: str
    span: Span
    children: List["Node"] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Node":
        children = [Node.from_json(c) for c in data.get("children", [])]
        return _build(cls, data, children=children)

    def walk(self) -> List["Node"]:
        """This node and every node below it, in document order."""
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes


@dataclass(frozen=True)
class Edu(_FromJson):
    """An elementary discourse unit: an exact byte range of its document."""

    id: int
    bytes: Span
    tokens: int
    kind: str
    pages: Optional[Span]
    """First and last page (1-based) of a document read from a PDF; None
    for other formats."""
    text: str


@dataclass(frozen=True)
class SearchHit(_FromJson):
    """A BM25 match: an EDU (``node`` None) or a tree node."""

    doc: str
    node: Optional[int]
    edus: Span
    bytes: Span
    score: float
    text: str


@dataclass(frozen=True)
class PageBox(_FromJson):
    """Where one line of a picked span is drawn on its PDF page: the page
    (1-based) and the box in PDF points from the page's bottom left."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Item:
    """One span a selection picked, with its coordinates."""

    doc: str
    node: Optional[int]
    kind: str
    level: int
    title: Optional[str]
    edus: Span
    bytes: Span
    tokens: int
    score: float
    match_score: Optional[float]
    """The seed's own score, before its ranking was divided by its best
    (BM25, cosine similarity, or HYBRID's fused score), of the hit the item
    is: a node's, or for a run of EDUs the best of the EDU hits it holds.
    Comparable across queries, what ``SEED … MIN x`` cuts on. None when the
    item is or holds no seed hit (no SEED, a walk leaf, a propagated
    node)."""
    pages: Optional[Span]
    """First and last page (1-based) of a document read from a PDF; None
    for other formats."""
    boxes: Optional[List[PageBox]]
    """With ``WITH BOXES`` in the statement, where each line of the span is
    drawn (empty for documents that are not PDFs); None otherwise."""
    text: str

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Item":
        """The item the JSON object ``data`` describes."""
        boxes = data.get("boxes")
        return _build(
            cls,
            data,
            boxes=None if boxes is None else [PageBox.from_json(b) for b in boxes],
        )


@dataclass(frozen=True)
class Stage(_FromJson):
    """One operator of a statement's pipeline, as EXPLAIN reports it."""

    operator: str
    detail: str
    rows_in: int
    rows_out: int
    elapsed: float
    device: str


@dataclass(frozen=True)
class AskStep:
    """One step of :meth:`Store.ask`'s reading: the evidence items shown
    (numbered from 1), those the model found useful, and its verdict."""

    shown: List[int]
    relevant: List[int]
    enough: bool
    judged_by: str
    cost: LlmCost

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "AskStep":
        return _build(cls, data, cost=LlmCost.from_json(data["cost"]))


@dataclass(frozen=True)
class AskResult:
    """What :meth:`Store.ask` read, judged and answered: ``evidence`` is
    every item shown, best first (``citations`` number them from 1, and
    ``cited`` are those items, with their coordinates); ``stopped`` is
    ``"enough"``, ``"budget"`` or ``"nothing"``; ``answer`` is None without
    the answer step, with nothing retrieved, or when the model's replies
    stayed invalid."""

    question: str
    statement: str
    evidence: List[Item]
    steps: List[AskStep]
    stopped: str
    answer: Optional[str]
    citations: List[int]
    cited: List[Item]
    cost: LlmCost

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "AskResult":
        return _build(
            cls,
            data,
            evidence=[Item.from_json(i) for i in data["evidence"]],
            steps=[AskStep.from_json(s) for s in data["steps"]],
            cited=[Item.from_json(i) for i in data["cited"]],
            cost=LlmCost.from_json(data["cost"]),
        )


@dataclass(frozen=True)
class QueryResult:
    """A statement's answer. A selection fills ``items`` (in document
    order), ``tokens_used`` and ``budget``; a SHOW statement's rows are in
    ``value`` under their name (``documents``, ``tree``, ``edus``,
    ``stats``, ``dag``, ``sessions``, ``session``). ``plan`` is filled
    under EXPLAIN."""

    items: List[Item]
    tokens_used: int
    budget: Optional[int]
    elapsed_ms: float
    plan: List[Stage]
    value: Dict[str, Any]

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "QueryResult":
        return cls(
            items=[Item.from_json(i) for i in data.get("results", [])],
            tokens_used=data.get("tokens_used", 0),
            budget=data.get("budget"),
            elapsed_ms=data["elapsed_ms"],
            plan=[Stage.from_json(s) for s in data.get("plan", [])],
            value=data,
        )

    @property
    def text(self) -> str:
        """The picked spans' text in document order, one per paragraph."""
        return "\n\n".join(item.text for item in self.items)


@dataclass(frozen=True)
class DagNode(_FromJson):
    """A node of a document's DAG: a chunk (level 1) or an information
    point (level 2 and up), with the EDUs it covers and its text."""

    id: int
    level: int
    edus: Span
    points: List[int]
    window: Optional[Span]
    text: str
    written: bool


@dataclass(frozen=True)
class DagEdge:
    """A weighted edge; each node's out-edges sum to 1."""

    source: int
    target: int
    weight: float


@dataclass(frozen=True)
class Dag:
    """A document's weighted DAG, at one level or all."""

    doc: str
    level: Optional[int]
    top_level: int
    nodes: List[DagNode]
    edges: List[DagEdge]

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Dag":
        edges = [DagEdge(e["from"], e["to"], e["weight"]) for e in data["edges"]]
        nodes = [DagNode.from_json(n) for n in data["nodes"]]
        return _build(cls, data, nodes=nodes, edges=edges)


@dataclass(frozen=True)
class Stats(_FromJson):
    """The store's counts."""

    documents: int
    sessions: int
    turns: int
    edus: int
    nodes: int
    tokens: int
    text_bytes: int
    store_bytes: int
    fulltext_entries: int
    last_change: int
    format_version: int
    tokenizer: str
    shards: Optional[int] = None
    """The number of stores, for a shard set (their counts summed); None
    for one store."""


@dataclass(frozen=True)
class Damaged:
    """A document or session that failed its check, and why."""

    doc: str
    problem: str


def _damaged(items: List[Dict[str, Any]]) -> List[Damaged]:
    """The damaged records a report lists."""
    return [Damaged(d["doc"], d["problem"]) for d in items]


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found: counts and every damaged record."""

    documents: int
    sessions: int
    fulltext_entries: int
    vectors: Dict[str, int]
    vector_graph_change: int
    last_change: int
    damaged: List[Damaged]

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "CheckReport":
        return _build(cls, data, damaged=_damaged(data["damaged"]))

    @property
    def ok(self) -> bool:
        """True when nothing is damaged."""
        return not self.damaged


@dataclass(frozen=True)
class BackupReport:
    """What ``backup`` copied: the copy holds every write up to store
    change ``change`` and none after."""

    path: str
    documents: int
    sessions: int
    change: int
    caught_up: int
    bytes: int
    seconds: float
    writers_held_seconds: float
    skipped: List[Damaged]

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "BackupReport":
        return _build(cls, data, skipped=_damaged(data["skipped"]))


@dataclass(frozen=True)
class VacuumReport(_FromJson):
    """What ``vacuum`` did: the store's bytes on disk before and after,
    and what it kept."""

    bytes_before: int
    bytes_after: int
    documents: int
    sessions: int
    seconds: float


@dataclass(frozen=True)
class TurnReceipt(_FromJson):
    """Where an appended turn went (its topic and branch) and why."""

    session: str
    turn: int
    doc: str
    role: str
    at: Optional[str]
    parent: Optional[int]
    topic: int
    branch: int
    edus: int
    tokens: int
    summary: Span
    decision: Dict[str, Any]


@dataclass(frozen=True)
class ContextItem(_FromJson):
    """One piece of a session's context: a turn on the active path, a
    relevant earlier turn or an excerpt of one, or a summary of a branch or
    topic. ``kind`` is ``path_turn``, ``relevant_turn``,
    ``relevant_excerpt``, ``branch_summary`` or ``topic_summary``."""

    kind: str
    turn: int
    role: str
    at: Optional[str]
    score: Optional[float]
    doc: str
    topic: int
    branch: int
    edus: Span
    bytes: Span
    tokens: int
    text: str


@dataclass(frozen=True)
class Context:
    """The context for a session's next turn, within a token budget."""

    session: str
    current: int
    items: List[ContextItem]
    tokens_used: int
    budget: int
    history_tokens: int
    path_turns: int
    path_turns_dropped: int

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Context":
        items = [ContextItem.from_json(i) for i in data["items"]]
        return _build(cls, data, items=items)

    @property
    def text(self) -> str:
        """The items' text, one per paragraph, in the order given."""
        return "\n\n".join(item.text for item in self.items)


@dataclass(frozen=True)
class SessionSummary(_FromJson):
    """A session's sizes and where it stands."""

    id: str
    turns: int
    topics: int
    branches: int
    tokens: int
    current: int
    active_topic: int

