//! Shared by the integration tests (and the crash tests): the real
//! evaluation data beside the repository (`../shared/data`, which CI
//! provides at the same place), temporary stores, and the `edudb` binary.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use edudb::ingest::sources::{Source, expand};
use edudb::{CancelToken, Db, DocMeta, Format, IngestOptions, NoProgress, Params, Rows, Selection};
use serde_json::Value;
use tempfile::TempDir;

/// The shared data directory, `../shared/data`.
pub fn shared_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
}

/// The Rust RFC corpus (Markdown files); panics with a clear message when
/// `../shared` is not beside the repository.
pub fn rfcs() -> PathBuf {
    let dir = shared_data().join("rust_rfcs/text");
    assert!(
        dir.is_dir(),
        "test data missing: {} (../shared must sit beside the repository)",
        dir.display()
    );
    dir
}

/// The demo documents shipped in `src/demo`.
pub fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo")
}

/// The first `count` RFCs, by id.
pub fn rfc_sources(count: usize) -> Vec<Source> {
    let mut sources = expand(&[rfcs()], None).unwrap();
    sources.sort_by(|a, b| a.id.cmp(&b.id));
    sources.truncate(count);
    sources
}

/// Ingests the first `count` RFCs, format detected.
pub fn ingest_rfcs(db: &Db, count: usize) {
    ingest_all(db, &rfc_sources(count));
}

/// Ingests `sources`, formats detected, every one of them accepted.
pub fn ingest_all(db: &Db, sources: &[Source]) {
    let report = db
        .ingest(
            sources,
            IngestOptions::default(),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// What a query answered, as JSON without its timings.
pub fn untimed(result: edudb::QueryResult) -> Value {
    let mut json = result.to_json();
    json.as_object_mut().unwrap().remove("elapsed_ms");
    json
}

/// An empty store, `db` in a temporary directory.
pub fn store() -> (TempDir, Db) {
    let dir = TempDir::new().unwrap();
    let db = Db::create(dir.path().join("db")).unwrap();
    (dir, db)
}

/// A new store whose language-model steps ask `chat`.
pub fn store_asking(chat: std::sync::Arc<dyn edudb::ChatModel>) -> (TempDir, Db) {
    let dir = TempDir::new().unwrap();
    let db = Db::open_with(
        dir.path().join("db"),
        &edudb::OpenOptions {
            create: true,
            chat: Some(chat),
            ..Default::default()
        },
    )
    .unwrap();
    (dir, db)
}

/// Ingest options that read the input as Markdown.
pub fn markdown() -> IngestOptions {
    IngestOptions {
        format: Some(Format::Markdown),
        ..IngestOptions::default()
    }
}

/// Ingests `text` as Markdown under `id`.
pub fn ingest_markdown(db: &Db, id: &str, text: &str) -> DocMeta {
    db.ingest_bytes(id, text.as_bytes().to_vec(), markdown())
        .unwrap()
}

/// The selection a statement without parameters returns.
pub fn selection(db: &Db, statement: &str) -> Selection {
    selection_with(db, statement, &Params::new())
}

/// The selection a statement returns; panics naming the statement otherwise.
pub fn selection_with(db: &Db, statement: &str, params: &Params) -> Selection {
    let result = db
        .query(statement, params)
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
    match result.rows {
        Rows::Selection(selection) => selection,
        other => panic!("{statement}: not a selection: {other:?}"),
    }
}

/// Runs `edudb --db DB ARGS`.
pub fn edudb(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Runs `edudb --db DB ARGS` with `input` on its standard input.
pub fn edudb_with_stdin(db: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A run's standard output.
pub fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A run's standard error.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The value of `var`, or `None` (after a notice) to skip a test that needs
/// it; fails instead when `require` is set to 1, so CI cannot skip it.
fn required_env(var: &str, require: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => Some(value),
        _ => {
            assert!(
                std::env::var(require).as_deref() != Ok("1"),
                "{require}=1 but {var} is not set: {how}"
            );
            eprintln!("skipping: {var} is not set ({how})");
            None
        }
    }
}

/// The base URL of the reference all-MiniLM-L6-v2 server (numpy, from
/// `.ci/embedding-server start`), or `None` to skip.
pub fn model_server() -> Option<String> {
    required_env(
        "EDUDB_EMBEDDING_URL",
        "EDUDB_REQUIRE_EMBEDDING_SERVER",
        "start the server with `url=$(.ci/embedding-server start)` and set EDUDB_EMBEDDING_URL=$url",
    )
}

/// The base URL of the real chat model server (llama-server with
/// SmolLM2-135M-Instruct, from `.ci/llm-server start`), or `None` to skip.
pub fn chat_server() -> Option<String> {
    required_env(
        "EDUDB_LLM_SERVER",
        "EDUDB_REQUIRE_LLM_SERVER",
        "start the server with `url=$(.ci/llm-server start)` and set EDUDB_LLM_SERVER=$url",
    )
}

/// The directory of all-MiniLM-L6-v2's files for the in-process
/// embedder, or `None` to skip.
pub fn local_model() -> Option<PathBuf> {
    required_env(
        "EDUDB_LOCAL_MODEL",
        "EDUDB_REQUIRE_LOCAL_MODEL",
        "set EDUDB_LOCAL_MODEL=$(.ci/embedding-server model-dir)",
    )
    .map(PathBuf::from)
}

/// `edudb serve` started as a process on the store at `path`: the child,
/// its TCP address and its socket.
pub fn spawn_server(path: &Path) -> (std::process::Child, String, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(path)
        .args(["serve", "--listen", "127.0.0.1:0", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let announced: Value = serde_json::from_str(&first).expect(&first);
    let address = announced["listen"].as_str().unwrap().to_owned();
    let socket = PathBuf::from(announced["socket"].as_str().unwrap());
    (child, address, socket)
}

/// Stops a server process with SIGTERM; checks that it exits cleanly,
/// removing its socket.
pub fn stop_server(child: std::process::Child, socket: &Path) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!socket.exists(), "the socket outlived the server");
}

/// A one-page PDF with `lines` of 11-point text down from the top, made by
/// pdf_oxide's writer.
pub fn small_pdf(lines: &[&str]) -> Vec<u8> {
    let mut builder = pdf_oxide::writer::DocumentBuilder::new();
    let mut page = builder
        .letter_page()
        .font("Helvetica", 11.0)
        .at(72.0, 700.0);
    for line in lines {
        page = page.text(line);
    }
    page.done();
    builder.build().expect("a PDF")
}
