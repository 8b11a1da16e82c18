"""What MCP costs an agent, measured in one run and printed as a table
(run by `.ci/python mcp-bench [--quick]` from the repository root):

- a `search` tool call over stdio (`edudb mcp`, one session kept open, as
  an agent keeps it; through the SDK's client, and as raw JSON-RPC lines,
  which is the server's and the pipe's own cost) against the same
  statement run directly: in-process
  through the Python package, and as an `edudb query` command (the CLI
  opening the store itself); the issue's target is at most 2x the direct
  path;
- `remember` over `/mcp` of a served store (streamable HTTP), p50 and p99
  (target: p50 at most 20 ms), beside `session add` through the Python
  package's client of the same server.

The store holds the Rust RFCs of ../shared/data (648 Markdown documents).
Systems alternate per question so that drift in the machine hits each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import edudb
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
RFCS = ROOT.parent / "shared" / "data" / "rust_rfcs" / "text"
BINARY = Path(os.environ.get("EDUDB_BIN", ROOT / "target" / "release" / "edudb"))
# The statement the `search` tool runs for a question (src/serve/mcp/tools.rs).
SEARCH = "SELECT SPANS FROM * SEED BM25($question) PROPAGATE BUDGET $budget TOKENS"
BUDGET = 1024
QUESTIONS = [
    "unsafe operations in unsafe functions",
    "trait objects and dynamic dispatch",
    "error handling with the question mark operator",
    "lifetime elision rules",
    "macro hygiene and expansion",
    "how are RFCs approved",
    "const generics and array lengths",
    "async functions in traits",
]


def quantiles(samples: list) -> tuple:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def cli_query(store: Path, question: str) -> None:
    subprocess.run(
        [str(BINARY), "--db", str(store), "query", SEARCH, "-p", f"question={question}", "-p", f"budget={BUDGET}",
         "--json"],
        check=True, capture_output=True,
    )


async def over_stdio(store: Path, rounds: int) -> dict:
    """Per question: the stdio `search` call, the in-process query and the
    CLI command, alternated."""
    times = {"mcp": [], "mcp_raw": [], "in_process": [], "cli": []}
    params = StdioServerParameters(command=str(BINARY), args=["--db", str(store), "mcp"])
    # The store is opened by one process at a time: the in-process and CLI
    # rounds run between MCP sessions. Each session and each opening first
    # asks every question once, untimed (a long-lived agent's session is
    # warm: its documents are cached), then asks them again, timed.
    for _ in range(rounds):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for timed in (False, True):
                    for question in QUESTIONS:
                        started = time.perf_counter()
                        result = await session.call_tool("search", {"question": question, "budget": BUDGET})
                        if timed:
                            times["mcp"].append(time.perf_counter() - started)
                        assert not result.is_error, result.content[0].text
        times["mcp_raw"] += raw_searches(store)
        with edudb.open(store) as db:
            for timed in (False, True):
                for question in QUESTIONS:
                    started = time.perf_counter()
                    db.query(SEARCH, question=question, budget=BUDGET)
                    if timed:
                        times["in_process"].append(time.perf_counter() - started)
        for question in QUESTIONS[:2]:
            started = time.perf_counter()
            cli_query(store, question)
            times["cli"].append(time.perf_counter() - started)
    return times


def raw_searches(store: Path) -> list:
    """The same searches over stdio by JSON-RPC lines written and read
    here, without the SDK's client: what the server and the pipe cost."""
    server = subprocess.Popen([str(BINARY), "--db", str(store), "mcp"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(message: dict) -> None:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        server.stdin.flush()

    send({"id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    server.stdout.readline()
    send({"method": "notifications/initialized"})
    times = []
    for timed in (False, True):
        for n, question in enumerate(QUESTIONS):
            started = time.perf_counter()
            send({"id": n + 1, "method": "tools/call",
                  "params": {"name": "search", "arguments": {"question": question, "budget": BUDGET}}})
            answer = json.loads(server.stdout.readline())
            if timed:
                times.append(time.perf_counter() - started)
            assert not answer["result"].get("isError"), answer
    server.stdin.close()
    server.wait(timeout=60)
    return times


async def remembering(url: str, turns: int) -> list:
    times = []
    async with httpx2.AsyncClient(timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for n in range(turns):
                    started = time.perf_counter()
                    result = await session.call_tool("remember", {"session": "bench", "text": f"Turn {n}: we talk about item {n % 17}."})
                    times.append(time.perf_counter() - started)
                    assert not result.is_error, result.content[0].text
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and turns")
    args = parser.parse_args()
    rounds, turns = (2, 100) if args.quick else (6, 400)
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "rfcs.db"
        started = time.perf_counter()
        with edudb.open(store) as db:
            db.ingest(RFCS, format="markdown")
        built = time.perf_counter() - started
        searched = asyncio.run(over_stdio(store, rounds))

        served = Path(work) / "served.db"
        edudb.open(served).close()
        server = subprocess.Popen(
            [str(BINARY), "--db", str(served), "serve", "--listen", "127.0.0.1:0", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            url = "http://" + json.loads(server.stdout.readline())["listen"]
            remembered = asyncio.run(remembering(url, turns))
            client = edudb.connect(url)
            added = []
            for n in range(turns):
                started = time.perf_counter()
                client.add_turn("direct", f"Turn {n}: we talk about item {n % 17}.")
                added.append(time.perf_counter() - started)
        finally:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=60)

    print(f"machine: {platform.node()} ({os.cpu_count()} cores), {time.strftime('%Y-%m-%d')}; store built in {built:.1f} s")
    print(f"search at {BUDGET} tokens over {len(QUESTIONS)} questions x {rounds} rounds (p50 / p99 ms):")
    mcp = quantiles(searched["mcp"])
    for name in ("mcp", "mcp_raw", "in_process", "cli"):
        p50, p99 = quantiles(searched[name])
        print(f"  {name:<11} {p50 * 1e3:8.2f} {p99 * 1e3:8.2f}   mcp / this at p50: {mcp[0] / p50:5.2f}x")
    print(f"remember on a served store, {turns} turns (p50 / p99 ms):")
    for name, samples in (("mcp /mcp", remembered), ("add_turn", added)):
        p50, p99 = quantiles(samples)
        print(f"  {name:<11} {p50 * 1e3:8.2f} {p99 * 1e3:8.2f}")


if __name__ == "__main__":
    main()
