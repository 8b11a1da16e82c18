"""The retriever adapters against the real framework packages: LangChain
(langchain-core) and LlamaIndex (llama-index-core)."""

from __future__ import annotations

import datetime
import importlib
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import edudb
from conftest import DEMO, Server

SPANS = "SELECT SPANS FROM * SEED BM25($q) BUDGET $budget TOKENS"


def expected(store: edudb.Store, budget: int) -> list:
    """The spans the adapters return by default: best score first, ties in
    document order."""
    items = store.query(SPANS, q="unsafe operations", budget=budget).items
    return sorted(items, key=lambda item: -item.score)


def test_langchain_retriever_returns_budgeted_spans_with_coordinates(store: edudb.Store) -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from edudb.langchain import EdudbRetriever

    retriever = EdudbRetriever(store=store, budget=128)
    assert isinstance(retriever, BaseRetriever)
    documents = retriever.invoke("unsafe operations")
    items = expected(store, 128)
    assert len(documents) == len(items) > 0
    for document, item in zip(documents, items):
        assert isinstance(document, Document)
        assert document.page_content == item.text
        meta = document.metadata
        assert (meta["doc"], tuple(meta["edus"]), tuple(meta["bytes"])) == (item.doc, item.edus, item.bytes)
        assert (meta["kind"], meta["level"], meta["score"]) == (item.kind, item.level, item.score)
        source = (DEMO / f"{meta['doc']}.md").read_bytes()
        assert source[meta["bytes"][0] : meta["bytes"][1]].decode() == document.page_content
    assert sum(d.metadata["tokens"] for d in documents) <= 128


def test_langchain_retriever_runs_its_statement_with_params(store: edudb.Store) -> None:
    from edudb.langchain import EdudbRetriever

    target = "2585-unsafe-block-in-unsafe-fn"
    retriever = EdudbRetriever(
        store=store,
        statement="SELECT SPANS FROM doc($target) SEED BM25($q) BUDGET 48 TOKENS",
        params={"target": target},
    )
    documents = retriever.invoke("unsafe")
    assert documents and {d.metadata["doc"] for d in documents} == {target}
    assert sum(d.metadata["tokens"] for d in documents) <= 48


def test_llama_index_retriever_returns_scored_nodes_with_coordinates(store: edudb.Store) -> None:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from edudb.llama_index import EdudbRetriever

    retriever = EdudbRetriever(store, budget=128)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("unsafe operations")
    items = expected(store, 128)
    assert len(nodes) == len(items) > 0
    for scored, item in zip(nodes, items):
        assert isinstance(scored, NodeWithScore)
        assert scored.node.get_content() == item.text
        assert scored.score == pytest.approx(item.score)
        assert scored.node.node_id == f"{item.doc}:{item.edus[0]}-{item.edus[1]}"
        assert scored.node.metadata["bytes"] == list(item.bytes)


def test_adapters_work_on_a_served_store(server: Server) -> None:
    from edudb.langchain import EdudbRetriever as LangChainRetriever
    from edudb.llama_index import EdudbRetriever as LlamaIndexRetriever

    with edudb.connect(server.path) as db:
        items = expected(db, 96)
        assert [d.page_content for d in LangChainRetriever(store=db, budget=96).invoke("unsafe operations")] == [
            i.text for i in items
        ]
        assert [n.node.get_content() for n in LlamaIndexRetriever(db, budget=96).retrieve("unsafe operations")] == [
            i.text for i in items
        ]


def test_adapters_honour_their_frameworks_top_k_and_keep_document_order_on_request(store: edudb.Store) -> None:
    from edudb.langchain import EdudbRetriever as LangChainRetriever
    from edudb.llama_index import EdudbRetriever as LlamaIndexRetriever

    question = "unsafe operations"
    in_document_order = store.query(SPANS, q=question, budget=256).items
    assert len(in_document_order) > 3
    best = expected(store, 256)
    assert [i.score for i in best] != [i.score for i in in_document_order], "the two orders must differ here"

    langchain = LangChainRetriever(store=store, budget=256, k=3)
    assert [d.page_content for d in langchain.invoke(question)] == [i.text for i in best[:3]]
    assert [d.page_content for d in langchain.invoke(question, k=2)] == [i.text for i in best[:2]]
    by_position = LangChainRetriever(store=store, budget=256, order="document")
    assert [d.page_content for d in by_position.invoke(question)] == [i.text for i in in_document_order]
    with pytest.raises(ValueError):
        LangChainRetriever(store=store, budget=256, top=3)  # not a knob of LangChain's: refused, not ignored

    llama = LlamaIndexRetriever(store, budget=256, similarity_top_k=2)
    assert [n.node.get_content() for n in llama.retrieve(question)] == [i.text for i in best[:2]]
    kept = [n.node.get_content() for n in LlamaIndexRetriever(store, budget=256, similarity_top_k=3, order="document").retrieve(question)]
    assert kept == [i.text for i in in_document_order if i.text in {b.text for b in best[:3]}]
    with pytest.raises(ValueError):
        LlamaIndexRetriever(store, budget=256, similarity_top_k=0).retrieve(question)


@pytest.mark.parametrize(
    "adapter, framework",
    [("edudb.langchain", "langchain_core"), ("edudb.llama_index", "llama_index")],
)
def test_an_adapter_without_its_framework_says_what_to_install(
    adapter: str, framework: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name == framework or name.startswith(framework + ".") or name == adapter:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)
    with pytest.raises(ImportError, match="pip install"):
        importlib.import_module(adapter)


# Metadata of the demo RFCs for the filter tests: a number, a text, a date,
# a boolean and a list, so each kind of comparison has something to hold.
RFC_METADATA = {
    "0002-rfc-process": {"year": 2014, "team": "core", "filed": "2014-03-11", "accepted": True, "tags": ["process"]},
    "0505-api-comment-conventions": {"year": 2014, "team": "libs", "filed": "2014-12-08", "accepted": True, "tags": ["docs"]},
    "1618-ergonomic-format-args": {"year": 2016, "team": "libs", "filed": "2016-05-17", "accepted": False, "tags": ["macros", "strings"]},
    "2124-option-filter": {"year": 2017, "team": "libs", "filed": "2017-08-25", "accepted": True, "tags": ["std"], "editor": "nrc"},
    "2585-unsafe-block-in-unsafe-fn": {"year": 2018, "team": "lang", "filed": "2018-11-04", "accepted": True, "tags": ["unsafe", "std"]},
}
QUESTION = "how should unsafe code and the standard library be documented"


@pytest.fixture
def filed(tmp_path: Path) -> Iterator[edudb.Store]:
    """The demo RFCs, each with its :data:`RFC_METADATA`."""
    with edudb.open(tmp_path / "filed.db") as db:
        for name, metadata in RFC_METADATA.items():
            db.ingest(DEMO / f"{name}.md", metadata=metadata)
        yield db


def by_hand(store: edudb.Store, condition: str, budget: int = 400) -> list:
    """What the default statement returns with ``condition`` written into
    it, best first: what a filter must come to."""
    statement = f"SELECT SPANS FROM * WHERE {condition} SEED BM25($q) BUDGET $budget TOKENS"
    return sorted(store.query(statement, q=QUESTION, budget=budget).items, key=lambda item: -item.score)


# Each operator mapping (LangChain's vector stores' filter), the condition
# it must come to, and the documents that condition allows.
MAPPINGS = [
    ({"team": "libs"}, "meta.team = 'libs'"),
    ({"team": "libs", "year": {"$gte": 2016}}, "meta.team = 'libs' AND meta.year >= 2016"),
    ({"year": {"$gt": 2014, "$lte": 2017}}, "meta.year > 2014 AND meta.year <= 2017"),
    ({"year": {"$lt": 2016}}, "meta.year < 2016"),
    ({"team": {"$ne": "libs"}}, "meta.team != 'libs'"),
    ({"team": {"$in": ["core", "lang"]}}, "meta.team IN ('core', 'lang')"),
    ({"year": {"$nin": [2014, 2018]}}, "NOT meta.year IN (2014, 2018)"),
    ({"year": {"$between": [2016, 2017]}}, "meta.year BETWEEN 2016 AND 2017"),
    ({"tags": {"$contains": "std"}}, "meta.tags CONTAINS 'std'"),
    ({"accepted": False}, "meta.accepted = false"),
    ({"filed": {"$gte": datetime.date(2016, 1, 1)}}, "meta.filed >= '2016-01-01'"),
    ({"filed": {"$lt": datetime.datetime(2017, 1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))}},
     "meta.filed < '2016-12-31T23:00:00Z'"),
    ({"editor": {"$exists": False}}, "NOT EXISTS meta.editor"),
    ({"$or": [{"team": "lang"}, {"tags": {"$contains": "docs"}}]}, "meta.team = 'lang' OR meta.tags CONTAINS 'docs'"),
    ({"$and": [{"team": "libs"}, {"$not": {"year": 2016}}]}, "meta.team = 'libs' AND NOT meta.year = 2016"),
]


@pytest.mark.parametrize("mapping, condition", MAPPINGS, ids=[c for _, c in MAPPINGS])
def test_langchain_filters_restrict_the_documents_as_the_condition_they_write(
    filed: edudb.Store, mapping: dict, condition: str
) -> None:
    from edudb.langchain import EdudbRetriever

    want = by_hand(filed, condition)
    assert want, f"{condition} must find something for the test to mean anything"
    allowed = {d.id for d in filed.docs(where=condition)}
    assert allowed != set(RFC_METADATA), f"{condition} must leave some document out"
    for documents in (
        EdudbRetriever(store=filed, budget=400, filter=mapping).invoke(QUESTION),
        EdudbRetriever(store=filed, budget=400).invoke(QUESTION, filter=mapping),
    ):
        assert [(d.page_content, d.metadata["doc"]) for d in documents] == [(i.text, i.doc) for i in want]
        assert {d.metadata["doc"] for d in documents} <= allowed


def test_a_filter_fills_the_budget_from_matching_documents(filed: edudb.Store) -> None:
    from edudb.langchain import EdudbRetriever

    unfiltered = EdudbRetriever(store=filed, budget=300).invoke(QUESTION)
    assert any(d.metadata["doc"] != "0505-api-comment-conventions" for d in unfiltered)
    only = EdudbRetriever(store=filed, budget=300, filter={"tags": {"$contains": "docs"}}).invoke(QUESTION)
    assert {d.metadata["doc"] for d in only} == {"0505-api-comment-conventions"}
    # Restricted before ranking, not after: the budget is spent on the one document.
    assert sum(d.metadata["tokens"] for d in only) > 200


def test_langchain_takes_edudb_s_own_condition_and_a_call_s_filter_replaces_the_retriever_s(filed: edudb.Store) -> None:
    from edudb.langchain import EdudbRetriever

    retriever = EdudbRetriever(store=filed, budget=400, filter="meta.team = 'lang'")
    assert {d.metadata["doc"] for d in retriever.invoke(QUESTION)} == {"2585-unsafe-block-in-unsafe-fn"}
    assert {d.metadata["doc"] for d in retriever.invoke(QUESTION, filter={"team": "core"})} == {"0002-rfc-process"}
    # The statement's own parameters and the filter's are bound side by side.
    scoped = EdudbRetriever(
        store=filed,
        statement="SELECT SPANS FROM * WHERE level >= $lowest SEED BM25($q) BUDGET 400 TOKENS -- a comment",
        params={"lowest": 0},
    )
    with pytest.raises(edudb.QueryError, match="WHERE is given twice"):
        scoped.invoke(QUESTION, filter={"team": "libs"})
    trailing = EdudbRetriever(store=filed, statement=SPANS + "; -- the end", budget=400, filter={"team": "core"})
    assert {d.metadata["doc"] for d in trailing.invoke(QUESTION)} == {"0002-rfc-process"}
    # A second statement after the `;` is not dropped: it is refused.
    second = EdudbRetriever(store=filed, statement=SPANS + "; SHOW DOCS", budget=400, filter={"team": "core"})
    with pytest.raises(edudb.QueryError, match="one statement at a time"):
        second.invoke(QUESTION)
    # A condition that would end its clause and widen it is refused where it does.
    with pytest.raises(edudb.QueryError) as widened:
        EdudbRetriever(store=filed, budget=400, filter="meta.team = 'lang') OR (true").invoke(QUESTION)
    assert widened.value.column == 19


@pytest.mark.parametrize(
    "mapping, message",
    [
        ({"year": {"$like": "20%"}}, "unknown filter operator '\\$like'"),
        ({"$nor": [{"year": 2014}]}, "unknown filter operator '\\$nor'"),
        ({"year-filed": 2014}, "is not a metadata key"),
        ({"year": {"$in": []}}, "non-empty list"),
        ({"year": {"$in": 2014}}, "non-empty list"),
        ({"year": {"$between": [2014]}}, "low, high"),
        ({"year": {"$exists": "yes"}}, "true or false"),
        ({"filed": datetime.datetime(2016, 1, 1)}, "no time zone"),
        ({"year": None}, "not NoneType"),
        ({}, "non-empty mapping"),
        ({"$and": []}, "AND of no conditions"),
    ],
)
def test_filters_that_cannot_be_written_are_refused_saying_why(filed: edudb.Store, mapping: dict, message: str) -> None:
    from edudb.langchain import EdudbRetriever

    with pytest.raises(ValueError, match=message):
        EdudbRetriever(store=filed, filter=mapping).invoke(QUESTION)


def test_a_statement_parameter_named_like_a_filter_s_is_refused(filed: edudb.Store) -> None:
    from edudb.langchain import EdudbRetriever

    retriever = EdudbRetriever(store=filed, params={"edudb_filter_0": "x"}, filter={"team": "core"})
    with pytest.raises(ValueError, match="filter's own"):
        retriever.invoke(QUESTION)


def test_llama_index_metadata_filters_restrict_the_documents_as_the_condition_they_write(filed: edudb.Store) -> None:
    from llama_index.core.vector_stores.types import (
        ExactMatchFilter,
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    from edudb.llama_index import EdudbRetriever

    def f(key: str, value: Any, operator: FilterOperator = FilterOperator.EQ) -> MetadataFilter:
        return MetadataFilter(key=key, value=value, operator=operator)

    cases = [
        (MetadataFilters(filters=[f("team", "libs"), f("year", 2016, FilterOperator.GTE)]),
         "meta.team = 'libs' AND meta.year >= 2016"),
        (MetadataFilters(filters=[f("team", "lang"), f("year", 2014, FilterOperator.LT)], condition=FilterCondition.OR),
         "meta.team = 'lang' OR meta.year < 2014"),
        (MetadataFilters(filters=[f("team", ["core", "lang"], FilterOperator.IN)]), "meta.team IN ('core', 'lang')"),
        (MetadataFilters(filters=[f("year", [2014, 2018], FilterOperator.NIN)]), "NOT meta.year IN (2014, 2018)"),
        (MetadataFilters(filters=[f("team", "libs", FilterOperator.NE), f("year", 2014, FilterOperator.GT),
                                  f("year", 2018, FilterOperator.LTE)]),
         "meta.team != 'libs' AND meta.year > 2014 AND meta.year <= 2018"),
        (MetadataFilters(filters=[f("tags", "std", FilterOperator.CONTAINS)]), "meta.tags CONTAINS 'std'"),
        (MetadataFilters(filters=[f("tags", ["docs", "unsafe"], FilterOperator.ANY)]),
         "meta.tags CONTAINS 'docs' OR meta.tags CONTAINS 'unsafe'"),
        (MetadataFilters(filters=[f("tags", ["unsafe", "std"], FilterOperator.ALL)]),
         "meta.tags CONTAINS 'unsafe' AND meta.tags CONTAINS 'std'"),
        (MetadataFilters(filters=[f("team", "libs")], condition=FilterCondition.NOT), "NOT meta.team = 'libs'"),
        (MetadataFilters(filters=[ExactMatchFilter(key="team", value="core")]), "meta.team = 'core'"),
        (MetadataFilters(
            filters=[f("team", "libs"),
                     MetadataFilters(filters=[f("year", 2014), f("year", 2017)], condition=FilterCondition.OR)]),
         "meta.team = 'libs' AND (meta.year = 2014 OR meta.year = 2017)"),
        ("meta.year BETWEEN 2016 AND 2017", "meta.year BETWEEN 2016 AND 2017"),
    ]
    for filters, condition in cases:
        want = by_hand(filed, condition)
        assert want, condition
        nodes = EdudbRetriever(filed, budget=400, filters=filters).retrieve(QUESTION)
        assert [(n.node.get_content(), n.node.metadata["doc"]) for n in nodes] == [(i.text, i.doc) for i in want], condition

    for operator in (FilterOperator.TEXT_MATCH, FilterOperator.IS_EMPTY):
        with pytest.raises(ValueError, match="cannot write the operator"):
            EdudbRetriever(filed, filters=MetadataFilters(filters=[f("team", "li", operator)])).retrieve(QUESTION)
