//! `edudb serve` (`edudb::serve`): the HTTP/JSON API against the library's
//! own answers, its errors, the Unix socket, the token, body limits and a
//! graceful stop, in-process and as the CLI's `serve` command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use edudb::serve::{self, Bound, ServeOptions};
use edudb::{CancelToken, Db, Params};
use serde_json::{Value, json};

use crate::support::{ingest_markdown, spawn_server, stop_server, store};

/// A store holding two small documents; returns its directory and path.
pub(crate) fn fixture() -> (tempfile::TempDir, PathBuf) {
    let (dir, db) = store();
    ingest_markdown(
        &db,
        "trips",
        "# Trips\n\nWe plan a winter trip to Hokkaido. The snow festival is in February.\n\n## Food\n\nRamen in Sapporo is famous.",
    );
    ingest_markdown(
        &db,
        "gardens",
        "# Gardens\n\nKyoto has moss gardens. Spring brings cherry blossoms.",
    );
    let path = db.path().to_owned();
    (dir, path)
}

/// A client builder, with the TLS provider reqwest needs installed (the
/// requests here are plain HTTP).
pub(crate) fn client() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

/// A server over the store at `path`, running on a thread of its own.
pub(crate) struct Running {
    pub(crate) bound: Bound,
    stop: CancelToken,
    thread: std::thread::JoinHandle<edudb::Result<()>>,
    pub(crate) client: reqwest::Client,
    pub(crate) runtime: tokio::runtime::Runtime,
}

pub(crate) fn start(path: &Path, options: ServeOptions) -> Running {
    start_asking(path, options, None)
}

/// [`start`], the server's store asking `chat` in its language-model steps.
pub(crate) fn start_asking(
    path: &Path,
    options: ServeOptions,
    chat: Option<std::sync::Arc<dyn edudb::ChatModel>>,
) -> Running {
    // A child another test spawns can hold the store's lock file for a
    // moment (between its fork and its exec): wait for it.
    let waiting = edudb::OpenOptions {
        busy_timeout: std::time::Duration::from_secs(5),
        chat,
        ..Default::default()
    };
    let db = Db::open_with(path, &waiting).unwrap();
    let stop = CancelToken::new();
    let (ready, bound) = mpsc::channel();
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            serve::run(
                serve::Served::Store(Box::new(db)),
                &options,
                |b| ready.send(b.clone()).unwrap(),
                &stop,
            )
        })
    };
    let bound = bound.recv().expect("the server did not start");
    Running {
        bound,
        stop,
        thread,
        client: client().build().unwrap(),
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    }
}

impl Running {
    fn url(&self, route: &str) -> String {
        format!("http://{}/v1{route}", self.bound.address)
    }

    /// Sends `request` and returns the status and the JSON body.
    fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        self.runtime.block_on(async {
            let response = request.send().await.expect("request");
            let status = response.status().as_u16();
            let body = response.json::<Value>().await.expect("a JSON body");
            (status, body)
        })
    }

    fn get(&self, route: &str) -> (u16, Value) {
        self.send(self.client.get(self.url(route)))
    }

    fn post(&self, route: &str, body: &Value) -> (u16, Value) {
        self.send(self.client.post(self.url(route)).json(body))
    }

    /// Stops the server and waits for it to close the store.
    pub(crate) fn stop(self) -> edudb::Result<()> {
        self.stop.cancel();
        self.thread.join().expect("the server thread panicked")
    }
}

/// The error object of a failed answer, checked for its class.
fn error_of(body: &Value, class: &str) -> Value {
    let error = body["error"].clone();
    assert_eq!(error["class"], class, "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    error
}

#[test]
fn reads_answer_with_the_libraries_json() {
    let (_dir, path) = fixture();
    let statement = "SELECT SPANS FROM * SEED BM25($q) BUDGET 64 TOKENS";
    let (docs, stats, hits, tree, result) = {
        let db = Db::open(&path).unwrap();
        // Listed with their metadata (none here).
        let docs: Vec<Value> = db
            .documents()
            .unwrap()
            .iter()
            .map(|d| {
                let mut row = d.to_json();
                row["metadata"] = serde_json::json!({});
                row
            })
            .collect();
        let hits: Vec<Value> = db
            .search("snow", 5)
            .unwrap()
            .iter()
            .map(|h| h.to_json())
            .collect();
        let result = db
            .query(statement, &Params::new().text("q", "ramen"))
            .unwrap()
            .to_json();
        (
            docs,
            serde_json::to_value(db.stats().unwrap()).unwrap(),
            hits,
            db.tree("trips").unwrap().to_json(None),
            result,
        )
    };
    // As the client parses the wire text (serde_json's float parsing may
    // differ from the value in the last bit).
    let wire = |value: Value| -> Value { serde_json::from_str(&value.to_string()).unwrap() };
    let (docs, stats, hits, tree, result) = (
        wire(Value::Array(docs)),
        wire(stats),
        wire(Value::Array(hits)),
        wire(tree),
        wire(result),
    );
    let server = start(&path, ServeOptions::default());
    assert_eq!(server.get("/docs"), (200, docs));
    assert_eq!(server.get("/stats"), (200, stats));
    assert_eq!(server.get("/search?q=snow&limit=5"), (200, hits));
    assert_eq!(server.get("/docs/trips/tree"), (200, tree));
    let (status, mut answer) = server.post(
        "/query",
        &json!({"statement": statement, "params": {"q": "ramen"}}),
    );
    assert_eq!(status, 200, "{answer}");
    let mut expected = result;
    // The one field that differs between two runs.
    answer["elapsed_ms"] = Value::Null;
    expected["elapsed_ms"] = Value::Null;
    assert_eq!(answer, expected);
    assert!(
        answer["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Ramen")
    );
    let (status, health) = server.get("/health");
    assert_eq!(status, 200);
    assert_eq!(health["store"], path.display().to_string());
    server.stop().unwrap();
}

#[test]
fn errors_carry_a_class_a_status_and_the_query_location() {
    let (_dir, path) = fixture();
    let server = start(&path, ServeOptions::default());
    let (status, body) = server.post("/query", &json!({"statement": "SELECT FROM *\nSEED BM25("}));
    assert_eq!(status, 400);
    let error = error_of(&body, "user");
    assert_eq!(error["query"]["line"], 2, "{body}");
    assert!(
        error["query"]["column"].as_u64().is_some_and(|c| c > 1),
        "{body}"
    );
    let (status, body) = server.post(
        "/query",
        &json!({"statement": "SELECT FROM * SEED BM25($q) LIMIT 1", "params": {"q": [1]}}),
    );
    assert_eq!(status, 400);
    assert!(
        error_of(&body, "user")["message"]
            .as_str()
            .unwrap()
            .contains("$q")
    );
    let (status, body) = server.post("/query", &json!({"statment": "typo"}));
    assert_eq!(status, 422, "{body}");
    error_of(&body, "user");
    let (status, body) = server.get("/docs/absent/tree");
    assert_eq!(status, 404);
    error_of(&body, "user");
    let (status, body) = server.get("/no/such/route");
    assert_eq!(status, 404);
    error_of(&body, "user");
    // Command lines read the server's files: the socket's only.
    let (status, body) = server.post("/cli", &json!({"args": ["docs"], "cwd": "/"}));
    assert_eq!(status, 404, "{body}");
    server.stop().unwrap();
}

#[test]
fn session_turns_are_written_and_the_context_reads_them() {
    let (_dir, path) = fixture();
    let server = start(&path, ServeOptions::default());
    for (text, at) in [
        ("We plan a winter trip to Hokkaido.", "2024-01-05"),
        ("Which ramen shop in Sapporo is best?", "2024-01-06"),
    ] {
        let (status, receipt) =
            server.post("/sessions/trip/turns", &json!({"text": text, "at": at}));
        assert_eq!(status, 200, "{receipt}");
        assert_eq!(receipt["session"], "trip");
    }
    let (status, body) = server.post(
        "/sessions/trip/turns",
        &json!({"text": "x", "at": "yesterday"}),
    );
    assert_eq!(status, 400, "{body}");
    error_of(&body, "user");
    let (status, context) = server.get("/sessions/trip/context?budget=200&query=ramen");
    assert_eq!(status, 200, "{context}");
    let texts: Vec<&str> = context["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|item| item["text"].as_str())
        .collect();
    assert!(texts.iter().any(|t| t.contains("ramen shop")), "{context}");
    let (status, body) = server.get("/sessions/absent/context?budget=100");
    assert_eq!(status, 404, "{body}");
    let (status, list) = server.get("/sessions");
    assert_eq!(status, 200, "{list}");
    assert_eq!(list[0]["id"], "trip", "{list}");
    let (status, view) = server.get("/sessions/trip");
    assert_eq!((status, view["turns"].clone()), (200, json!(2)), "{view}");
    let (status, _) = server.post("/sessions/gone/turns", &json!({"text": "Short-lived."}));
    assert_eq!(status, 200);
    let removed = server.send(server.client.delete(server.url("/sessions/gone")));
    assert_eq!(removed, (200, json!({"removed": "gone"})));
    server.stop().unwrap();
    // The turns were committed: the store has them after the server closed it.
    let db = Db::open(&path).unwrap();
    assert_eq!(db.session("trip").unwrap().turns, 2);
    assert!(db.session("gone").is_err());
}

#[test]
fn documents_are_ingested_shown_checked_and_removed() {
    let (_dir, path) = fixture();
    let server = start(&path, ServeOptions::default());
    let note = "# Notes\n\nMoss grows in shade. It needs water.";
    let put = |query: &str| {
        server.send(
            server
                .client
                .put(server.url(&format!("/docs/notes{query}")))
                .body(note),
        )
    };
    let (status, body) = put("?format=yaml");
    assert_eq!(status, 400, "{body}");
    error_of(&body, "user");
    let (status, meta) = put("?format=markdown");
    assert_eq!(status, 200, "{meta}");
    assert_eq!(
        (meta["id"].as_str(), meta["title"].as_str()),
        (Some("notes"), Some("Notes"))
    );
    let (status, edus) = server.get("/docs/notes/edus?first=1&last=2");
    assert_eq!(status, 200, "{edus}");
    let texts: Vec<&str> = edus
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Moss grows in shade.", "It needs water."]);
    let (status, body) = server.get("/docs/notes/edus?last=2");
    assert_eq!(status, 400, "{body}");
    let (status, dag) = server.get("/docs/notes/dag");
    assert_eq!(status, 200, "{dag}");
    assert_eq!(dag["doc"], "notes", "{dag}");
    let (status, report) = server.get("/check");
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["documents"], 3, "{report}");
    let (status, reindexed) = server.send(server.client.post(server.url("/reindex")));
    assert_eq!(status, 200, "{reindexed}");
    assert!(
        reindexed["fulltext_entries"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{reindexed}"
    );
    let delete = || server.send(server.client.delete(server.url("/docs/notes")));
    assert_eq!(delete(), (200, json!({"removed": ["notes"]})));
    let (status, body) = delete();
    assert_eq!(status, 404, "{body}");
    assert_eq!(server.get("/docs").1.as_array().map(Vec::len), Some(2));
    server.stop().unwrap();
}

#[test]
fn the_store_socket_serves_and_is_removed_at_shutdown() {
    let (_dir, path) = fixture();
    let server = start(&path, ServeOptions::default());
    let socket = server.bound.socket.clone().expect("a socket");
    assert_eq!(socket, path.join(serve::SOCKET_FILE));
    let over_socket = client().unix_socket(socket.clone()).build().unwrap();
    let (status, docs) = server.send(over_socket.get("http://store/v1/docs"));
    assert_eq!(status, 200);
    assert_eq!(docs.as_array().map(Vec::len), Some(2));
    server.stop().unwrap();
    assert!(!socket.exists(), "the socket outlived the server");
    // The store was closed: it opens again at once.
    Db::open(&path).unwrap();
}

#[test]
fn beyond_loopback_a_bearer_token_is_required() {
    let (_dir, path) = fixture();
    let everywhere = ServeOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        unix_socket: false,
        ..Default::default()
    };
    let refused = serve::run(
        serve::Served::Store(Box::new(Db::open(&path).unwrap())),
        &everywhere,
        |_| {},
        &CancelToken::new(),
    );
    assert!(
        matches!(&refused, Err(edudb::Error::Usage(m)) if m.contains("token")),
        "{refused:?}"
    );
    let server = start(
        &path,
        ServeOptions {
            token: Some("s3cret".into()),
            ..everywhere
        },
    );
    let url = format!("http://127.0.0.1:{}/v1/docs", server.bound.address.port());
    let (status, body) = server.send(server.client.get(&url));
    assert_eq!(status, 401);
    error_of(&body, "user");
    let (status, _) = server.send(server.client.get(&url).bearer_auth("wrong"));
    assert_eq!(status, 401);
    let (status, docs) = server.send(server.client.get(&url).bearer_auth("s3cret"));
    assert_eq!(status, 200, "{docs}");
    server.stop().unwrap();
}

#[test]
fn a_body_over_the_limit_is_refused() {
    let (_dir, path) = fixture();
    let server = start(
        &path,
        ServeOptions {
            max_body_bytes: 1024,
            ..Default::default()
        },
    );
    let long = "x".repeat(4096);
    let (status, body) = server.post("/query", &json!({"statement": long}));
    assert_eq!(status, 413, "{body}");
    error_of(&body, "user");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("limit of 1024 bytes"), "{message}");
    server.stop().unwrap();
}

#[test]
fn forwarded_stdin_over_the_limit_is_refused_before_sending() {
    let (dir, path) = fixture();
    let server = start(
        &path,
        ServeOptions {
            max_body_bytes: 1024,
            unix_socket: true,
            ..Default::default()
        },
    );
    let request = serve::CommandRequest {
        args: vec!["ingest".into(), "-".into()],
        cwd: dir.path().to_owned(),
        stdin_base64: Some("QUFB".repeat(1000)),
    };
    let err = serve::forward(&path.join(serve::SOCKET_FILE), &request).unwrap_err();
    assert!(err.is_user_error(), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("4000 bytes to send") && message.contains("at most 1024 bytes"),
        "{message}"
    );
    assert!(message.contains("give the input as a file"), "{message}");
    server.stop().unwrap();
}

/// Runs the CLI on `path` from `cwd`, failing at once on a held store.
fn cli(path: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(path)
        .args(args)
        .current_dir(cwd)
        .env("EDUDB_WAIT", "0")
        .output()
        .unwrap()
}

#[test]
fn the_cli_serves_until_sigterm() {
    let (_dir, path) = fixture();
    let (child, address, socket) = spawn_server(&path);
    assert!(socket.exists());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let docs: Value = runtime.block_on(async {
        client()
            .build()
            .unwrap()
            .get(format!("http://{address}/v1/docs"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(docs.as_array().map(Vec::len), Some(2), "{docs}");
    stop_server(child, &socket);
    Db::open(&path).unwrap();
}

#[test]
fn a_sigterm_as_soon_as_the_server_is_ready_stops_it_cleanly() {
    // The signals are caught before the server announces itself: one sent
    // right after the announcement could kill it instead.
    let (_dir, path) = fixture();
    let (child, _, socket) = spawn_server(&path);
    stop_server(child, &socket);
    Db::open(&path).unwrap();
}

#[test]
fn cli_commands_go_through_a_running_server() {
    let (dir, path) = fixture();
    let here = dir.path();
    let commands: [&[&str]; 6] = [
        &["docs"],
        &["docs", "--json"],
        &["tree", "trips"],
        &["show", "trips", "0..2", "--json"],
        &["search", "snow"],
        &["query", "SELECT FROM doc('trips') LIMIT 2"],
    ];
    let direct: Vec<_> = commands.iter().map(|args| cli(&path, here, args)).collect();
    let (child, _, socket) = spawn_server(&path);
    for (args, alone) in commands.iter().zip(&direct) {
        let routed = cli(&path, here, args);
        assert!(
            routed.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&routed.stderr)
        );
        if args[0] == "query" {
            // Its summary line holds the time it took.
            let rows = |out: &[u8]| {
                String::from_utf8_lossy(out)
                    .lines()
                    .filter(|l| !l.contains(" ms"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            assert_eq!(rows(&routed.stdout), rows(&alone.stdout), "{args:?}");
        } else {
            assert_eq!(
                String::from_utf8_lossy(&routed.stdout),
                String::from_utf8_lossy(&alone.stdout),
                "{args:?}"
            );
        }
    }
    // A relative path is read from the caller's directory.
    std::fs::write(here.join("note.md"), "# Note\n\nMoss needs shade.").unwrap();
    let ingested = cli(&path, here, &["ingest", "note.md", "--json"]);
    assert!(
        ingested.status.success(),
        "{}",
        String::from_utf8_lossy(&ingested.stderr)
    );
    let docs: Value =
        serde_json::from_slice(&cli(&path, here, &["docs", "--json"]).stdout).unwrap();
    assert_eq!(docs.as_array().map(Vec::len), Some(3), "{docs}");
    let turn = cli(
        &path,
        here,
        &["session", "add", "trip", "We leave on Monday."],
    );
    assert!(
        turn.status.success(),
        "{}",
        String::from_utf8_lossy(&turn.stderr)
    );
    // Errors come back with their exit code and message.
    let bad = cli(&path, here, &["query", "SELEC"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("line 1, column 1"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // The console sends each statement to the server.
    let statements =
        "SELECT FROM * SEED BM25('ramen') LIMIT 2;\nSELEC x;\n.format json\nSHOW DOCS;\n";
    let routed = console(&path, here, statements);
    stop_server(child, &socket);
    let alone = console(&path, here, statements);
    let timeless = |out: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| !l.contains(" ms") && !l.contains("elapsed_ms"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(timeless(&routed.stdout), timeless(&alone.stdout));
    assert!(
        String::from_utf8_lossy(&routed.stdout).contains("Ramen"),
        "{}",
        String::from_utf8_lossy(&routed.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&routed.stderr),
        String::from_utf8_lossy(&alone.stderr)
    );
    assert_eq!(
        (routed.status.code(), alone.status.code()),
        (Some(1), Some(1))
    );
    let db = Db::open(&path).unwrap();
    assert_eq!(db.session("trip").unwrap().turns, 1);
}

/// Pipes `statements` into `edudb console` on `path`.
fn console(path: &Path, cwd: &Path, statements: &str) -> std::process::Output {
    piped(path, cwd, &["console"], statements.as_bytes())
}

/// [`cli`] with `input` piped to its standard input.
fn piped(path: &Path, cwd: &Path, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(path)
        .args(args)
        .current_dir(cwd)
        .env("EDUDB_WAIT", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn commands_reading_stdin_send_it_through_a_running_server() {
    let (dir, path) = fixture();
    let here = dir.path();
    let (child, _, socket) = spawn_server(&path);
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Issue 53 item 7: this waited for the store and failed, advising --wait.
    ok(piped(
        &path,
        here,
        &["session", "add", "trip", "-"],
        b"We fly to Sapporo on Monday.",
    ));
    ok(piped(
        &path,
        here,
        &["session", "add", "trip", "--role", "assistant", "-"],
        b"Then we take the train to Otaru.",
    ));
    let lines = "{\"text\": \"Which hotel?\"}\n{\"text\": \"The one by the canal.\", \"role\": \"assistant\"}\n";
    ok(piped(
        &path,
        here,
        &["session", "add", "trip", "--jsonl", "-"],
        lines.as_bytes(),
    ));
    ok(piped(
        &path,
        here,
        &["ingest", "-", "--id", "piped"],
        b"# Piped\n\nMoss grows on the north side.",
    ));
    // Text that is not UTF-8 is refused as it is without a server.
    let bad = piped(&path, here, &["session", "add", "trip", "-"], b"\xff\xfe");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("<stdin>: invalid utf-8"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    stop_server(child, &socket);
    let db = Db::open(&path).unwrap();
    let session = db.session("trip").unwrap();
    assert_eq!(session.turns, 4);
    assert_eq!(
        db.document("piped").unwrap().text,
        "# Piped\n\nMoss grows on the north side."
    );
}

#[test]
fn a_dead_servers_socket_is_ignored_and_removed() {
    let (dir, path) = fixture();
    let socket = path.join(serve::SOCKET_FILE);
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists() && serve::live_socket(&path).is_none());
    let out = cli(&path, dir.path(), &["docs", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !socket.exists(),
        "opening the store removes a dead server's socket"
    );
}

#[test]
fn slow_clients_stall_neither_readers_nor_writers_nor_shutdown() {
    use std::io::Write;
    let (_dir, path) = fixture();
    let options = ServeOptions {
        request_timeout: std::time::Duration::from_secs(2),
        ..Default::default()
    };
    let server = start(&path, options);
    let connect = || std::net::TcpStream::connect(server.bound.address).unwrap();
    // One client stops in the middle of its headers, one in the middle of
    // a write's body, one sends reads it never takes the answers of.
    let mut headers = connect();
    headers
        .write_all(b"GET /v1/docs HTTP/1.1\r\nHost: edudb\r\n")
        .unwrap();
    let mut upload = connect();
    upload
        .write_all(
            b"POST /v1/sessions/slow/turns HTTP/1.1\r\nHost: edudb\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"text\": \"sl",
        )
        .unwrap();
    let mut unread = connect();
    unread
        .set_write_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    for _ in 0..2000 {
        if unread
            .write_all(b"GET /v1/docs HTTP/1.1\r\nHost: edudb\r\n\r\n")
            .is_err()
        {
            break;
        }
    }
    // Others are answered meanwhile, a write included (the slow upload
    // holds no place in the write queue).
    let prompt = client()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    let answered = |request: reqwest::RequestBuilder| {
        server.runtime.block_on(async {
            let response = request.send().await.expect("answered despite slow clients");
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        })
    };
    let (status, docs) = answered(prompt.get(server.url("/docs")));
    assert_eq!((status, docs.as_array().map(Vec::len)), (200, Some(2)));
    let (status, turn) = answered(
        prompt
            .post(server.url("/sessions/quick/turns"))
            .json(&json!({"text": "A turn while others upload slowly."})),
    );
    assert_eq!(status, 200, "{turn}");
    // Stopping waits the request timeout for them, then drops them; the
    // written turn is kept.
    let (stopped, stop) = mpsc::channel();
    std::thread::spawn(move || stopped.send(server.stop()).unwrap());
    stop.recv_timeout(std::time::Duration::from_secs(30))
        .expect("the server did not stop within its 2 s grace")
        .unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.dialogue("quick").unwrap().turns.len(), 1);
    assert!(matches!(
        db.dialogue("slow"),
        Err(edudb::Error::NoSuchSession(_))
    ));
    drop((headers, upload, unread));
}
