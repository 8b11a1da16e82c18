//! `edudb serve`: one process owns a store and serves it to every other
//! over HTTP/JSON (axum on tokio), on a TCP address and on a Unix socket
//! inside the store directory ([`SOCKET_FILE`]).
//!
//! Bodies are the CLI's JSON contracts (`docs --json`, `query --json`, …).
//! Reads run concurrently on the server's read pool (`reads`; the
//! engine's searches never wait on its writer), `ask` (it waits on a chat
//! model) and `check` (it reads the whole store) on blocking threads;
//! writes are serialised, at most one at a time with a bounded queue behind
//! it, and a full queue answers "busy" at once.
//! Every error is `{"error": {"class", "message", …}}` with the CLI's exit
//! classes: `user` (HTTP 400, or 404 for a missing document, session, turn
//! or topic), `busy` (503: nothing was done, retry) and `internal` (500,
//! with `"damage": true` when stored records are damaged; 504 for a write
//! that ran past the request timeout and goes on, its outcome unknown).
//! Loopback only unless a bearer token is set. On shutdown (the
//! [`CancelToken`](crate::progress::CancelToken), or SIGINT/SIGTERM when
//! [`ServeOptions::stop_on_signals`]) open requests get the request timeout
//! to be answered, connections still open then are dropped, work already
//! started on the store finishes, the socket is removed and the store is
//! closed (flushed). A store abandoned after a failure in its file system
//! (a full disk) stops the server by itself, with that error.
//!
//! The routes (all under `/v1` but `/openapi.json`, which describes them):
//!
//! | route | body or query | answer |
//! |---|---|---|
//! | `GET /openapi.json` | | this API's OpenAPI 3.1 document (`src/serve/openapi.json`) |
//! | `GET /health` | | `{store, version, max_body_bytes}` |
//! | `GET /docs` | `where` (a condition on metadata; none: all) | `docs --json` |
//! | `PUT /docs/{id}` | the document's bytes; `format` (else sniffed) | `ingest --json`'s document |
//! | `DELETE /docs/{id}` | | `rm --json` |
//! | `POST /ingest` | `{documents: [{id, text or data_base64 (a PDF), format?, metadata?}], structurer?, ip_maker?, metadata?}` | a job's status (202) |
//! | `POST /prepared` | prepared documents (each its length, u64 little-endian, then its bytes; see `storage::prepared`) | `{documents}`, written in one atomic batch |
//! | `GET /jobs/{job}` | | the job's status; once it ended, its documents and failures, or its error |
//! | `DELETE /jobs/{job}` | | cancels the job; its status |
//! | `GET /docs/{id}/tree` | | `tree --json` |
//! | `GET /docs/{id}/edus` | `first`, `last` (inclusive; none: all) | `show --json` |
//! | `GET /docs/{id}/pages` | | a PDF's pages and lines with their bytes and boxes; null for other formats |
//! | `GET /docs/{id}/dag` | `level` | `dag --json` |
//! | `GET /docs/{id}/metadata` | | `meta DOC --json` |
//! | `PATCH /docs/{id}/metadata` | `{set?: {key: value}, unset?: [key]}` | `meta DOC set --json` |
//! | `GET /stats` | | `stats --json` |
//! | `GET /check` | | `check --json` |
//! | `POST /reindex` | | `reindex --json` |
//! | `POST /backup` | `{dest}` (a new directory; absolute, on the server's machine) | `backup DEST --json` |
//! | `POST /vacuum` | | `vacuum --json` (every other request waits for it) |
//! | `GET /search` | `q`, `limit` (10) | `search --json` |
//! | `POST /ask` | `{question, budget?, statement?, group?, answer?}` | `ask --json` |
//! | `POST /query` | `{statement, params: {name: text or number}, explain?}` | `query --json` |
//! | `GET /sessions` | | `session ls --json` |
//! | `GET /sessions/{id}` | | `session show --json` |
//! | `DELETE /sessions/{id}` | | `session rm --json` |
//! | `DELETE /sessions/{id}/turns/{turn}` | | `session forget --json` |
//! | `POST /sessions/{id}/turns` | `{text, role, at, placement}` (a `session add --jsonl` line) | `session add --json` |
//! | `GET /sessions/{id}/context` | `budget`, `query` | `session context --json` |
//! | `POST /cli` (the socket only) | a [`CommandRequest`] | a [`CommandOutput`] |
//!
//! Beside them, `/mcp` (not under `/v1`) serves the store to MCP clients
//! over streamable HTTP ([`mcp`]), behind the same token.

mod api;
mod client;
mod failure;
mod forwarding;
mod handlers;
mod jobs;
pub mod mcp;
mod reads;
mod routes;
mod scheduling;
mod served;
mod server;

pub use api::Api;
pub use client::{Client, CommandOutput, CommandRequest};
pub use forwarding::{CommandRunner, SOCKET_FILE, forward, live_socket};
pub use served::Served;
pub use server::{Bound, ServeOptions, run};
