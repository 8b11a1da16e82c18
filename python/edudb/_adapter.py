"""What the retriever adapters share: one query, its spans as text and
coordinate metadata."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Tuple, Union

DEFAULT_STATEMENT = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"
"""The adapters' default statement: BM25-seeded structure-then-select
retrieval under the budget."""


def retrieve(
    store: Any,
    statement: str,
    query: str,
    budget: int,
    params: Mapping[str, Union[str, int, float]],
) -> List[Tuple[str, Dict[str, Any]]]:
    """Runs ``statement`` with ``$q`` = ``query`` and ``$budget`` =
    ``budget`` (when the statement names it) plus ``params``; each picked
    span's text and metadata, in document order."""
    bound: Dict[str, Union[str, int, float]] = {"q": query, **params}
    if re.search(r"\$budget\b", statement):
        bound.setdefault("budget", budget)
    result = store.query(statement, **bound)
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
        for item in result.items
    ]
