"""A LlamaIndex retriever over an edudb store.

Needs ``llama-index-core`` (``pip install edudb[llama-index]``)::

    from edudb.llama_index import EdudbRetriever

    retriever = EdudbRetriever(edudb.open("notes.db"), budget=512)
    nodes = retriever.retrieve("how are unsafe operations checked?")

Each node is one span edudb picked under the token budget, best score
first (``order="document"``: as they lie in their documents), at most
``similarity_top_k`` of them when set, scored, with its coordinates as
metadata (``doc``, ``node``,
``kind``, ``level``, ``title``, ``edus``, ``bytes``, ``tokens``,
``score``); its id is ``doc:first-last`` (its EDU span).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as missing:  # pragma: no cover - exercised without the package
    raise ImportError(
        "edudb.llama_index needs llama-index-core: pip install 'edudb[llama-index]'"
    ) from missing

from ._adapter import DEFAULT_STATEMENT, Order, retrieve


class EdudbRetriever(BaseRetriever):
    """Retrieves budgeted spans from an edudb store for a query.

    ``statement`` is run with ``$q`` bound to the query string and
    ``$budget`` to ``budget`` (when it names it), plus ``params``.
    """

    def __init__(
        self,
        store: Any,
        statement: str = DEFAULT_STATEMENT,
        budget: int = 512,
        params: Optional[Dict[str, Union[str, int, float]]] = None,
        similarity_top_k: Optional[int] = None,
        order: Order = "score",
        **kwargs: Any,
    ) -> None:
        self.store = store
        self.statement = statement
        self.budget = budget
        self.params = dict(params or {})
        self.similarity_top_k = similarity_top_k
        self.order: Order = order
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        found = retrieve(
            self.store,
            self.statement,
            query_bundle.query_str,
            self.budget,
            self.params,
            self.similarity_top_k,
            self.order,
        )
        return [
            NodeWithScore(
                node=TextNode(
                    text=text,
                    id_=f"{metadata['doc']}:{metadata['edus'][0]}-{metadata['edus'][1]}",
                    metadata=metadata,
                ),
                score=metadata["score"],
            )
            for text, metadata in found
        ]
