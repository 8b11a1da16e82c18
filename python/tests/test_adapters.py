"""The retriever adapters against the real framework packages: LangChain
(langchain-core) and LlamaIndex (llama-index-core)."""

from __future__ import annotations

import importlib
import sys

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
