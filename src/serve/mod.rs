//! `edudb serve`: one process owns a store and serves it to every other
//! over HTTP/JSON (axum on tokio), on a TCP address and on a Unix socket
//! inside the store directory ([`SOCKET_FILE`]).
//!
//! Bodies are the CLI's JSON contracts (`docs --json`, `query --json`, …).
//! Reads run concurrently on the server's read pool ([`reads`]; the
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
//! [`CancelToken`], or SIGINT/SIGTERM when
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
//! | `GET /docs` | | `docs --json` |
//! | `PUT /docs/{id}` | the document's bytes; `format` (else sniffed) | `ingest --json`'s document |
//! | `DELETE /docs/{id}` | | `rm --json` |
//! | `POST /ingest` | `{documents: [{id, text or data_base64 (a PDF), format?}], structurer?, ip_maker?}` | a job's status (202) |
//! | `GET /jobs/{job}` | | the job's status; once it ended, its documents and failures, or its error |
//! | `DELETE /jobs/{job}` | | cancels the job; its status |
//! | `GET /docs/{id}/tree` | | `tree --json` |
//! | `GET /docs/{id}/edus` | `first`, `last` (inclusive; none: all) | `show --json` |
//! | `GET /docs/{id}/pages` | | a PDF's pages and lines with their bytes and boxes; null for other formats |
//! | `GET /docs/{id}/dag` | `level` | `dag --json` |
//! | `GET /stats` | | `stats --json` |
//! | `GET /check` | | `check --json` |
//! | `POST /reindex` | | `reindex --json` |
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

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

mod api;
mod client;
mod jobs;
pub mod mcp;
mod reads;

pub use api::Api;
pub use client::{Client, CommandOutput, CommandRequest};

use crate::ask::AskOptions;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::{Origin, Source};
use crate::memory::TurnInput;
use crate::model::document::Format;
use crate::progress::{CancelToken, NoProgress};
use crate::query::Params;

/// The Unix socket a server listens on, inside the store directory.
pub const SOCKET_FILE: &str = crate::engine::SOCKET_FILE;

/// Runs a command line of the `edudb` binary against the served store, for
/// `POST /v1/cli` (the binary supplies it, so that its commands go through
/// a running server and print what they print without one).
pub trait CommandRunner: Send + Sync + std::fmt::Debug {
    /// Runs `request` on `db`.
    fn run(&self, db: &Db, request: CommandRequest) -> CommandOutput;
}

/// The socket of a live server of the store at `store`, if one answers.
pub fn live_socket(store: &std::path::Path) -> Option<PathBuf> {
    let socket = store.join(SOCKET_FILE);
    std::os::unix::net::UnixStream::connect(&socket)
        .ok()
        .map(|_| socket)
}

/// Sends `request` to the server listening on `socket` and returns what the
/// command printed.
pub fn forward(socket: &std::path::Path, request: &CommandRequest) -> Result<CommandOutput> {
    Client::over_socket(socket)?.run_command(request)
}

/// How [`run`] serves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The TCP address (port 0: any free port). Beyond loopback only with
    /// a `token`.
    pub listen: SocketAddr,
    /// A bearer token every request must present (`Authorization: Bearer
    /// …`), compared in constant time.
    pub token: Option<String>,
    /// Also listen on the store's [`SOCKET_FILE`].
    pub unix_socket: bool,
    /// The largest request body accepted (413 above it).
    pub max_body_bytes: usize,
    /// How long a request may run before the answer is "busy" (the work
    /// itself finishes in the background); also how long a stopping server
    /// waits for open requests before it drops their connections.
    pub request_timeout: Duration,
    /// Writes that may wait behind the running one; more are refused as
    /// busy at once.
    pub write_queue: usize,
    /// Stop on SIGINT and SIGTERM too (the CLI sets it).
    pub stop_on_signals: bool,
    /// What runs forwarded command lines (`POST /v1/cli`); without it that
    /// route answers 404.
    pub commands: Option<Arc<dyn CommandRunner>>,
    /// What `/mcp` (the store as an MCP server over streamable HTTP) lets
    /// a model do; without it that route answers 404.
    pub mcp: Option<mcp::McpOptions>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            unix_socket: true,
            max_body_bytes: 16 << 20,
            request_timeout: Duration::from_secs(60),
            write_queue: 64,
            stop_on_signals: false,
            commands: None,
            mcp: Some(mcp::McpOptions::default()),
        }
    }
}

/// Where a started server listens (given to [`run`]'s `ready`).
#[derive(Debug, Clone)]
pub struct Bound {
    /// The TCP address, with the port chosen when 0 was asked for.
    pub address: SocketAddr,
    /// The Unix socket, when one was asked for.
    pub socket: Option<PathBuf>,
}

/// What every handler shares.
struct Shared {
    db: Arc<Db>,
    token: Option<String>,
    commands: Option<Arc<dyn CommandRunner>>,
    timeout: Duration,
    /// The largest request body taken (the health answer tells clients).
    max_body_bytes: usize,
    /// One permit: the running write.
    writer: Arc<Semaphore>,
    /// The write queue's places (the running write holds one too).
    queue: Arc<Semaphore>,
    /// Ingest jobs.
    jobs: jobs::Jobs,
    /// Where reads run.
    reads: reads::ReadPool,
    /// Set when the store failed in its file system and its handle was
    /// abandoned ([`Error::Abandoned`]): every later request would fail, so
    /// the server stops, with this as its error.
    abandoned: std::sync::OnceLock<String>,
}

impl Shared {
    /// Notes an error from the store: an abandoned store stops the server.
    fn note<T>(&self, result: &Result<T>) {
        if let Err(err) = result
            && self.db.is_abandoned()
        {
            let _ = self.abandoned.set(err.to_string());
        }
    }
}

/// Serves `db` until `shutdown` is cancelled (or a signal arrives, see
/// [`ServeOptions::stop_on_signals`]), then closes it. `ready` is called
/// once the listeners are bound. Fails when an address cannot be bound or
/// a non-loopback address has no token.
pub fn run(
    db: Db,
    options: &ServeOptions,
    ready: impl FnOnce(&Bound),
    shutdown: &CancelToken,
) -> Result<()> {
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        return Err(Error::Usage(format!(
            "serving on {} (beyond loopback) needs a bearer token (--token-env VAR)",
            options.listen
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Serve(format!("starting the runtime: {e}")))?;
    let socket_path = db.path().join(SOCKET_FILE);
    let shared = Arc::new(Shared {
        db: Arc::new(db),
        token: options.token.clone(),
        commands: options.commands.clone(),
        timeout: options.request_timeout,
        max_body_bytes: options.max_body_bytes,
        writer: Arc::new(Semaphore::new(1)),
        queue: Arc::new(Semaphore::new(options.write_queue + 1)),
        jobs: jobs::Jobs::default(),
        reads: reads::ReadPool::new()?,
        abandoned: std::sync::OnceLock::new(),
    });
    let result = runtime.block_on(serve(
        Arc::clone(&shared),
        options,
        socket_path.clone(),
        ready,
        shutdown,
    ));
    // Work still running (a request past its timeout, an ingest job, asked
    // to stop) ends before the store closes.
    shared.jobs.cancel_all();
    drop(runtime);
    shared.reads.wait_idle();
    if options.unix_socket {
        let _ = std::fs::remove_file(&socket_path);
    }
    result?;
    match shared.abandoned.get() {
        Some(cause) => Err(Error::Serve(format!(
            "the store failed in its file system and this process cannot use it again, so the server stopped: {cause}"
        ))),
        None => Ok(()),
    }
}

async fn serve(
    shared: Arc<Shared>,
    options: &ServeOptions,
    socket_path: PathBuf,
    ready: impl FnOnce(&Bound),
    shutdown: &CancelToken,
) -> Result<()> {
    let bind_error = |what: String| move |e: std::io::Error| Error::Serve(format!("{what}: {e}"));
    let tcp = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(bind_error(format!("listening on {}", options.listen)))?;
    let address = tcp
        .local_addr()
        .map_err(bind_error("the bound address".into()))?;
    let unix = if options.unix_socket {
        // The store's lock is held here, so a socket file left behind can
        // only be a dead server's.
        let _ = std::fs::remove_file(&socket_path);
        Some(
            tokio::net::UnixListener::bind(&socket_path).map_err(bind_error(format!(
                "listening on {}",
                socket_path.display()
            )))?,
        )
    } else {
        None
    };
    // One MCP service for both listeners, so a session opened on one is
    // known on the other; its streams end when the server stops.
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    let mcp = options.mcp.clone().map(|mcp_options| {
        let api: Arc<dyn Api + Send + Sync> = Arc::clone(&shared.db) as _;
        mcp::http_service(
            api,
            mcp_options,
            options.token.is_some(),
            options.max_body_bytes,
            &mcp_stop,
        )
    });
    let app = router(
        Arc::clone(&shared),
        options.max_body_bytes,
        false,
        mcp.clone(),
    );
    // Listening before saying so: a signal sent as soon as the server is
    // ready must stop it, not kill it.
    let signals = options.stop_on_signals.then(StopSignals::listen).flatten();
    ready(&Bound {
        address,
        socket: unix.as_ref().map(|_| socket_path.clone()),
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let watcher = tokio::spawn(wait_for_stop(
        shutdown.clone(),
        Arc::clone(&shared),
        signals,
        stop,
    ));
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|&s| s).await;
    };
    // Answers are small: send each at once rather than wait for an ACK.
    let tcp = axum::serve::ListenerExt::tap_io(tcp, |stream| {
        let _ = stream.set_nodelay(true);
    });
    // Once stopping, requests already running get the request timeout to
    // be answered; connections still open after it (a client that stopped
    // in the middle of a request) are dropped rather than awaited. Work on
    // the store that was started still finishes before it closes.
    let grace = options.request_timeout;
    let cut_off = {
        let stopped = stopped.clone();
        async move {
            until_stopped(stopped).await;
            tokio::time::sleep(grace).await;
        }
    };
    let ending_streams = tokio::spawn({
        let stopped = stopped.clone();
        async move {
            until_stopped(stopped).await;
            mcp_stop.cancel();
        }
    });
    let over_tcp =
        axum::serve(tcp, app.clone()).with_graceful_shutdown(until_stopped(stopped.clone()));
    let served = async {
        match unix {
            Some(unix) => {
                // Forwarded command lines read the server's files, so only
                // local processes (the socket's file permissions) may send
                // them.
                let local = router(shared, options.max_body_bytes, true, mcp);
                let over_unix =
                    axum::serve(unix, local).with_graceful_shutdown(until_stopped(stopped));
                tokio::try_join!(over_tcp.into_future(), over_unix.into_future()).map(drop)
            }
            None => over_tcp.await,
        }
    };
    let served = tokio::select! {
        served = served => served,
        () = cut_off => Ok(()),
    };
    watcher.abort();
    ending_streams.abort();
    served.map_err(|e| Error::Serve(format!("serving: {e}")))
}

/// SIGTERM and SIGINT, caught from the moment they are listened for.
struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Catches both signals from now on (within the runtime); `None` when
    /// they cannot be caught, as the server then stops only when told.
    fn listen() -> Option<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(StopSignals {
            terminate: signal(SignalKind::terminate()).ok()?,
            interrupt: signal(SignalKind::interrupt()).ok()?,
        })
    }
}

/// Resolves `stop` once `shutdown` is cancelled, the store was abandoned
/// or, with `signals`, on SIGINT or SIGTERM.
async fn wait_for_stop(
    shutdown: CancelToken,
    shared: Arc<Shared>,
    signals: Option<StopSignals>,
    stop: tokio::sync::watch::Sender<bool>,
) {
    let cancelled = async {
        while !shutdown.is_cancelled() && shared.abandoned.get().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let signalled = async {
        let Some(mut signals) = signals else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = signals.terminate.recv() => {}
            _ = signals.interrupt.recv() => {}
        }
    };
    tokio::select! {
        () = cancelled => {}
        () = signalled => {}
    }
    let _ = stop.send(true);
}

/// The routes; `command_lines` adds `POST /v1/cli` (the socket's only),
/// `mcp` the MCP service at `/mcp`.
fn router(
    shared: Arc<Shared>,
    max_body_bytes: usize,
    command_lines: bool,
    mcp: Option<McpService>,
) -> Router {
    let routes = Router::new()
        .route("/openapi.json", get(openapi))
        .route("/v1/health", get(health))
        .route("/v1/docs", get(documents))
        .route("/v1/docs/{id}", put(ingest).delete(remove))
        .route("/v1/ingest", post(ingest_job))
        .route("/v1/jobs/{job}", get(job_status).delete(cancel_job))
        .route("/v1/docs/{id}/tree", get(tree))
        .route("/v1/docs/{id}/edus", get(edus))
        .route("/v1/docs/{id}/pages", get(pages))
        .route("/v1/docs/{id}/dag", get(dag))
        .route("/v1/stats", get(stats))
        .route("/v1/check", get(check))
        .route("/v1/reindex", post(reindex))
        .route("/v1/search", get(search))
        .route("/v1/query", post(query))
        .route("/v1/ask", post(ask))
        .route("/v1/sessions", get(sessions))
        .route("/v1/sessions/{id}", get(session).delete(remove_session))
        .route("/v1/sessions/{id}/turns", post(add_turn))
        .route("/v1/sessions/{id}/turns/{turn}", delete(forget_turn))
        .route("/v1/sessions/{id}/context", get(context));
    let routes = if command_lines {
        routes.route("/v1/cli", post(command))
    } else {
        routes
    };
    let routes = match mcp {
        Some(service) => routes.nest_service("/mcp", service),
        None => routes,
    };
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            authorise,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::map_response(move |response| {
            json_errors(response, max_body_bytes)
        }))
        .with_state(shared)
}

/// Gives the framework's own refusals (a path or query string that does
/// not parse, a body over the limit, a method a route lacks), which are
/// plain text or empty, the JSON error shape of every other error; a body
/// over the limit, refused by the framework or by a handler's JSON
/// extractor, is told the limit (`max_body_bytes`). Other headers
/// (`Allow`) are kept.
async fn json_errors(response: Response, max_body_bytes: usize) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let too_large = status == StatusCode::PAYLOAD_TOO_LARGE;
    if (is_json && !too_large) || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if too_large {
        format!(
            "the request body is over this server's limit of {max_body_bytes} bytes (GET /v1/health gives it as max_body_bytes)"
        )
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    let class = if status.is_server_error() {
        "internal"
    } else {
        "user"
    };
    let mut answer = Failure::new(status, class, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}

/// A failed request: the error class, its HTTP status and the message.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    class: &'static str,
    message: String,
    /// Query errors' location and hint.
    located: Option<Value>,
    /// The error is damage to stored records.
    damage: bool,
}

impl Failure {
    fn new(status: StatusCode, class: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            class,
            message: message.into(),
            located: None,
            damage: false,
        }
    }

    fn user(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure::new(status, "user", message)
    }

    fn busy(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
    }

    fn internal(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        let message = err.to_string();
        if err.is_busy() {
            return Failure::busy(message);
        }
        if !err.is_user_error() {
            return Failure {
                damage: err.is_damage(),
                ..Failure::internal(message)
            };
        }
        let status = match err {
            Error::NoSuchDocument(_)
            | Error::NoSuchSession(_)
            | Error::NoSuchTurn { .. }
            | Error::NoSuchTopic { .. } => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        let located = api::located(&err);
        Failure {
            located,
            ..Failure::user(status, message)
        }
    }
}

impl From<JsonRejection> for Failure {
    fn from(rejection: JsonRejection) -> Failure {
        Failure::user(rejection.status(), rejection.body_text())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut error = json!({"class": self.class, "message": self.message});
        if let (Some(located), Some(fields)) = (self.located, error.as_object_mut()) {
            fields.insert("query".into(), located);
        }
        if self.damage {
            error["damage"] = json!(true);
        }
        (self.status, Json(json!({ "error": error }))).into_response()
    }
}

type Answer = std::result::Result<Json<Value>, Failure>;

/// `/mcp`'s service.
type McpService = rmcp::transport::streamable_http_server::StreamableHttpService<
    mcp::McpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
>;

/// Runs `work` on the served store on a blocking thread.
fn on_store<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce(&Db) -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let db = Arc::clone(&shared.db);
    tokio::task::spawn_blocking(move || work(&db))
}

/// What a task on a blocking thread gave, or why it gave nothing.
async fn joined<T>(task: tokio::task::JoinHandle<T>) -> std::result::Result<T, String> {
    task.await.map_err(|e| e.to_string())
}

/// Runs a read on the read pool, concurrently with other requests; one
/// past the request timeout is answered "busy" (repeating a read is
/// harmless) while it finishes in the background.
async fn read(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Db) -> Result<Value> + Send + 'static,
) -> Answer {
    let db = Arc::clone(&shared.db);
    answer_read(shared, shared.reads.run(move || work(&db))).await
}

/// Runs a read that waits on a model server or reads the whole store as
/// [`read`] does, but on a blocking thread, so it holds no thread of the
/// read pool for long.
async fn read_waiting(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Db) -> Result<Value> + Send + 'static,
) -> Answer {
    answer_read(shared, joined(on_store(shared, work))).await
}

/// The answer of a running read, or "busy" once it is past the timeout.
async fn answer_read(
    shared: &Shared,
    task: impl Future<Output = std::result::Result<Result<Value>, String>>,
) -> Answer {
    let late = || {
        Failure::busy(format!(
            "the request ran past {} s; it finishes in the background",
            shared.timeout.as_secs_f64()
        ))
    };
    within(shared, task, late).await
}

/// Runs a write after the ones before it, or refuses it as busy (nothing
/// done) when the queue is full or the earlier writes outlast the request
/// timeout. The write keeps its place in the queue until it has run, even
/// past its answer. A write past the request timeout is not "busy": it goes
/// on, so its outcome is unknown to the caller, and repeating it could
/// apply it twice.
async fn write(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Db) -> Result<Value> + Send + 'static,
) -> Answer {
    let Ok(place) = Arc::clone(&shared.queue).try_acquire_owned() else {
        return Err(Failure::busy("the write queue is full; retry"));
    };
    let waited = tokio::time::timeout(shared.timeout, Arc::clone(&shared.writer).acquire_owned());
    let Ok(Ok(turn)) = waited.await else {
        return Err(Failure::busy("timed out waiting for earlier writes; retry"));
    };
    let task = on_store(shared, move |db| {
        let _held = (place, turn);
        work(db)
    });
    let late = || {
        Failure::new(
            StatusCode::GATEWAY_TIMEOUT,
            "internal",
            format!(
                "the write ran past {} s and goes on in the background: its outcome is unknown until it ends, so read before repeating it",
                shared.timeout.as_secs_f64()
            ),
        )
    };
    within(shared, joined(task), late).await
}

/// The answer of `task`, or `late()` once the request timeout has passed.
async fn within(
    shared: &Shared,
    task: impl Future<Output = std::result::Result<Result<Value>, String>>,
    late: impl FnOnce() -> Failure,
) -> Answer {
    match tokio::time::timeout(shared.timeout, task).await {
        Err(_) => Err(late()),
        Ok(Err(why)) => Err(Failure::internal(format!("the request failed: {why}"))),
        Ok(Ok(result)) => {
            shared.note(&result);
            result.map(Json).map_err(Failure::from)
        }
    }
}

/// Refuses requests without the bearer token, when one is set.
async fn authorise(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if let Some(token) = &shared.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
            return Failure::user(StatusCode::UNAUTHORIZED, "a valid bearer token is required")
                .into_response();
        }
    }
    next.run(request).await
}

async fn not_found(request: Request) -> Failure {
    Failure::user(
        StatusCode::NOT_FOUND,
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}

/// `GET /openapi.json`: the OpenAPI 3.1 document of these routes. Behind
/// the bearer token, when one is set, like every route (`/v1/health` too).
async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
}

async fn health(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "store": shared.db.path().display().to_string(),
        "version": env!("CARGO_PKG_VERSION"),
        "max_body_bytes": shared.max_body_bytes,
    }))
}

async fn documents(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, Api::documents).await
}

async fn tree(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::tree(db, &id)).await
}

async fn pages(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::pages(db, &id)).await
}

/// `GET /v1/docs/{id}/edus`' query string: an inclusive EDU range, or
/// none for all.
#[derive(Deserialize)]
struct EduRange {
    first: Option<u32>,
    last: Option<u32>,
}

async fn edus(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(range): Query<EduRange>,
) -> Answer {
    let range = match (range.first, range.last) {
        (None, None) => None,
        (Some(first), last) => Some((first, last.unwrap_or(first))),
        (None, Some(_)) => {
            return Err(Failure::user(
                StatusCode::BAD_REQUEST,
                "`last` needs `first` (an inclusive EDU range)",
            ));
        }
    };
    read(&shared, move |db| Api::edus(db, &id, range)).await
}

/// `GET /v1/docs/{id}/dag`'s query string.
#[derive(Deserialize)]
struct DagArgs {
    level: Option<u16>,
}

async fn dag(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(args): Query<DagArgs>,
) -> Answer {
    read(&shared, move |db| Api::dag_listing(db, &id, args.level)).await
}

/// `PUT /v1/docs/{id}`'s query string.
#[derive(Deserialize)]
struct IngestArgs {
    format: Option<String>,
}

/// Stores the request body as document `id` (replacing one of that id),
/// in the format given or sniffed.
async fn ingest(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(args): Query<IngestArgs>,
    body: axum::body::Bytes,
) -> Answer {
    let format = args.format.map(|f| f.parse()).transpose()?;
    write(&shared, move |db| {
        let options = IngestOptions {
            format,
            ..Default::default()
        };
        Api::ingest_bytes(db, &id, body.to_vec(), options)
    })
    .await
}

/// `POST /v1/ingest`'s body: the documents of one ingest job, and what
/// builds their trees and information points (the model-free ones when
/// absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobBody {
    documents: Vec<JobDocument>,
    structurer: Option<String>,
    ip_maker: Option<String>,
}

/// One document of an ingest job: its text, or (for a PDF) its file's
/// bytes in base64.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobDocument {
    id: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    data_base64: Option<String>,
    /// Its format; sniffed from the text (or the bytes) when absent.
    format: Option<String>,
}

impl JobDocument {
    /// The document's bytes: its text's, or its decoded `data_base64`.
    fn bytes(self) -> std::result::Result<Vec<u8>, Failure> {
        use base64::Engine as _;
        let id = self.id;
        match (self.text, self.data_base64) {
            (Some(text), None) => Ok(text.into_bytes()),
            (None, Some(data)) => base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .map_err(|e| {
                    Failure::user(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("document {id:?}: data_base64 is not base64: {e}"),
                    )
                }),
            _ => Err(Failure::user(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("document {id:?}: give exactly one of text and data_base64"),
            )),
        }
    }
}

/// Queues the documents in the body as one ingest job (a write, after the
/// writes before it) and answers at once with its status (202); a full
/// write queue is busy at once.
async fn ingest_job(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<JobBody>, JsonRejection>,
) -> std::result::Result<(StatusCode, Json<Value>), Failure> {
    let Json(body) = body?;
    let structurer = body.structurer.map(|s| s.parse()).transpose()?;
    let ip_maker = body.ip_maker.map(|s| s.parse()).transpose()?;
    // The documents of each format: one ingest run per format.
    let mut runs: Vec<(Option<Format>, Vec<Source>)> = Vec::new();
    for document in body.documents {
        let format = document.format.as_deref().map(str::parse).transpose()?;
        let id = document.id.clone();
        let source = Source {
            id,
            origin: Origin::Bytes(document.bytes()?),
        };
        match runs.iter_mut().find(|(f, _)| *f == format) {
            Some((_, sources)) => sources.push(source),
            None => runs.push((format, vec![source])),
        }
    }
    let Ok(place) = Arc::clone(&shared.queue).try_acquire_owned() else {
        return Err(Failure::busy("the write queue is full; retry"));
    };
    let total = runs.iter().flat_map(|(_, s)| s).map(Source::len_hint).sum();
    let job = shared
        .jobs
        .add(runs.iter().map(|(_, s)| s.len()).sum(), total);
    let running = Arc::clone(&job);
    tokio::spawn(async move {
        let _place = place;
        let Ok(_turn) = Arc::clone(&shared.writer).acquire_owned().await else {
            return;
        };
        let job = Arc::clone(&running);
        let ended = on_store(&shared, move |db| {
            let mut report = crate::engine::write::IngestReport::default();
            for (format, sources) in runs {
                let options = IngestOptions {
                    format,
                    structurer: structurer.unwrap_or_default(),
                    ip_maker: ip_maker.unwrap_or_default(),
                    ..Default::default()
                };
                let run = db.ingest(&sources, options, &*job, &job.cancel)?;
                report.documents.extend(run.documents);
                report.failures.extend(run.failures);
                report.llm.add(&run.llm);
            }
            Ok(report)
        })
        .await;
        let ended = ended.unwrap_or_else(|e| Err(Error::Serve(format!("the job failed: {e}"))));
        shared.note(&ended);
        running.finish(ended);
    });
    Ok((StatusCode::ACCEPTED, Json(job.status())))
}

/// The job numbered in the path.
fn find_job(shared: &Shared, job: &str) -> std::result::Result<Arc<jobs::Job>, Failure> {
    job.parse()
        .ok()
        .and_then(|id| shared.jobs.get(id))
        .ok_or_else(|| Failure::user(StatusCode::NOT_FOUND, format!("no ingest job {job:?}")))
}

async fn job_status(State(shared): State<Arc<Shared>>, Path(job): Path<String>) -> Answer {
    Ok(Json(find_job(&shared, &job)?.status()))
}

/// Asks the job to stop after the document it is writing; answers its
/// status (still `running` until it has stopped).
async fn cancel_job(State(shared): State<Arc<Shared>>, Path(job): Path<String>) -> Answer {
    let job = find_job(&shared, &job)?;
    job.cancel.cancel();
    Ok(Json(job.status()))
}

async fn remove(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    write(&shared, move |db| Api::remove(db, &id)).await
}

async fn check(State(shared): State<Arc<Shared>>) -> Answer {
    read_waiting(&shared, Api::check).await
}

async fn reindex(State(shared): State<Arc<Shared>>) -> Answer {
    write(&shared, |db| {
        Api::reindex(db, &NoProgress, &CancelToken::new())
    })
    .await
}

async fn sessions(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, Api::sessions).await
}

async fn session(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::session(db, &id)).await
}

async fn remove_session(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    write(&shared, move |db| Api::remove_session(db, &id)).await
}

async fn forget_turn(
    State(shared): State<Arc<Shared>>,
    Path((id, turn)): Path<(String, String)>,
) -> Answer {
    let Ok(turn) = turn.parse::<u32>() else {
        return Err(Failure::user(
            StatusCode::BAD_REQUEST,
            format!("{turn:?} is not a turn number"),
        ));
    };
    write(&shared, move |db| Api::forget_turn(db, &id, turn)).await
}

async fn stats(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, Api::stats).await
}

/// `GET /v1/search`'s query string.
#[derive(Deserialize)]
struct SearchArgs {
    q: String,
    limit: Option<usize>,
}

async fn search(State(shared): State<Arc<Shared>>, Query(args): Query<SearchArgs>) -> Answer {
    read(&shared, move |db| {
        Api::search(db, &args.q, args.limit.unwrap_or(10))
    })
    .await
}

/// `POST /v1/query`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryBody {
    statement: String,
    #[serde(default)]
    params: serde_json::Map<String, Value>,
    /// Run as if the statement began with `EXPLAIN`.
    #[serde(default)]
    explain: bool,
}

async fn query(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<QueryBody>, JsonRejection>,
) -> Answer {
    let Json(body) = body?;
    let params = Params::from_json(&body.params)?;
    read(&shared, move |db| {
        Api::query(db, &body.statement, &params, body.explain)
    })
    .await
}

/// `POST /v1/ask`'s body: the question and [`AskOptions`] (their
/// defaults when absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskBody {
    question: String,
    budget: Option<u64>,
    statement: Option<String>,
    group: Option<usize>,
    answer: Option<bool>,
}

/// Answers the question in the body with the server's chat model, as a
/// read (past the request timeout, busy while it finishes unseen).
async fn ask(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<AskBody>, JsonRejection>,
) -> Answer {
    let Json(body) = body?;
    let defaults = AskOptions::default();
    let options = AskOptions {
        budget: body.budget.unwrap_or(defaults.budget),
        statement: body.statement,
        group: body.group.unwrap_or(defaults.group),
        answer: body.answer.unwrap_or(defaults.answer),
    };
    read_waiting(&shared, move |db| Api::ask(db, &body.question, &options)).await
}

/// Appends the turn in the body (one `session add --jsonl` line, see
/// [`TurnInput::from_json`]).
async fn add_turn(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    body: String,
) -> Answer {
    let turn =
        TurnInput::from_json(&body).map_err(|e| Failure::user(StatusCode::BAD_REQUEST, e))?;
    write(&shared, move |db| Api::append_turn(db, &session, &turn)).await
}

/// `GET /v1/sessions/{id}/context`'s query string.
#[derive(Deserialize)]
struct ContextArgs {
    budget: u64,
    query: Option<String>,
}

async fn context(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    Query(args): Query<ContextArgs>,
) -> Answer {
    read(&shared, move |db| {
        Api::session_context(db, &session, args.budget, args.query.as_deref())
    })
    .await
}

/// Runs a forwarded command line, with no timeout (a long ingest runs as
/// long as it would without a server).
async fn command(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<CommandRequest>, JsonRejection>,
) -> std::result::Result<Json<CommandOutput>, Failure> {
    let Json(request) = body?;
    let Some(runner) = shared.commands.clone() else {
        return Err(Failure::user(
            StatusCode::NOT_FOUND,
            "this server runs no command lines",
        ));
    };
    on_store(&shared, move |db| runner.run(db, request))
        .await
        .map(Json)
        .map_err(|e| Failure::internal(format!("the command failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shared state over a new store, with `write_queue` places and
    /// `timeout` per request.
    fn shared(dir: &std::path::Path, write_queue: usize, timeout: Duration) -> Arc<Shared> {
        Arc::new(Shared {
            db: Arc::new(Db::create(dir.join("db")).unwrap()),
            token: None,
            commands: None,
            timeout,
            max_body_bytes: 16 << 20,
            writer: Arc::new(Semaphore::new(1)),
            queue: Arc::new(Semaphore::new(write_queue + 1)),
            jobs: jobs::Jobs::default(),
            reads: reads::ReadPool::new().unwrap(),
            abandoned: std::sync::OnceLock::new(),
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_beyond_the_queue_is_busy_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 0, Duration::from_secs(30));
        let (started, has_started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let first = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                write(&shared, move |_| {
                    started.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(json!("first"))
                })
                .await
            })
        };
        tokio::task::spawn_blocking(move || has_started.recv().unwrap())
            .await
            .unwrap();
        let refused = write(&shared, |_| Ok(json!("second"))).await.unwrap_err();
        assert_eq!(
            (refused.status, refused.class),
            (StatusCode::SERVICE_UNAVAILABLE, "busy")
        );
        // Reads do not wait for the running write.
        let read = read(&shared, |db| Ok(json!(db.documents()?.len())))
            .await
            .unwrap();
        assert_eq!(read.0, json!(0));
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap().0, json!("first"));
        // With the queue free again, the next write runs.
        assert_eq!(
            write(&shared, |_| Ok(json!("third"))).await.unwrap().0,
            json!("third")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_past_its_timeout_is_of_unknown_outcome_and_keeps_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 0, Duration::from_millis(50));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let late = write(&shared, move |_| {
            released.recv().unwrap();
            Ok(json!("late"))
        })
        .await
        .unwrap_err();
        assert_eq!(
            (late.status, late.class),
            (StatusCode::GATEWAY_TIMEOUT, "internal")
        );
        assert!(
            late.message.contains("outcome is unknown"),
            "{}",
            late.message
        );
        // It still runs, holding its place: the queue (no waiting places) is
        // full.
        let refused = write(&shared, |_| Ok(json!("next"))).await.unwrap_err();
        assert_eq!(refused.class, "busy");
        release.send(()).unwrap();
        // Once it has run, the next write goes through.
        let mut tries = 0;
        loop {
            match write(&shared, |_| Ok(json!("next"))).await {
                Ok(answer) => break assert_eq!(answer.0, json!("next")),
                Err(failure) if failure.class == "busy" && tries < 500 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(failure) => panic!("{}", failure.message),
            }
        }
    }

    #[test]
    fn a_server_whose_store_was_abandoned_stops_with_its_error() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let db = Db::create(dir.path().join("db")).unwrap();
        db.abandon();
        let options = ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            unix_socket: false,
            ..Default::default()
        };
        let (ready, bound) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            run(
                db,
                &options,
                |b| ready.send(b.address).unwrap(),
                &CancelToken::new(),
            )
        });
        let address = bound.recv().unwrap();
        // The first request that reaches the store fails, as every later
        // one would, and the server stops by itself.
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .write_all(b"GET /v1/docs HTTP/1.1\r\nHost: edudb\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 500"), "{answer}");
        let (ended, end) = std::sync::mpsc::channel();
        std::thread::spawn(move || ended.send(server.join().unwrap()).unwrap());
        let stopped = end
            .recv_timeout(Duration::from_secs(30))
            .expect("the server did not stop by itself");
        let err = stopped.unwrap_err();
        assert!(err.to_string().contains("the server stopped"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_past_its_timeout_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 4, Duration::from_millis(50));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let late = read(&shared, move |_| {
            released.recv().unwrap();
            Ok(json!("late"))
        })
        .await
        .unwrap_err();
        assert_eq!(late.class, "busy");
        assert!(late.message.contains("ran past"), "{}", late.message);
        release.send(()).unwrap();
    }
}
