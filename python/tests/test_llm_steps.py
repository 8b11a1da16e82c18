"""The language-model steps from Python: ``Store.ask`` and the ``"llm"``
structurer and IP maker of ``Store.ingest``, in process and through a
server, against a scripted OpenAI-compatible chat server on loopback
(its answers follow the rules, so the results are exact)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import edudb
from conftest import start_server, stop_server

TOWNS = "".join(
    f"Town {i} lies beside the river Aro{i}. Its mayor Mira{i} opened a library in {1900 + i}.\n\n"
    for i in range(60)
)


def scripted_reply(request: Dict[str, Any]) -> Dict[str, Any]:
    """What the chat server answers a request, by its schema's name."""
    name = request["response_format"]["json_schema"]["name"]
    user = request["messages"][1]["content"]
    if name == "outline":
        numbers = [int(n) for n in re.findall(r"^\[(\d+)\]", user, re.M)]
        reply: Dict[str, Any] = {
            "sections": [{"level": 1, "first": numbers[0], "last": numbers[-1], "title": "Town"}]
        }
    elif name == "information_points":
        first = re.search(r"^Part 1: ([^.]*\.)", user, re.M)
        reply = {"points": [first.group(1) if first else "Town.", "Quantum zebras orbit Neptune."]}
    elif name == "judgement":
        new = user.split("New passages:")[-1]
        reply = {"relevant": [int(n) for n in re.findall(r"^\[(\d+)\]", new, re.M)], "enough": True}
    elif name == "answer":
        reply = {"answer": "Mira7 opened it.", "citations": [1]}
    else:
        raise AssertionError(f"unexpected request {name}")
    return {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": json.dumps(reply)}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


class ChatHandler(BaseHTTPRequestHandler):
    asked: List[str] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatHandler.asked.append(body["response_format"]["json_schema"]["name"])
        answer = json.dumps(scripted_reply(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat_url() -> Iterator[str]:
    """The base URL of a scripted chat server."""
    ChatHandler.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def check_model_steps(db: edudb.Store, towns: Path) -> None:
    report = db.ingest(towns, structurer="llm", ip_maker="llm")
    assert [d.id for d in report.documents] == ["towns"]
    assert report.llm is not None
    assert report.llm.calls == len(ChatHandler.asked) > 1
    assert report.llm.dropped_points == 1
    assert db.tree("towns").children[0].title == "Town"
    written = [n for n in db.dag("towns").nodes if n.written]
    assert written and all(n.text.endswith(".") for n in written)
    # The bytes of one document, with the model's tree.
    assert db.ingest(b"Town 2 lies beside a river.", id="town", structurer="llm").documents[0].id == "town"
    result = db.ask("Who opened a library in 1907?", budget=64)
    assert result.stopped == "enough"
    assert result.answer == "Mira7 opened it."
    assert result.citations == [1] and result.cited == [result.evidence[0]]
    cited = result.cited[0]
    assert TOWNS[cited.bytes[0] : cited.bytes[1]] == cited.text
    assert result.cost.calls == 2 and result.steps[0].judged_by == "model"
    assert db.ask("library", answer=False).answer is None
    with pytest.raises(edudb.UserError):
        db.ask("library", group=0)
    with pytest.raises(edudb.UserError):
        db.ingest(towns, structurer="oracle")


def test_model_steps_in_process(tmp_path: Path, chat_url: str) -> None:
    towns = tmp_path / "towns.txt"
    towns.write_text(TOWNS)
    with edudb.open(tmp_path / "db", llm_url=chat_url, llm_model="scripted") as db:
        check_model_steps(db, towns)
    with edudb.open(tmp_path / "plain.db") as db:
        with pytest.raises(edudb.UserError, match="chat model"):
            db.ask("library")
    with pytest.raises(edudb.UserError, match="llm_model"):
        edudb.open(tmp_path / "half.db", llm_url=chat_url)


def test_model_steps_through_a_server(tmp_path: Path, chat_url: str) -> None:
    towns = tmp_path / "towns.txt"
    towns.write_text(TOWNS)
    server = start_server(tmp_path / "served.db", "--llm-url", chat_url, "--llm-model", "scripted")
    try:
        with edudb.connect(server.url) as db:
            check_model_steps(db, towns)
    finally:
        stop_server(server)
