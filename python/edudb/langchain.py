"""A LangChain retriever over an edudb store.

Needs ``langchain-core`` (``pip install edudb[langchain]``)::

    from edudb.langchain import EdudbRetriever

    retriever = EdudbRetriever(store=edudb.open("notes.db"), budget=512)
    docs = retriever.invoke("how are unsafe operations checked?")

Each LangChain document is one span edudb picked under the token budget,
best score first (``order="document"``: as they lie in their documents),
at most ``k`` of them when ``k`` is set (on the retriever, or per call:
``retriever.invoke(question, k=3)``), with its coordinates as metadata
(``doc``, ``node``, ``kind``, ``level``, ``title``, ``edus``, ``bytes``,
``tokens``, ``score``), so an answer can cite exactly where its context
came from.

``filter`` restricts the documents by their metadata, as LangChain's vector
stores take it (on the retriever, or per call): an operator mapping such as
``{"company": "Boeing", "year": {"$gte": 2020}, "form": {"$in": ["10-K",
"10-Q"]}}`` (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``,
``$in``, ``$nin``, ``$between``, ``$contains``, ``$exists``, ``$and``,
``$or``, ``$not``), or edudb's own condition (``"meta.year >= 2020"``). It
restricts what the seed ranks, so the budget fills from matching documents.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as missing:  # pragma: no cover - exercised without the package
    raise ImportError(
        "edudb.langchain needs langchain-core: pip install 'edudb[langchain]'"
    ) from missing

from ._adapter import DEFAULT_STATEMENT, Order, retrieve
from ._filters import Filter, compile_filter


class EdudbRetriever(BaseRetriever):
    """Retrieves budgeted spans from an edudb store for a query.

    ``statement`` is run with ``$q`` bound to the query and ``$budget`` to
    ``budget`` (when it names it), plus ``params``.
    """

    store: Any
    """An ``edudb.Store`` (from ``edudb.open`` or ``edudb.connect``)."""
    statement: str = DEFAULT_STATEMENT
    budget: int = 512
    params: Dict[str, Union[str, int, float]] = {}
    k: Optional[int] = None
    """At most this many documents (the best-scored); all that the budget
    picked when unset."""
    order: Order = "score"
    """``"score"``: best first; ``"document"``: as they lie in their
    documents."""
    filter: Optional[Filter] = None
    """Only documents whose metadata meets this: an operator mapping or
    edudb's own condition (a call's ``filter=`` replaces it)."""

    model_config = {"extra": "forbid"}

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: Optional[int] = None,
        filter: Optional[Filter] = None,
    ) -> List[Document]:
        chosen = filter if filter is not None else self.filter
        found = retrieve(
            self.store,
            self.statement,
            query,
            self.budget,
            self.params,
            k if k is not None else self.k,
            self.order,
            None if chosen is None else compile_filter(chosen),
        )
        return [Document(page_content=text, metadata=metadata) for text, metadata in found]
