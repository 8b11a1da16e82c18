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

``filters`` restricts the documents by their metadata as LlamaIndex writes
it, ``MetadataFilters`` (operators ``==``, ``!=``, ``>``, ``>=``, ``<``,
``<=``, ``in``, ``nin``, ``contains``, ``any``, ``all``; conditions
``and``, ``or``, ``not``, where ``not`` negates its filters joined by
``and``; nested), or edudb's own condition as a string.
It restricts what the seed ranks, so the budget fills from matching
documents.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilters,
    )
except ImportError as missing:  # pragma: no cover - exercised without the package
    raise ImportError(
        "edudb.llama_index needs llama-index-core: pip install 'edudb[llama-index]'"
    ) from missing

from ._adapter import DEFAULT_STATEMENT, Order, retrieve
from ._filters import Condition, Where, comparison, compile_filter, join

# LlamaIndex's operators that edudb's conditions write directly, as the
# operator mapping's names.
OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
    FilterOperator.CONTAINS: "$contains",
}


def condition_of(filters: MetadataFilters, condition: Condition) -> str:
    """The WHERE condition LlamaIndex's ``filters`` write, their values
    bound in ``condition``."""
    parts = [
        condition_of(each, condition) if isinstance(each, MetadataFilters) else one_filter(each, condition)
        for each in filters.filters
    ]
    if filters.condition in (None, FilterCondition.AND):
        return join(parts, "AND")
    if filters.condition == FilterCondition.OR:
        return join(parts, "OR")
    if filters.condition == FilterCondition.NOT:
        return f"NOT ({join(parts, 'AND')})"
    raise ValueError(f"edudb does not take the filter condition {filters.condition!r}")


def one_filter(given: Any, condition: Condition) -> str:
    """One ``MetadataFilter`` (or the older ``ExactMatchFilter``, which has
    no operator: equality) as a WHERE condition."""
    operator = FilterOperator(getattr(given, "operator", FilterOperator.EQ))
    if operator in OPERATORS:
        return comparison(given.key, OPERATORS[operator], given.value, condition)
    if operator in (FilterOperator.ANY, FilterOperator.ALL):
        held = [comparison(given.key, "$contains", v, condition) for v in listed(given, operator)]
        return join(held, "OR" if operator == FilterOperator.ANY else "AND")
    raise ValueError(
        f"edudb's metadata conditions cannot write the operator {operator.value!r} (on {given.key!r}); "
        f"those it takes: {', '.join(o.value for o in [*OPERATORS, FilterOperator.ANY, FilterOperator.ALL])}"
    )


def listed(given: Any, operator: FilterOperator) -> List[Any]:
    """The values of an ``any``/``all`` filter, at least one."""
    if not isinstance(given.value, list) or not given.value:
        raise ValueError(f"{operator.value!r} on {given.key!r} takes a non-empty list of texts, got {given.value!r}")
    return given.value


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
        filters: Optional[Union[MetadataFilters, str]] = None,
        **kwargs: Any,
    ) -> None:
        self.store = store
        self.statement = statement
        self.budget = budget
        self.params = dict(params or {})
        self.similarity_top_k = similarity_top_k
        self.order: Order = order
        self.filters = filters
        super().__init__(**kwargs)

    def _where(self) -> Optional[Where]:
        """The filters, compiled; ``None`` without them."""
        if self.filters is None:
            return None
        if isinstance(self.filters, str):
            return compile_filter(self.filters)
        condition = Condition()
        return condition_of(self.filters, condition), condition.params

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        found = retrieve(
            self.store,
            self.statement,
            query_bundle.query_str,
            self.budget,
            self.params,
            self.similarity_top_k,
            self.order,
            self._where(),
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
