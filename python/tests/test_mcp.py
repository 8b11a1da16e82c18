"""`edudb mcp` and `/mcp` driven by the official MCP client (the `mcp`
package): the tools, their schemas and errors, read-only and allowed
directories, resources, and an agent and a person sharing a served
store."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import subprocess
from pathlib import Path
from typing import Any, AsyncIterator

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import edudb

from conftest import DEMO, ROOT, edudb_binary, start_server, stop_server

LOCOMO = ROOT.parent / "shared" / "data" / "locomo_dev"
TOOLS = {
    "search", "query", "list_documents", "document_tree", "read",
    "remember", "recall", "list_sessions", "forget", "ingest", "remove",
}
WRITING = {"remember", "forget", "ingest", "remove"}


@contextlib.asynccontextmanager
async def over_stdio(store: Path, *args: str, seen: list | None = None) -> AsyncIterator[ClientSession]:
    """A client session with `edudb mcp` on `store`, started as a desktop
    client starts it; notifications the server sends go to `seen`."""

    async def note(message: Any) -> None:
        if seen is not None:
            seen.append(message)

    params = StdioServerParameters(command=str(edudb_binary()), args=["--db", str(store), "mcp", *args])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=note) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def over_http(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """A client session with a server's `/mcp`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def demo_store(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    with edudb.open(path) as db:
        db.ingest(DEMO)
    return path


async def call(client: ClientSession, tool: str, /, **arguments: Any) -> Any:
    """A tool's answer, which must not be an error: (text, structured)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.content[0].text, result.structured_content


async def refusal(client: ClientSession, tool: str, /, **arguments: Any) -> tuple[str, dict]:
    """A tool's error: its text and structured content."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.content[0].text
    return result.content[0].text, result.structured_content


def test_every_tool_answers_with_text_and_structure(tmp_path: Path) -> None:
    path = demo_store(tmp_path)
    seen: list = []

    async def run() -> None:
        async with over_stdio(path, seen=seen) as session:
            listed = (await session.list_tools()).tools
            assert {tool.name for tool in listed} == TOOLS
            for tool in listed:
                assert tool.description, tool.name
                assert tool.input_schema["type"] == "object", tool.name
            schema = next(t for t in listed if t.name == "search").input_schema
            assert schema["required"] == ["question"]
            assert {"question", "budget", "scope", "method"} <= set(schema["properties"])

            text, documents = await call(session, "list_documents")
            ids = [d["id"] for d in documents["documents"]]
            assert ids and all(i in text for i in ids)

            # A search's spans are cited exactly: reading the cited EDUs
            # gives the same text.
            text, found = await call(session, "search", question="who reviews an RFC", budget=200)
            assert found["results"] and found["tokens_used"] <= 200
            for item in found["results"]:
                first, last = item["edus"]
                _, read = await call(session, "read", document=item["doc"], first=first, last=last)
                assert [e["id"] for e in read["edus"]] == list(range(first, last + 1))
                assert item["bytes"] == [read["edus"][0]["bytes"][0], read["edus"][-1]["bytes"][1]]
                assert all(e["text"] in item["text"] for e in read["edus"])
                assert f"[{item['doc']} · EDU" in text
            scoped = (await call(session, "search", question="RFC", scope=ids[0], method="hybrid"))[1]
            assert {i["doc"] for i in scoped["results"]} <= {ids[0]}

            _, planned = await call(session, "query", statement="SELECT FROM * SEED BM25($q) BUDGET $n TOKENS",
                                    params={"q": "process", "n": 64}, explain=True)
            assert planned["plan"] and planned["tokens_used"] <= 64

            text, tree = await call(session, "document_tree", document=ids[0], depth=1)
            assert all(not child["children"] for child in tree["children"])
            section = next(c for c in tree["children"] if c["kind"] == "section")
            assert f"#{section['id']} section [{section['span'][0]}-{section['span'][1]}]" in text
            _, node = await call(session, "read", document=ids[0], node=section["id"])
            assert node["edus"][0]["id"] == section["span"][0]

            text, receipt = await call(session, "remember", session="trip", text="We fly to Sapporo on Monday.",
                                       at="2026-05-01T09:00:00Z")
            assert receipt["turn"] == 0 and "turn 0" in text
            await call(session, "remember", session="trip", text="Sounds good.", role="assistant")
            text, context = await call(session, "recall", session="trip", query="when do we fly", budget=64)
            assert "Sapporo" in text and context["tokens_used"] <= 64
            _, sessions = await call(session, "list_sessions")
            assert [s["id"] for s in sessions["sessions"]] == ["trip"]
            # A turn's metadata is kept, and a query filters on it.
            _, kept = await call(session, "remember", session="trip", text="The ferry to Otaru is at noon.",
                                 metadata={"speaker": "Mel", "source": "chat"})
            _, found = await call(
                session, "query",
                statement="SELECT SPANS FROM session('trip') WHERE meta.speaker = $who SEED BM25($q) BUDGET 100 TOKENS",
                params={"who": "Mel", "q": "ferry Otaru noon fly"},
            )
            assert [i["doc"] for i in found["results"]] == [kept["doc"]]
            text, _ = await refusal(session, "remember", session="trip", text="x", metadata={"speaker": ["Mel", 1]})
            assert "speaker" in text

            _, stored = await call(session, "ingest", id="note", text="# Note\n\nThe ferry leaves at noon.")
            assert stored["documents"][0]["id"] == "note"
            resources = [r.uri for r in (await session.list_resources()).resources]
            assert "edudb://doc/note" in resources and "edudb://session/trip" in resources
            shown = (await session.read_resource("edudb://doc/note")).contents[0].text
            assert "Note" in shown
            shown = (await session.read_resource("edudb://session/trip")).contents[0].text
            assert "Sapporo" in shown
            await call(session, "remove", document="note")
            text, forgot = await call(session, "forget", session="trip", turn=0)
            assert forgot == {"session": "trip", "forgotten": 0} and "turn 0" in text
            text, context = await call(session, "recall", session="trip", query="when do we fly", budget=64)
            assert "Sapporo" not in text and all(i["turn"] != 0 for i in context["items"])
            shown = (await session.read_resource("edudb://session/trip")).contents[0].text
            assert "#0 user: (forgotten)" in shown
            await call(session, "forget", session="trip")
            assert (await call(session, "list_sessions"))[1]["sessions"] == []
            assert "note" not in [d["id"] for d in (await call(session, "list_documents"))[1]["documents"]]

    asyncio.run(run())
    changed = [m for m in seen if "list_changed" in str(getattr(m, "method", "")) or "ResourceListChanged" in type(m).__name__
               or "resources/list_changed" in str(m)]
    assert len(changed) >= 4, seen  # a new session, an ingest, a removal, a forgotten session


def test_wrong_arguments_bad_statements_and_missing_things_are_tool_errors(tmp_path: Path) -> None:
    path = demo_store(tmp_path)

    async def run() -> None:
        async with over_stdio(path) as session:
            text, _ = await refusal(session, "search", question="x", budgett=5)
            assert "budgett" in text
            text, _ = await refusal(session, "search", question="x", budget="many")
            assert "many" in text
            text, error = await refusal(session, "query", statement="SELECT FROM * SEED BM25('x')\nBUDGT 5")
            assert error["class"] == "user"
            assert (error["query"]["line"], error["query"]["column"]) == (2, 1)
            assert "line 2, column 1" in text and "BUDGET" in text
            text, error = await refusal(session, "query", statement="SELECT FROM * SEED BM25($q)", params={"q": True})
            assert "parameter $q is true: give a string, a number or an array of numbers" in text and error["class"] == "user"
            text, _ = await refusal(session, "ingest", id="x", text="hi", format="docx")
            assert "unknown format" in text
            text, error = await refusal(session, "document_tree", document="nowhere")
            assert "nowhere" in text and error["class"] == "user"
            text, _ = await refusal(session, "read", document="nowhere", first=0, last=3)
            assert "nowhere" in text
            text, _ = await refusal(session, "search", question="x", budget=10_000_000)
            assert "--max-budget" in text
            text, _ = await refusal(session, "recall", session="never")
            assert "never" in text
            text, _ = await refusal(session, "remember", session="s", text="hi", role="narrator")
            assert "narrator" in text
            text, _ = await refusal(session, "ingest", text="no id")
            assert "id" in text

    asyncio.run(run())


def test_search_takes_a_condition_on_metadata_and_pages(tmp_path: Path) -> None:
    path = tmp_path / "filed.db"
    teams = {}
    with edudb.open(path) as db:
        for number, source in enumerate(sorted(DEMO.glob("*.md"))):
            teams[source.stem] = "libs" if number % 2 else "core"
            db.ingest(source, metadata={"team": teams[source.stem], "year": 2014 + number})

    async def run() -> None:
        async with over_stdio(path, "--read-only") as session:
            schema = next(t for t in (await session.list_tools()).tools if t.name == "search").input_schema
            assert "where" in schema["properties"]
            # A question every RFC answers (its drawbacks and alternatives
            # sections), so that unfiltered the picks span both teams.
            question = "drawbacks and alternatives"
            everywhere = (await call(session, "search", question=question, budget=300))[1]["results"]
            assert {teams[i["doc"]] for i in everywhere} == {"core", "libs"}
            _, libs = await call(session, "search", question=question, budget=300, where="meta.team = 'libs'")
            assert libs["results"] and {teams[i["doc"]] for i in libs["results"]} == {"libs"}
            # Restricted before ranking: the budget fills from the matching documents.
            assert libs["tokens_used"] > 200
            _, late = await call(session, "search", question="RFC process", where="meta.year >= 2017 -- recent\n")
            assert late["results"] and all(i["doc"] >= "2124" for i in late["results"])
            text, error = await refusal(session, "search", question="x", where="meta.year >")
            assert error["class"] == "user" and (error["query"]["line"], error["query"]["column"]) == (1, 12), text
            # A condition cannot end its clause and add others.
            text, error = await refusal(session, "search", question="x", where="meta.team = 'core') LIMIT 1 --")
            assert error["class"] == "user" and "column 19" in text, text

    asyncio.run(run())


def test_read_only_hides_and_refuses_the_writing_tools(tmp_path: Path) -> None:
    path = demo_store(tmp_path)

    async def run() -> None:
        async with over_stdio(path, "--read-only") as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS - WRITING
            for tool in WRITING:
                text, _ = await refusal(session, tool, session="s", text="x")
                assert "read-only" in text, tool
            await call(session, "search", question="RFC")

    asyncio.run(run())
    with edudb.open(path) as db:
        assert db.sessions() == []


def test_files_are_read_only_from_the_allowed_directories(tmp_path: Path) -> None:
    path = demo_store(tmp_path)
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "inside.md").write_text("# Inside\n\nAllowed text.")
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\nSecret text.")
    (allowed / "link.md").symlink_to(outside)

    async def run() -> None:
        async with over_stdio(path) as session:
            text, _ = await refusal(session, "ingest", path=str(allowed / "inside.md"))
            assert "--allow-dir" in text
        async with over_stdio(path, "--allow-dir", str(allowed)) as session:
            _, stored = await call(session, "ingest", path=str(allowed / "inside.md"))
            assert [d["id"] for d in stored["documents"]] == ["inside"]
            for sneaky in (outside, allowed / "link.md", allowed / ".." / "outside.md"):
                text, _ = await refusal(session, "ingest", path=str(sneaky))
                assert "outside the directories" in text, sneaky
            # A directory's links are not followed.
            _, stored = await call(session, "ingest", path=str(allowed))
            assert [d["id"] for d in stored["documents"]] == ["inside"]

    asyncio.run(run())
    with edudb.open(path) as db:
        ids = {d.id for d in db.docs()}
    assert "inside" in ids and "outside" not in ids and "link" not in ids


def test_an_agent_over_stdio_and_one_over_http_share_a_served_store(tmp_path: Path) -> None:
    server = start_server(demo_store(tmp_path))
    per_client = 25

    async def append(session: ClientSession, who: str) -> None:
        for n in range(per_client):
            await call(session, "remember", session="shared", text=f"{who} says {n}.")

    async def run() -> None:
        async with over_stdio(server.path) as local, over_http(server.url) as remote:
            await asyncio.gather(append(local, "stdio"), append(remote, "http"))
            _, found = await call(remote, "list_sessions")
            assert found["sessions"][0]["turns"] == 2 * per_client

    try:
        asyncio.run(run())
        listing = subprocess.run(
            [str(edudb_binary()), "--db", str(server.path), "session", "show", "shared", "--json"],
            capture_output=True, text=True, check=True,
        )
        said = {turn["summary"]["text"] for topic in json.loads(listing.stdout)["topics"]
                for branch in topic["branches"] for turn in branch["turns"]}
        assert said == {f"{who} says {n}." for who in ("stdio", "http") for n in range(per_client)}
    finally:
        stop_server(server)


def test_http_mcp_keeps_the_servers_token_and_its_read_only_flag(tmp_path: Path) -> None:
    server = start_server(demo_store(tmp_path), "--token-env", "EDUDB_TEST_TOKEN", "--mcp-read-only",
                          env={"EDUDB_TEST_TOKEN": "s3cret"})
    try:
        refused = httpx2.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401

        async def run() -> None:
            async with over_http(server.url, token="s3cret") as session:
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS - WRITING
                await call(session, "search", question="RFC")
                text, _ = await refusal(session, "remember", session="s", text="x")
                assert "read-only" in text

        asyncio.run(run())
    finally:
        stop_server(server)


def locomo_turns(conversation: dict) -> list[dict]:
    """A LoCoMo conversation's turns as `remember` takes them: the first
    speaker as the user, the second as the assistant, each session's date
    as the time."""
    turns = []
    n = 1
    while f"session_{n}" in conversation:
        when = datetime.datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        at = when.replace(tzinfo=datetime.timezone.utc).isoformat()
        for turn in conversation[f"session_{n}"]:
            role = "user" if turn["speaker"] == conversation["speaker_a"] else "assistant"
            turns.append({"text": f"{turn['speaker']}: {turn['text']}", "role": role, "at": at})
        n += 1
    return turns


@pytest.mark.parametrize("conversation", ["49", "50"])
def test_recall_is_the_session_context_the_cli_gives(tmp_path: Path, conversation: str) -> None:
    data = json.loads((LOCOMO / f"{conversation}.json").read_text())
    path = tmp_path / "memory.db"
    edudb.open(path).close()
    questions = [qa["question"] for qa in data["qa"][:8]]
    budgets = (256, 1024)

    async def run() -> dict:
        recalled = {}
        async with over_stdio(path) as session:
            for turn in locomo_turns(data):
                await call(session, "remember", session="conv", **turn)
            for question in questions:
                for budget in budgets:
                    recalled[question, budget] = (await call(session, "recall", session="conv", query=question,
                                                             budget=budget))[1]
        return recalled

    recalled = asyncio.run(run())
    for (question, budget), context in recalled.items():
        cli = subprocess.run(
            [str(edudb_binary()), "--db", str(path), "session", "context", "conv", "--budget", str(budget),
             "--query", question, "--json"],
            capture_output=True, text=True, check=True,
        )
        assert context == json.loads(cli.stdout), (question, budget)
        assert context["items"], (question, budget)
