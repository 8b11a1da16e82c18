"""What the retriever adapters share: one query, its spans as text and
coordinate metadata."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple, Union

from ._filters import PARAM_PREFIX, Where, with_where

DEFAULT_STATEMENT = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"
"""The adapters' default statement: BM25-seeded structure-then-select
retrieval under the budget."""

Order = Literal["score", "document"]
"""How an adapter orders what it returns: best score first (what the
frameworks expect of a retriever; the default), or as the spans lie in
their documents (edudb's own order, for reading them as a context)."""


def retrieve(
    store: Any,
    statement: str,
    query: str,
    budget: int,
    params: Mapping[str, Union[str, int, float]],
    top: Optional[int] = None,
    order: Order = "score",
    where: Optional[Where] = None,
) -> List[Tuple[str, Dict[str, Any]]]:
    """Runs ``statement`` with ``$q`` = ``query`` and ``$budget`` =
    ``budget`` (when the statement names it) plus ``params``, restricted
    by ``where`` (a compiled filter, added to it as a WHERE clause); each picked
    span's text and metadata, best score first (ties in document order)
    or in document order as ``order`` says, at most ``top`` of them (the
    best-scored ``top`` either way)."""
    if top is not None and top < 1:
        raise ValueError(f"the number of results must be at least 1, got {top}")
    if order not in ("score", "document"):
        raise ValueError(f"order must be 'score' or 'document', got {order!r}")
    bound: Dict[str, Union[str, int, float]] = {"q": query, **params}
    if re.search(r"\$budget\b", statement):
        bound.setdefault("budget", budget)
    if where is not None:
        clash = sorted(name for name in bound if name.startswith(PARAM_PREFIX))
        if clash:
            raise ValueError(f"parameters named {PARAM_PREFIX}N are a filter's own: rename {clash}")
        condition, filter_params = where
        statement = with_where(statement, condition)
        bound.update(filter_params)
    items = list(store.query(statement, **bound).items)
    best = sorted(range(len(items)), key=lambda i: -items[i].score)[:top]
    kept = best if order == "score" else sorted(best)
    return [
        (
            item.text,
            {
                "doc": item.doc,
                "node": item.node,
                "kind": item.kind,
                "level": item.level,
                "title": item.title,
                "edus": list(item.edus),
                "bytes": list(item.bytes),
                "tokens": item.tokens,
                "score": item.score,
            },
        )
        for item in (items[i] for i in kept)
    ]
