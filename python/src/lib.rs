//! `edudb._edudb`: the native half of the Python package `edudb`. One
//! class, [`Store`], holds a store opened in this process (a [`Db`]), a
//! shard set opened in this process (a [`ShardSet`]: several stores as
//! one) or a connection to a server of a store (a [`Client`]), and answers
//! every call through [`Api`] with the served API's JSON (the CLI's
//! `--json` contracts), so both kinds give the same answers; the Python
//! half (`edudb/__init__.py`) turns that JSON into typed objects. Store
//! calls run without the GIL; an ingest is cancelled through the library's
//! [`CancelToken`] when Python is interrupted (Ctrl-C). Errors are raised
//! as the exception classes below.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use edudb::serve::{Api, Client};
use edudb::{
    AskOptions, CancelToken, ChatConfig, ChatModel, Db, EmbedderConfig, Error, Format, HttpChat,
    HttpConfig, IngestOptions, IpMakerKind, Metadata, NoProgress, OpenOptions, Params, Progress,
    ShardSet, Structurer, TurnInput,
};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;

create_exception!(edudb, EdudbError, PyException, "Every error edudb raises.");
create_exception!(
    edudb,
    UserError,
    EdudbError,
    "The caller's input is wrong (a bad id, format, range, argument or statement); repeating the call cannot succeed."
);
create_exception!(
    edudb,
    QueryError,
    UserError,
    "A query statement is wrong: `line` and `column` (1-based) locate the fault, `source_line` and `caret` show it, `hint` suggests a fix (or is None)."
);
create_exception!(
    edudb,
    NotFound,
    UserError,
    "No document, session, turn or topic has the id given."
);
create_exception!(
    edudb,
    StoreBusy,
    EdudbError,
    "Another process holds the store, or its server's write queue is full: nothing was done, retry later."
);
create_exception!(
    edudb,
    Corrupt,
    EdudbError,
    "Stored records are damaged (a record failed validation, an index file is unreadable); `check` names them, `reindex` or removing the damaged document repairs it."
);
create_exception!(
    edudb,
    InternalError,
    EdudbError,
    "The store or server failed (I/O, a full disk, a broken connection)."
);

/// What a [`Store`] talks to.
enum Backend {
    Local(Box<Db>),
    Shards(Box<ShardSet>),
    Served(Box<Client>),
}

impl Backend {
    /// The calls, answered locally or by the server.
    fn api(&self) -> &(dyn Api + Sync) {
        match self {
            Backend::Local(db) => &**db,
            Backend::Shards(set) => &**set,
            Backend::Served(client) => &**client,
        }
    }
}

/// A store, open in this process or served by `edudb serve`; its calls
/// answer JSON text.
#[pyclass(frozen, module = "edudb._edudb")]
struct Store {
    /// None once closed. Held (read) only without the GIL, and never while
    /// Python is called, so a thread holding the GIL never waits on it.
    backend: RwLock<Option<Backend>>,
    /// Whether a server answers (fixed when connected).
    served: bool,
    /// The process that opened or connected it. A process forked from that
    /// one (multiprocessing's default start method on Linux) has only a
    /// copy of its state, not its threads: calls there are refused
    /// (`Error::Forked`), and the copy is never closed (closing would wait
    /// on those threads).
    opened_in: u32,
}

/// A library result as a Python one.
type Answer = PyResult<String>;

/// Why a call on the backend failed, before it becomes a Python exception
/// (which is made with the GIL held and the backend's lock released).
enum Failed {
    Edudb(Error),
    Closed,
    Panicked(String),
}

impl From<Failed> for PyErr {
    fn from(failed: Failed) -> PyErr {
        match failed {
            Failed::Edudb(err) => to_python(err),
            Failed::Closed => UserError::new_err("the store is closed"),
            Failed::Panicked(cause) => InternalError::new_err(format!(
                "edudb failed unexpectedly (a bug; please report it): {cause}"
            )),
        }
    }
}

impl Store {
    fn new(backend: Backend) -> Store {
        Store {
            served: matches!(backend, Backend::Served(_)),
            backend: RwLock::new(Some(backend)),
            opened_in: std::process::id(),
        }
    }

    /// Closes `backend` (call without the GIL); in a process forked from
    /// the one that opened it, leaves it unclosed, since closing would wait
    /// on threads that exist only in that process.
    fn release(&self, backend: Option<Backend>) {
        if std::process::id() == self.opened_in {
            drop(backend);
        } else {
            std::mem::forget(backend);
        }
    }

    /// Runs `work` on the backend without the GIL; its JSON answer as text.
    fn call(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&dyn Api) -> edudb::Result<Value> + Send,
    ) -> Answer {
        let answer = py.detach(|| self.with_backend(|backend| work(backend.api())))?;
        Ok(answer.to_string())
    }

    /// `work` on the open backend; a panic in it (a bug) is a failure
    /// rather than Python's `PanicException`. Call without the GIL.
    fn with_backend<T>(
        &self,
        work: impl FnOnce(&Backend) -> edudb::Result<T>,
    ) -> Result<T, Failed> {
        self.in_opening_process()?;
        let backend = self.backend.read().unwrap_or_else(PoisonError::into_inner);
        let backend = backend.as_ref().ok_or(Failed::Closed)?;
        unpanicked(|| work(backend))
    }

    /// Refuses calls in a process forked from the one that opened the
    /// store (see [`Store::opened_in`]).
    fn in_opening_process(&self) -> Result<(), Failed> {
        if std::process::id() == self.opened_in {
            Ok(())
        } else {
            Err(Failed::Edudb(Error::Forked {
                parent: self.opened_in,
            }))
        }
    }
}

/// `work`'s result, a panic in it (a bug) being a failure rather than
/// Python's `PanicException`.
fn unpanicked<T>(work: impl FnOnce() -> edudb::Result<T>) -> Result<T, Failed> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(result) => result.map_err(Failed::Edudb),
        Err(panic) => Err(Failed::Panicked(
            edudb::error::panic_message(&*panic).to_owned(),
        )),
    }
}

/// A store dropped without `close` (garbage collected) is closed without
/// the GIL too: closing flushes and may persist the vector index.
impl Drop for Store {
    fn drop(&mut self) {
        let backend = self
            .backend
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if backend.is_some() {
            Python::attach(|py| py.detach(|| self.release(backend)));
        }
    }
}

#[pymethods]
impl Store {
    /// Opens the store at `path` in this process (creating it unless
    /// `create` is false). `embedder`: None (the one the store was built
    /// with; hashed for a new store), "hashed", "openai" (with `embed_url`,
    /// `embed_model` and optionally `embed_key_env`) or "local" (with
    /// `model`, a sentence-transformers directory). `busy_timeout`: seconds
    /// to wait for another process to release the store. A directory that
    /// is a shard set opens as one; `shards` creates a shard set of that
    /// many stores at `path` (new or empty).
    #[staticmethod]
    #[pyo3(signature = (path, *, embedder=None, model=None, embed_url=None, embed_model=None,
                        embed_key_env=None, dimension=None, busy_timeout=0.0, create=true,
                        llm_url=None, llm_model=None, llm_key_env=None, shards=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        embedder: Option<&str>,
        model: Option<PathBuf>,
        embed_url: Option<String>,
        embed_model: Option<String>,
        embed_key_env: Option<String>,
        dimension: Option<usize>,
        busy_timeout: f64,
        create: bool,
        llm_url: Option<String>,
        llm_model: Option<String>,
        llm_key_env: Option<String>,
        shards: Option<usize>,
    ) -> PyResult<Store> {
        let config = embedder_config(
            embedder,
            model,
            embed_url,
            embed_model,
            embed_key_env,
            dimension,
        )
        .map_err(to_python)?;
        if !(busy_timeout.is_finite() && busy_timeout >= 0.0) {
            return Err(to_python(Error::Usage(format!(
                "busy_timeout must be a number of seconds ≥ 0, not {busy_timeout}"
            ))));
        }
        let chat = chat_model(llm_url, llm_model, llm_key_env).map_err(to_python)?;
        let options = OpenOptions {
            create,
            embedder: config,
            busy_timeout: Duration::try_from_secs_f64(busy_timeout).unwrap_or(Duration::MAX),
            chat,
            ..OpenOptions::default()
        };
        let opened = py.detach(|| -> edudb::Result<Backend> {
            if let Some(count) = shards {
                return Ok(Backend::Shards(Box::new(ShardSet::create(
                    &path, count, &options,
                )?)));
            }
            if ShardSet::is_shard_set(&path) {
                return Ok(Backend::Shards(Box::new(ShardSet::open(&path, &options)?)));
            }
            Ok(Backend::Local(Box::new(Db::open_with(&path, &options)?)))
        });
        let backend = opened.map_err(|err| {
            // A store a server holds is used through the server.
            match (&err, edudb::serve::live_socket(&path)) {
                (Error::Locked { .. }, Some(_)) => StoreBusy::new_err(format!(
                    "{err}: `edudb serve` holds it; use edudb.connect({:?}) to go through the server",
                    path.display().to_string()
                )),
                _ => to_python(err),
            }
        })?;
        Ok(Store::new(backend))
    }

    /// Connects to `edudb serve` at `target`: an `http://HOST:PORT` URL (or
    /// `HOST:PORT`), a store directory (its server's socket) or a socket
    /// path; `token` is the server's bearer token.
    #[staticmethod]
    #[pyo3(signature = (target, token=None))]
    fn connect(py: Python<'_>, target: &str, token: Option<&str>) -> PyResult<Store> {
        let client = py
            .detach(|| Client::connect(target, token))
            .map_err(to_python)?;
        Ok(Store::new(Backend::Served(Box::new(client))))
    }

    /// True when the store is served (by `connect`).
    #[getter]
    fn served(&self) -> bool {
        self.served
    }

    /// Closes the store (a local one is flushed and its lock released);
    /// later calls raise. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let backend = self
                .backend
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            self.release(backend);
        });
    }

    /// Every document (those meeting `condition`, a WHERE condition on
    /// their metadata), each with its metadata (`docs --json`).
    #[pyo3(signature = (condition=None))]
    fn documents(&self, py: Python<'_>, condition: Option<&str>) -> Answer {
        self.call(py, |api| api.documents(condition))
    }

    /// Document `id`'s metadata: `{id, metadata}`.
    fn metadata(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.metadata(id))
    }

    /// Sets the keys of the JSON object `set_json` and removes `unset` in
    /// document `id`'s metadata: `{id, metadata}` as it now is.
    fn update_metadata(
        &self,
        py: Python<'_>,
        id: &str,
        set_json: &str,
        unset: Vec<String>,
    ) -> Answer {
        let set = json_argument("set", set_json)?;
        self.call(py, |api| api.update_metadata(id, &set, &unset))
    }

    /// Ingests files and directories (recursively), each file a document
    /// named by its path (`id` renames a single file); `{documents,
    /// failures}`. `progress(done, total)` (bytes) is called from this
    /// thread as the ingest advances. Interrupting Python (Ctrl-C), or an
    /// exception from `progress`, cancels it after the document being
    /// written and raises.
    #[pyo3(signature = (paths, id=None, format=None, progress=None, structurer=None, ip_maker=None, metadata_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn ingest_paths(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        id: Option<&str>,
        format: Option<&str>,
        progress: Option<Bound<'_, PyAny>>,
        structurer: Option<&str>,
        ip_maker: Option<&str>,
        metadata_json: Option<&str>,
    ) -> Answer {
        let options = ingest_options(format, structurer, ip_maker, metadata_json)?;
        if paths.iter().any(|path| path.as_os_str() == "-") {
            return Err(UserError::new_err(
                "\"-\" (standard input) is not read here: pass the document's bytes",
            ));
        }
        let sources = edudb::ingest::sources::expand(&paths, id).map_err(to_python)?;
        interruptible(py, progress, |tally, cancel| {
            self.with_backend(|backend| backend.api().ingest(&sources, options, tally, cancel))
        })
    }

    /// Stores `data` as document `id` (replacing one of that id).
    #[pyo3(signature = (id, data, format=None, structurer=None, ip_maker=None, metadata_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn ingest_bytes(
        &self,
        py: Python<'_>,
        id: &str,
        data: Vec<u8>,
        format: Option<&str>,
        structurer: Option<&str>,
        ip_maker: Option<&str>,
        metadata_json: Option<&str>,
    ) -> Answer {
        let options = ingest_options(format, structurer, ip_maker, metadata_json)?;
        self.call(py, |api| api.ingest_bytes(id, data, options))
    }

    /// Writes prepared documents (each the bytes `Preparer.prepare` made)
    /// in one atomic batch: `{documents}`.
    fn write_prepared(&self, py: Python<'_>, docs: Vec<Vec<u8>>) -> Answer {
        let batch = edudb::storage::prepared::frame_batch(&docs);
        self.call(py, |api| api.write_prepared(batch))
    }

    /// Removes document `id` (`rm --json`).
    fn remove(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.remove(id))
    }

    /// Document `id`'s structural tree (`tree --json`).
    fn tree(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.tree(id))
    }

    /// Where document `id`'s text lies on the pages of its PDF (`GET
    /// /v1/docs/{id}/pages`'s JSON; null for other formats).
    fn pages(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.pages(id))
    }

    /// Document `id`'s EDUs `first` to `last` (inclusive; `last`
    /// defaults to `first`), or all (`show --json`).
    #[pyo3(signature = (id, first=None, last=None))]
    fn edus(&self, py: Python<'_>, id: &str, first: Option<u32>, last: Option<u32>) -> Answer {
        let range = match (first, last) {
            (None, None) => None,
            (Some(first), last) => Some((first, last.unwrap_or(first))),
            (None, Some(_)) => {
                return Err(to_python(Error::Usage(
                    "`last` needs `first` (an inclusive EDU range)".into(),
                )));
            }
        };
        self.call(py, |api| api.edus(id, range))
    }

    /// Document `id`'s DAG, at `level` or all levels (`dag --json`).
    #[pyo3(signature = (id, level=None))]
    fn dag(&self, py: Python<'_>, id: &str, level: Option<u16>) -> Answer {
        self.call(py, |api| api.dag_listing(id, level))
    }

    /// BM25 search over EDUs and nodes, best first (`search --json`).
    fn search(&self, py: Python<'_>, text: &str, limit: usize) -> Answer {
        self.call(py, |api| api.search(text, limit))
    }

    /// Runs `statement` with `params` (names to text or numbers); with
    /// `explain`, its answer carries the plan.
    #[pyo3(signature = (statement, params, explain=false))]
    fn query(
        &self,
        py: Python<'_>,
        statement: &str,
        params: &Bound<'_, PyDict>,
        explain: bool,
    ) -> Answer {
        let params = to_params(params)?;
        self.call(py, |api| api.query(statement, &params, explain))
    }

    /// Answers `question` with the store's chat model (`ask --json`).
    #[pyo3(signature = (question, budget, statement, group, answer))]
    fn ask(
        &self,
        py: Python<'_>,
        question: &str,
        budget: u64,
        statement: Option<String>,
        group: usize,
        answer: bool,
    ) -> Answer {
        let options = AskOptions {
            budget,
            statement,
            group,
            answer,
        };
        self.call(py, |api| api.ask(question, &options))
    }

    /// The store's counts (`stats --json`).
    fn stats(&self, py: Python<'_>) -> Answer {
        self.call(py, |api| api.stats())
    }

    /// Checks every record (`check --json`).
    fn check(&self, py: Python<'_>) -> Answer {
        self.call(py, |api| api.check())
    }

    /// Rebuilds the derived indexes (`reindex --json`), reporting to
    /// `progress(done, total)` like an ingest; in-process, Ctrl-C (or an
    /// exception from `progress`) stops it early, the indexes left to be
    /// rebuilt again.
    #[pyo3(signature = (progress=None))]
    fn reindex(&self, py: Python<'_>, progress: Option<Bound<'_, PyAny>>) -> Answer {
        interruptible(py, progress, |tally, cancel| {
            self.with_backend(|backend| backend.api().reindex(tally, cancel))
        })
    }

    /// Writes a consistent copy of the store to the new directory `dest`
    /// while it stays in use (`backup DEST --json`; a served store's copy
    /// is written by its server, on its machine), reporting to
    /// `progress(done, total)` in documents and sessions; in-process,
    /// Ctrl-C (or an exception from `progress`) stops it and leaves no copy.
    #[pyo3(signature = (dest, progress=None))]
    fn backup(&self, py: Python<'_>, dest: PathBuf, progress: Option<Bound<'_, PyAny>>) -> Answer {
        interruptible(py, progress, |tally, cancel| {
            self.with_backend(|backend| backend.api().backup(&dest, tally, cancel))
        })
    }

    /// Rewrites the store compactly (`vacuum --json`). A served store is
    /// vacuumed by its server (its other requests wait); one open here
    /// once every other call on it has ended, and is opened again with
    /// the options it was opened with; one that could not be opened again
    /// is closed, and why is raised.
    fn vacuum(&self, py: Python<'_>) -> Answer {
        let answer = py.detach(|| {
            self.in_opening_process()?;
            let mut held = self.backend.write().unwrap_or_else(PoisonError::into_inner);
            match held.take().ok_or(Failed::Closed)? {
                Backend::Served(client) => {
                    let answer = unpanicked(|| client.vacuum());
                    *held = Some(Backend::Served(client));
                    answer
                }
                Backend::Local(db) => unpanicked(|| {
                    let (report, reopened) = db.vacuum_reopened(&NoProgress, &CancelToken::new());
                    *held = Some(Backend::Local(Box::new(reopened?)));
                    vacuum_answer(report?)
                }),
                Backend::Shards(set) => unpanicked(|| {
                    let (report, reopened) = set.vacuum_reopened(&NoProgress, &CancelToken::new());
                    *held = Some(Backend::Shards(Box::new(reopened?)));
                    vacuum_answer(report?)
                }),
            }
        })?;
        Ok(answer.to_string())
    }

    /// Appends a turn given as a `session add --jsonl` line (`{text, role?,
    /// at?, placement?}`) to `session`.
    fn add_turn(&self, py: Python<'_>, session: &str, turn: &str) -> Answer {
        let turn = TurnInput::from_json(turn)
            .map_err(|message| to_python(Error::Usage(format!("the turn: {message}"))))?;
        self.call(py, |api| api.append_turn(session, &turn))
    }

    /// Every session's summary (`session ls --json`).
    fn sessions(&self, py: Python<'_>) -> Answer {
        self.call(py, |api| api.sessions())
    }

    /// Session `id`'s dialogue tree (`session show --json`).
    fn session(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.session(id))
    }

    /// The context for `session`'s next turn within `budget` tokens,
    /// given what was just said as `query` (`session context --json`).
    #[pyo3(signature = (session, budget, query=None))]
    fn context(&self, py: Python<'_>, session: &str, budget: u64, query: Option<&str>) -> Answer {
        self.call(py, |api| api.session_context(session, budget, query))
    }

    /// Removes session `id` with its turns (`session rm --json`).
    fn remove_session(&self, py: Python<'_>, id: &str) -> Answer {
        self.call(py, |api| api.remove_session(id))
    }

    /// Forgets turn `turn` of `session` (`session forget --json`).
    fn forget_turn(&self, py: Python<'_>, session: &str, turn: u32) -> Answer {
        self.call(py, |api| api.forget_turn(session, turn))
    }

    /// For the benchmark: seconds per run of `statement` with `params`
    /// through the Rust library alone (no Python, no JSON), over `runs`
    /// runs; a store open here only.
    fn rust_query_seconds(
        &self,
        py: Python<'_>,
        statement: &str,
        params: &Bound<'_, PyDict>,
        runs: u32,
    ) -> PyResult<f64> {
        let params = to_params(params)?;
        py.detach(|| {
            self.with_backend(|backend| {
                let Backend::Local(db) = backend else {
                    return Err(Error::Usage(
                        "only a store open here runs a Rust-only query".into(),
                    ));
                };
                let query = db.prepare(statement)?;
                let started = Instant::now();
                for _ in 0..runs {
                    std::hint::black_box(db.run(&query, &params)?);
                }
                Ok(started.elapsed().as_secs_f64() / f64::from(runs.max(1)))
            })
        })
        .map_err(PyErr::from)
    }
}

/// A vacuum's report as its JSON answer.
fn vacuum_answer(report: edudb::VacuumReport) -> edudb::Result<Value> {
    serde_json::to_value(report)
        .map_err(|e| Error::Serve(format!("encoding the vacuum's report: {e}")))
}

/// Runs `work` on another thread while this one, without the GIL, waits
/// for it, and every 50 ms (and once at the end) checks for Python signals
/// and calls `progress(done, total)` with the GIL when the work's tally
/// moved; an interrupt or an exception from `progress` cancels `work`'s
/// token, waits for it to stop and is raised.
fn interruptible(
    py: Python<'_>,
    progress: Option<Bound<'_, PyAny>>,
    work: impl FnOnce(&Tally, &CancelToken) -> Result<Value, Failed> + Send,
) -> Answer {
    let cancel = CancelToken::new();
    let tally = Tally::default();
    let finished = (Mutex::new(false), Condvar::new());
    let mut reported = None;
    let mut tick = || -> PyResult<()> {
        let now = (
            tally.done.load(Ordering::Relaxed),
            tally.total.load(Ordering::Relaxed),
        );
        match &progress {
            Some(callback) if reported != Some(now) && now.1 > 0 => {
                reported = Some(now);
                callback.call1(now).map(drop)
            }
            _ => Ok(()),
        }
    };
    std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            let result = work(&tally, &cancel);
            *finished.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
            finished.1.notify_all();
            result
        });
        loop {
            let done = py.detach(|| {
                let guard = finished.0.lock().unwrap_or_else(PoisonError::into_inner);
                let (guard, _) = finished
                    .1
                    .wait_timeout_while(guard, Duration::from_millis(50), |done| !*done)
                    .unwrap_or_else(PoisonError::into_inner);
                *guard
            });
            if let Err(raised) = py.check_signals().and_then(|()| tick()) {
                cancel.cancel();
                let _ = py.detach(|| running.join());
                return Err(raised);
            }
            if done {
                break;
            }
        }
        let answer = running
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        Ok(answer.to_string())
    })
}

/// Long work's progress, as the waiting thread reads it: the current
/// phase's units done of its total.
#[derive(Default)]
struct Tally {
    total: AtomicU64,
    done: AtomicU64,
}

impl Progress for Tally {
    /// A phase starts (a reindex rebuilds the full-text index, then the
    /// vectors): its own count from 0.
    fn start(&self, _what: &str, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    fn advance(&self, units: u64, _item: &str) {
        self.done.fetch_add(units, Ordering::Relaxed);
    }
}

/// The embedder the Python arguments name (see `Store.open`); None for
/// none named.
fn embedder_config(
    embedder: Option<&str>,
    model: Option<PathBuf>,
    embed_url: Option<String>,
    embed_model: Option<String>,
    embed_key_env: Option<String>,
    dimension: Option<usize>,
) -> edudb::Result<Option<EmbedderConfig>> {
    let need = |value: Option<String>, what: &str| {
        value.ok_or_else(|| Error::Usage(format!("embedder={embedder:?} needs {what}")))
    };
    Ok(match embedder {
        None => None,
        Some("hashed") => Some(EmbedderConfig::Hashed {
            dimension: dimension.unwrap_or(edudb::compute::embed::hashed::DEFAULT_DIMENSION),
        }),
        Some("openai") => {
            let mut config = HttpConfig::new(
                need(embed_url, "embed_url")?,
                need(embed_model, "embed_model")?,
            );
            config.api_key_env = embed_key_env;
            Some(EmbedderConfig::Http(config))
        }
        Some("local") => {
            let dir = model.ok_or_else(|| Error::Usage("embedder=\"local\" needs model".into()))?;
            let model = std::fs::canonicalize(&dir)
                .map_err(|e| Error::Usage(format!("model {}: {e}", dir.display())))?;
            Some(EmbedderConfig::Local { model })
        }
        Some(other) => {
            return Err(Error::Usage(format!(
                "unknown embedder {other:?}; expected \"hashed\", \"openai\" or \"local\""
            )));
        }
    })
}

/// The chat model at `url` serving `model` (the key in the environment
/// variable `key_env`), for the language-model steps; none without a URL.
fn chat_model(
    url: Option<String>,
    model: Option<String>,
    key_env: Option<String>,
) -> edudb::Result<Option<Arc<dyn ChatModel>>> {
    match (url, model) {
        (None, None) => Ok(None),
        (Some(url), Some(model)) => {
            let mut config = ChatConfig::new(url, model);
            config.api_key_env = key_env;
            Ok(Some(Arc::new(HttpChat::new(&config)?)))
        }
        _ => Err(Error::Usage(
            "a chat model needs both llm_url and llm_model".into(),
        )),
    }
}

/// Ingest options from the Python arguments' names (and the metadata as
/// JSON).
fn ingest_options(
    format: Option<&str>,
    structurer: Option<&str>,
    ip_maker: Option<&str>,
    metadata_json: Option<&str>,
) -> PyResult<IngestOptions> {
    let metadata = match metadata_json {
        Some(json) => Metadata::from_json(&json_argument("metadata", json)?).map_err(to_python)?,
        None => Metadata::default(),
    };
    Ok(IngestOptions {
        format: parse_format(format)?,
        structurer: structurer
            .map(str::parse::<Structurer>)
            .transpose()
            .map_err(to_python)?
            .unwrap_or_default(),
        ip_maker: ip_maker
            .map(str::parse::<IpMakerKind>)
            .transpose()
            .map_err(to_python)?
            .unwrap_or_default(),
        metadata,
        ..IngestOptions::default()
    })
}

/// The JSON the Python side encoded for argument `name`.
fn json_argument(name: &str, json: &str) -> PyResult<Value> {
    serde_json::from_str(json).map_err(|e| UserError::new_err(format!("{name} is not JSON: {e}")))
}

/// A format name (`text`, `markdown`, `html`) as the library's.
fn parse_format(format: Option<&str>) -> PyResult<Option<Format>> {
    format
        .map(str::parse::<Format>)
        .transpose()
        .map_err(to_python)
}

/// A dict of parameters as the library's: names to text, numbers or
/// sequences of numbers (query vectors, such as a list or a numpy array).
fn to_params(params: &Bound<'_, PyDict>) -> PyResult<Params> {
    let mut bound = Params::new();
    for (name, value) in params.iter() {
        let name: String = name.extract()?;
        bound = if value.is_instance_of::<PyString>() {
            bound.text(name, value.extract::<String>()?)
        } else if value.is_instance_of::<pyo3::types::PyBool>() {
            return Err(UserError::new_err(format!(
                "parameter ${name} is a bool: give text or a number"
            )));
        } else if let Ok(number) = value.extract::<f64>() {
            bound.number(name, number)
        } else if value.is_instance_of::<pyo3::types::PyInt>() {
            return Err(UserError::new_err(format!(
                "parameter ${name} is an integer too large for a number"
            )));
        } else if let Ok(vector) = value.extract::<Vec<f32>>() {
            bound.vector(name, vector)
        } else {
            return Err(UserError::new_err(format!(
                "parameter ${name} is of type {}: give text, a number or a sequence of numbers (a query vector)",
                value.get_type().name()?
            )));
        };
    }
    Ok(bound)
}

/// A library error as the Python exception of its class; a query error
/// carries its location.
fn to_python(err: Error) -> PyErr {
    let located = match &err {
        Error::Query(q) => Some(Location {
            line: q.line,
            column: q.column,
            hint: q.hint.clone(),
            source_line: q.source_line.clone(),
            underline: (q.underline.start, q.underline.end),
        }),
        Error::Served {
            query: Some(query), ..
        } => Location::from_json(query),
        _ => None,
    };
    let message = match &err {
        Error::Served { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let not_found = matches!(
        err,
        Error::NoSuchDocument(_)
            | Error::NoSuchSession(_)
            | Error::NoSuchTurn { .. }
            | Error::NoSuchTopic { .. }
            | Error::Served { status: 404, .. }
    );
    let raised = if located.is_some() {
        QueryError::new_err(message)
    } else if not_found {
        NotFound::new_err(message)
    } else if err.is_busy() {
        StoreBusy::new_err(message)
    } else if err.is_damage() {
        Corrupt::new_err(message)
    } else if err.is_user_error() {
        UserError::new_err(message)
    } else {
        InternalError::new_err(message)
    };
    if let Some(location) = located {
        Python::attach(|py| location.attach(py, &raised));
    }
    if let Error::PartlyIngested {
        stored, not_stored, ..
    } = err
    {
        Python::attach(|py| {
            let value = raised.value(py);
            let _ = value.setattr("stored", stored);
            let _ = value.setattr("not_stored", not_stored);
        });
    }
    raised
}

/// Where a query error is.
struct Location {
    line: usize,
    column: usize,
    hint: Option<String>,
    source_line: String,
    underline: (usize, usize),
}

impl Location {
    /// From a server's error body (`query`).
    fn from_json(query: &Value) -> Option<Location> {
        let number = |field: &str| query[field].as_u64().map(|n| n as usize);
        let underline = query["underline"].as_array()?;
        Some(Location {
            line: number("line")?,
            column: number("column")?,
            hint: query["hint"].as_str().map(str::to_owned),
            source_line: query["source_line"].as_str()?.to_owned(),
            underline: (
                underline.first()?.as_u64()? as usize,
                underline.get(1)?.as_u64()? as usize,
            ),
        })
    }

    /// Sets the exception's `line`, `column`, `hint`, `source_line` and
    /// `caret` (the line's characters under the fault marked `^`).
    fn attach(&self, py: Python<'_>, err: &PyErr) {
        let value = err.value(py);
        let (start, end) = self.underline;
        let caret = format!(
            "{}{}",
            " ".repeat(start),
            "^".repeat(end.saturating_sub(start).max(1))
        );
        let _ = value.setattr("line", self.line);
        let _ = value.setattr("column", self.column);
        let _ = value.setattr("hint", self.hint.clone());
        let _ = value.setattr("source_line", self.source_line.clone());
        let _ = value.setattr("caret", caret);
    }
}

/// The module: the `Store` class, the exception classes, `__version__`.
/// Prepares documents apart from any store: what a store's ingest does
/// to a document before writing it, as bytes any store of the same
/// embedder writes (`Store.write_prepared`).
#[pyclass(frozen, module = "edudb._edudb")]
struct Preparer(edudb::Preparer);

#[pymethods]
impl Preparer {
    /// A preparer with the embedder the arguments name (as `Store.open`'s;
    /// none: hashed) and, for the language-model steps, a chat model.
    #[new]
    #[pyo3(signature = (*, embedder=None, model=None, embed_url=None, embed_model=None,
                        embed_key_env=None, dimension=None, llm_url=None, llm_model=None,
                        llm_key_env=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        embedder: Option<&str>,
        model: Option<PathBuf>,
        embed_url: Option<String>,
        embed_model: Option<String>,
        embed_key_env: Option<String>,
        dimension: Option<usize>,
        llm_url: Option<String>,
        llm_model: Option<String>,
        llm_key_env: Option<String>,
    ) -> PyResult<Preparer> {
        let config = embedder_config(
            embedder,
            model,
            embed_url,
            embed_model,
            embed_key_env,
            dimension,
        )
        .map_err(to_python)?
        .unwrap_or_default();
        let chat = chat_model(llm_url, llm_model, llm_key_env).map_err(to_python)?;
        let preparer = py
            .detach(|| edudb::Preparer::new(&config))
            .map_err(to_python)?;
        Ok(Preparer(match chat {
            Some(chat) => preparer.with_chat(chat),
            None => preparer,
        }))
    }

    /// The identity of the embedder (a store must have been built with
    /// the same one to write what this prepares).
    #[getter]
    fn embedder(&self) -> String {
        self.0.embedder().identity()
    }

    /// Prepares `data` as document `id`: the prepared document's bytes.
    #[pyo3(signature = (id, data, format=None, structurer=None, ip_maker=None, metadata_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn prepare<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        data: Vec<u8>,
        format: Option<&str>,
        structurer: Option<&str>,
        ip_maker: Option<&str>,
        metadata_json: Option<&str>,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let options = ingest_options(format, structurer, ip_maker, metadata_json)?;
        let source = edudb::Source {
            id: id.to_owned(),
            origin: edudb::ingest::sources::Origin::Bytes(data),
        };
        self.prepared_bytes(py, || Ok(source), options)
    }

    /// Prepares the file at `path` (its id `id`, else its name without
    /// extension): the prepared document's bytes.
    #[pyo3(signature = (path, id=None, format=None, structurer=None, ip_maker=None, metadata_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn prepare_path<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        id: Option<&str>,
        format: Option<&str>,
        structurer: Option<&str>,
        ip_maker: Option<&str>,
        metadata_json: Option<&str>,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let options = ingest_options(format, structurer, ip_maker, metadata_json)?;
        if path.is_dir() {
            return Err(UserError::new_err(format!(
                "{} is a directory: prepare its files one by one",
                path.display()
            )));
        }
        let source = || {
            let mut sources = edudb::ingest::sources::expand(&[path], id)?;
            match (sources.pop(), sources.is_empty()) {
                (Some(source), true) => Ok(source),
                _ => Err(Error::Usage("prepare one file at a time".into())),
            }
        };
        self.prepared_bytes(py, source, options)
    }
}

impl Preparer {
    /// The bytes of the document `source` names, prepared without the GIL.
    fn prepared_bytes<'py>(
        &self,
        py: Python<'py>,
        source: impl FnOnce() -> edudb::Result<edudb::Source> + Send,
        options: IngestOptions,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let bytes = py
            .detach(|| {
                unpanicked(|| {
                    let cancel = CancelToken::new();
                    (self
                        .0
                        .prepare(&source()?, options, &|_, _, _| {}, &cancel)?)
                    .to_bytes()
                })
            })
            .map_err(PyErr::from)?;
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }
}

/// Checks that `condition` is one WHERE condition of the query language,
/// and nothing more; raises `QueryError` with its line and column.
#[pyfunction]
fn check_condition(condition: &str) -> PyResult<()> {
    edudb::query::parser::parse_condition(condition)
        .map(drop)
        .map_err(|err| to_python(Error::Query(err)))
}

/// Which of `shards` stores of a shard set holds document `id` (CRC-32 of
/// its UTF-8 bytes modulo `shards`): the placement every writer of a set
/// follows.
#[pyfunction]
fn shard_of(id: &str, shards: usize) -> PyResult<usize> {
    if !(1..=edudb::MAX_SHARDS).contains(&shards) {
        return Err(to_python(Error::Usage(format!(
            "a shard set has 1 to {} stores, not {shards}",
            edudb::MAX_SHARDS
        ))));
    }
    Ok(edudb::shard_of(id, shards))
}

/// Where the stores of the shard set at `path` are, in placement order.
#[pyfunction]
fn shard_stores(path: PathBuf) -> PyResult<Vec<PathBuf>> {
    ShardSet::store_paths(&path).map_err(to_python)
}

/// The documents `paths` name, as an ingest reads them (files, and the
/// files under directories): `(id, path)` pairs, by id.
#[pyfunction]
fn expand_sources(paths: Vec<PathBuf>) -> PyResult<Vec<(String, PathBuf)>> {
    let sources = edudb::ingest::sources::expand(&paths, None).map_err(to_python)?;
    (sources.into_iter())
        .map(|source| match source.origin {
            edudb::ingest::sources::Origin::File(path) => Ok((source.id, path)),
            _ => Err(to_python(Error::Usage(format!(
                "{} is not a file: a distributed ingest reads files, or (id, bytes) pairs",
                source.id
            )))),
        })
        .collect()
}

#[pymodule]
fn _edudb(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Store>()?;
    module.add_class::<Preparer>()?;
    module.add_function(wrap_pyfunction!(check_condition, module)?)?;
    module.add_function(wrap_pyfunction!(shard_of, module)?)?;
    module.add_function(wrap_pyfunction!(shard_stores, module)?)?;
    module.add_function(wrap_pyfunction!(expand_sources, module)?)?;
    module.add("EdudbError", py.get_type::<EdudbError>())?;
    module.add("UserError", py.get_type::<UserError>())?;
    module.add("QueryError", py.get_type::<QueryError>())?;
    module.add("NotFound", py.get_type::<NotFound>())?;
    module.add("StoreBusy", py.get_type::<StoreBusy>())?;
    module.add("Corrupt", py.get_type::<Corrupt>())?;
    module.add("InternalError", py.get_type::<InternalError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
