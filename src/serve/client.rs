//! [`Client`]: a store served by `edudb serve`, used from Rust like an
//! embedded [`Db`](crate::Db) through [`Api`], whose calls a `Db` answers
//! too: each answers with the server's JSON body (the CLI's `--json`
//! contracts, described by the server's `GET /openapi.json`), and a
//! refusal is [`Error::Served`] with the server's error class, so
//! [`Error::is_busy`] and [`Error::is_user_error`] work as they do on a
//! local store.
//!
//! The calls block; a client must not be used from inside an async
//! runtime (it runs its own).

use std::path::{Path, PathBuf};

use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ask::AskOptions;
use crate::error::{Error, Result};
use crate::ingest::pipeline::{
    IngestOptions, IpMakerKind, Structurer, decode, detect_format, is_pdf,
};
use crate::ingest::sources::{Origin, Source, check_extension};
use crate::memory::TurnInput;
use crate::model::cost::LlmCost;
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::query::{Param, Params};

use super::api::Api;
use crate::engine::SOCKET_FILE;

/// A forwarded command line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct CommandRequest {
    /// The arguments after the program name.
    pub args: Vec<String>,
    /// The caller's working directory, which relative paths are read from.
    pub cwd: PathBuf,
    /// The caller's standard input, base64 (standard alphabet, padded),
    /// for a command that reads it (`-`); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin_base64: Option<String>,
}

/// What a forwarded command printed, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct CommandOutput {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Its exit code.
    pub code: u8,
}

/// The most JSON one ingest job of [`Api::ingest`] sends, below the
/// server's own body limit when that is smaller (16 MiB by default).
pub const JOB_BYTES: u64 = 4 << 20;

/// Bytes of an ingest job's body around its documents
/// (`{"documents":[…]}`), with room to spare.
const JOB_ENVELOPE: u64 = 64;

/// How often [`Client::ingest`] asks a job how far it got.
const JOB_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether `target` reads as `HOST:PORT` (a port of digits after the
/// last colon, a host without slashes).
fn is_address(target: &str) -> bool {
    target.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !host.contains('/')
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
    })
}

/// A connection to a server of a store.
#[derive(Debug)]
pub struct Client {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: Url,
    /// The server as given (its URL or socket), for errors.
    name: String,
    token: Option<String>,
    /// The largest request body the server takes (its health answer's
    /// `max_body_bytes`; unknown until checked).
    max_body: Option<u64>,
}

impl Client {
    /// Connects to the server at `target`: an `http://HOST:PORT` URL (or
    /// `HOST:PORT`), a store directory (its server's `serve.sock`) or a
    /// socket path; with `token`, every request presents it
    /// (`Authorization: Bearer`). Fails unless the server answers `GET
    /// /v1/health`: a target that names nothing, a store no server runs
    /// on, or a server that cannot be reached is a user error saying what
    /// was tried and why it failed.
    pub fn connect(target: &str, token: Option<&str>) -> Result<Client> {
        let path = Path::new(target);
        let mut client = if target.starts_with("http://") || target.starts_with("https://") {
            let base = Url::parse(target).map_err(|e| Error::Usage(format!("{target}: {e}")))?;
            Client::new(reqwest::Client::builder(), base, target.to_owned())?
        } else if is_address(target) && !path.exists() {
            let url = format!("http://{target}");
            let base = Url::parse(&url).map_err(|e| Error::Usage(format!("{target}: {e}")))?;
            Client::new(reqwest::Client::builder(), base, url)?
        } else if !path.exists() {
            return Err(Error::Usage(format!(
                "{target}: no such store, socket or address (give http://HOST:PORT, HOST:PORT, a store directory or its {SOCKET_FILE})"
            )));
        } else if path.is_dir() && !path.join(SOCKET_FILE).exists() {
            return Err(Error::Usage(format!(
                "no server runs on the store {target} (it has no {SOCKET_FILE}): start `edudb serve` there, or open the store itself"
            )));
        } else if path.is_dir() {
            Client::over_socket(&path.join(SOCKET_FILE))?
        } else {
            Client::over_socket(path)?
        };
        client.token = token.map(str::to_owned);
        let health = client.health().map_err(|err| match err {
            // Nothing answered: the transport's error, said as a refusal
            // of what the caller gave.
            Error::Serve(cause) => Error::Usage(format!(
                "no edudb server answers at {}: {cause}",
                client.name
            )),
            other => other,
        })?;
        client.max_body = health["max_body_bytes"].as_u64();
        Ok(client)
    }

    /// A client of the server on the Unix socket at `socket`, without a
    /// token, not yet checked.
    pub(crate) fn over_socket(socket: &Path) -> Result<Client> {
        let builder = reqwest::Client::builder().unix_socket(socket);
        let base = Url::parse("http://edudb/").expect("a valid URL");
        Client::new(builder, base, socket.display().to_string())
    }

    fn new(builder: reqwest::ClientBuilder, base: Url, name: String) -> Result<Client> {
        // reqwest is built without a bundled crypto provider; an error only
        // means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Client {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Serve(format!("starting the runtime: {e}")))?,
            http: builder
                .connect_timeout(std::time::Duration::from_secs(5))
                .build()
                .map_err(|e| Error::Serve(format!("{name}: {e}")))?,
            base,
            name,
            token: None,
            max_body: None,
        })
    }

    /// Runs an `edudb` command line on the served store (`POST /v1/cli`,
    /// the socket only) and returns what it printed.
    pub fn run_command(&mut self, request: &CommandRequest) -> Result<CommandOutput> {
        if let Some(stdin) = &request.stdin_base64 {
            if self.max_body.is_none() {
                self.max_body = self.health()?["max_body_bytes"].as_u64();
            }
            self.fits("the standard input forwarded", stdin.len() as u64)
                .map_err(|e| Error::Usage(format!("{e}; give the input as a file instead")))?;
        }
        let body = serde_json::to_value(request)
            .map_err(|e| Error::Serve(format!("encoding the command: {e}")))?;
        let answer = self.call(Method::POST, &["cli"], &[], Body::Json(body))?;
        serde_json::from_value(answer)
            .map_err(|e| Error::Serve(format!("{}: the command's answer: {e}", self.name)))
    }

    /// Has the server vacuum its store (`POST /v1/vacuum`): `vacuum
    /// --json`'s report.
    pub fn vacuum(&self) -> Result<Value> {
        self.call(Method::POST, &["vacuum"], &[], Body::None)
    }

    /// The server's `{store, version, max_body_bytes}`.
    pub fn health(&self) -> Result<Value> {
        self.call(Method::GET, &["health"], &[], Body::None)
    }

    /// Refuses to send `bytes` for `what` when they exceed the server's body
    /// limit: the server would refuse them (413), possibly before reading
    /// them all, which the client would see as a broken connection.
    fn fits(&self, what: &str, bytes: u64) -> Result<()> {
        match self.max_body {
            Some(limit) if bytes > limit => Err(Error::Usage(format!(
                "{what}: {bytes} bytes to send; the server at {} takes at most {limit} bytes per request",
                self.name
            ))),
            _ => Ok(()),
        }
    }

    /// Submits one ingest job (its trees and points built as `options`
    /// say) and follows it to its end; its final status.
    fn run_job(
        &self,
        documents: &[Value],
        options: &IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Value> {
        let mut body = json!({ "documents": documents });
        // Only what differs from the defaults, which any server takes.
        if options.structurer != Structurer::default() {
            body["structurer"] = json!(options.structurer.name());
        }
        if options.ip_maker != IpMakerKind::default() {
            body["ip_maker"] = json!(options.ip_maker.name());
        }
        if !options.metadata.is_empty() {
            body["metadata"] = options.metadata.to_json();
        }
        let body = Body::Json(body);
        let submitted = self.call(Method::POST, &["ingest"], &[], body)?;
        let job = submitted["job"].to_string();
        let (mut reported, mut cancelling) = (0, false);
        let status = loop {
            let status = self.call(Method::GET, &["jobs", &job], &[], Body::None)?;
            let done = status["done"].as_u64().unwrap_or(reported);
            if done > reported {
                progress.advance(done - reported, "");
                reported = done;
            }
            if status["state"] != "running" {
                break status;
            }
            if cancel.is_cancelled() && !cancelling {
                self.call(Method::DELETE, &["jobs", &job], &[], Body::None)?;
                cancelling = true;
            }
            std::thread::sleep(JOB_POLL);
        };
        match status["state"].as_str() {
            Some("done") => Ok(status),
            Some("cancelled") => Err(Error::Cancelled),
            _ => {
                let class = status["error"]["class"].as_str().unwrap_or("internal");
                let served = Error::Served {
                    class: class.to_owned(),
                    status: status_of(class),
                    message: status["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    query: None,
                    damage: status["error"]["damage"] == true,
                };
                let ids = |field: &str| -> Option<Vec<String>> {
                    serde_json::from_value(status.get(field)?.clone()).ok()
                };
                Err(match (ids("stored"), ids("not_stored")) {
                    (Some(stored), Some(not_stored)) => Error::PartlyIngested {
                        cause: Box::new(served),
                        stored,
                        not_stored,
                    },
                    _ => served,
                })
            }
        }
    }

    /// Sends one request to `/v1/<path>` and returns its JSON answer, or the
    /// server's refusal as [`Error::Served`].
    fn call(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Body,
    ) -> Result<Value> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Error::Serve(format!("{} cannot take a path", self.base)))?
            .pop_if_empty()
            .push("v1")
            .extend(path);
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(name, value)| (name, value)));
        }
        let failed = |e: reqwest::Error| {
            Error::Serve(format!("{}: {method} {}: {e}", self.name, url.path()))
        };
        let mut request = self.http.request(method.clone(), url.clone());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request = match body {
            Body::None => request,
            Body::Bytes(bytes) => request.body(bytes),
            Body::Json(value) => request.json(&value),
        };
        self.runtime.block_on(async {
            let response = request.send().await.map_err(failed)?;
            let status = response.status();
            let answer: Value = response.json().await.map_err(failed)?;
            if status.is_success() {
                return Ok(answer);
            }
            let error = &answer["error"];
            Err(Error::Served {
                class: error["class"].as_str().unwrap_or("internal").to_owned(),
                status: status.as_u16(),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                query: error.get("query").cloned(),
                damage: error["damage"] == true,
            })
        })
    }
}

/// A source as a document of an ingest job, with its bytes for progress:
/// a PDF as its file's bytes in base64, anything else as its decoded text
/// and format.
fn job_document(source: &Source, bytes: Vec<u8>, options: &IngestOptions) -> Result<(Value, u64)> {
    use base64::Engine as _;
    let name = source.name();
    check_extension(options.format, source.path())?;
    if is_pdf(options.format, source.path(), &bytes) {
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let document = json!({"id": source.id, "data_base64": data, "format": "pdf"});
        return Ok((document, bytes.len() as u64));
    }
    let text = decode(&name, bytes, options.lossy)?;
    let format = (options.format).unwrap_or_else(|| detect_format(source.path(), &text));
    let units = text.len() as u64;
    Ok((
        json!({"id": source.id, "text": text, "format": format.name()}),
        units,
    ))
}

/// The calls answered by the server. [`Api::ingest`] reads and decodes
/// each source here (its format the one given, or detected here from its
/// file name or text); one with bad content is a failure in the answer
/// while the rest go on, as is one whose JSON exceeds the server's body
/// limit (not sent). The documents go as jobs (`POST /v1/ingest`) of at
/// most [`JOB_BYTES`] of JSON each, and never over the server's body
/// limit, one after another; the server's
/// progress is reported, and cancelling cancels the running job (documents
/// written stay, whole). A job that failed is the error, a cancelled one
/// [`Error::Cancelled`].
impl Api for Client {
    fn documents(&self, condition: Option<&str>) -> Result<Value> {
        let query: Vec<(&str, String)> = condition
            .map(|condition| ("where", condition.to_owned()))
            .into_iter()
            .collect();
        self.call(Method::GET, &["docs"], &query, Body::None)
    }

    fn metadata(&self, id: &str) -> Result<Value> {
        self.call(Method::GET, &["docs", id, "metadata"], &[], Body::None)
    }

    fn update_metadata(&self, id: &str, set: &Value, unset: &[String]) -> Result<Value> {
        let body = Body::Json(json!({ "set": set, "unset": unset }));
        self.call(Method::PATCH, &["docs", id, "metadata"], &[], body)
    }

    fn ingest_bytes(&self, id: &str, bytes: Vec<u8>, options: IngestOptions) -> Result<Value> {
        let format_only = options.structurer == Structurer::default()
            && options.ip_maker == IpMakerKind::default()
            && options.metadata.is_empty();
        if !format_only {
            // `PUT /v1/docs/{id}` takes only a format: a one-document job.
            let source = Source {
                id: id.to_owned(),
                origin: Origin::Bytes(bytes),
            };
            let mut answer = self.ingest(&[source], options, &NoProgress, &CancelToken::new())?;
            if let Some(document) = answer["documents"].get_mut(0) {
                return Ok(document.take());
            }
            let failure = &answer["failures"][0];
            let class = failure["class"].as_str().unwrap_or("internal");
            return Err(Error::Served {
                class: class.to_owned(),
                status: status_of(class),
                message: (failure["message"].as_str())
                    .unwrap_or("the job wrote nothing and reported no failure")
                    .to_owned(),
                query: None,
                damage: false,
            });
        }
        self.fits(id, bytes.len() as u64)?;
        let format = options.format.map(|f| f.name().to_owned());
        let query: Vec<(&str, String)> = format.into_iter().map(|f| ("format", f)).collect();
        self.call(Method::PUT, &["docs", id], &query, Body::Bytes(bytes))
    }

    fn write_prepared(&self, batch: Vec<u8>) -> Result<Value> {
        self.fits("the prepared documents", batch.len() as u64)?;
        self.call(Method::POST, &["prepared"], &[], Body::Bytes(batch))
    }

    fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Value> {
        let mut failures = Vec::new();
        // Each job's documents, text bytes (the server's progress units)
        // and encoded bytes (what its body limit counts).
        let mut jobs: Vec<(Vec<Value>, u64, u64)> = vec![(Vec::new(), 0, 0)];
        let job_limit = self.max_body.map_or(JOB_BYTES, |limit| {
            JOB_BYTES.min(limit.saturating_sub(JOB_ENVELOPE))
        });
        for source in sources {
            let name = source.name();
            match source
                .read()
                .and_then(|bytes| job_document(source, bytes, &options))
            {
                Ok((document, bytes)) => {
                    // A comma or the envelope around each document.
                    let encoded = document.to_string().len() as u64 + 1;
                    if let Err(err) = self.fits(&name, encoded + JOB_ENVELOPE) {
                        failures.push(json!({
                            "source": name, "class": "user", "message": err.to_string(),
                        }));
                        continue;
                    }
                    if jobs.last().is_some_and(|(documents, _, size)| {
                        !documents.is_empty() && size + encoded > job_limit
                    }) {
                        jobs.push((Vec::new(), 0, 0));
                    }
                    let (documents, text_bytes, size) = jobs.last_mut().expect("one job at least");
                    documents.push(document);
                    *text_bytes += bytes;
                    *size += encoded;
                }
                Err(err) if err.is_user_error() => failures.push(json!({
                    "source": name, "class": "user", "message": err.to_string(),
                })),
                Err(err) => return Err(err),
            }
        }
        progress.start(
            "ingest",
            jobs.iter().map(|(_, text_bytes, _)| text_bytes).sum(),
        );
        let mut documents = Vec::new();
        let mut llm = LlmCost::default();
        let jobs: Vec<Vec<Value>> = (jobs.into_iter())
            .map(|(batch, _, _)| batch)
            .filter(|batch| !batch.is_empty())
            .collect();
        for (number, batch) in jobs.iter().enumerate() {
            if cancel.is_cancelled() {
                progress.finish();
                return Err(Error::Cancelled);
            }
            let done = self.run_job(batch, &options, progress, cancel);
            let done = done.map_err(|err| {
                progress.finish();
                partly_ingested(err, &documents, batch, &jobs[number + 1..])
            })?;
            let listed = |field: &str| match &done[field] {
                Value::Array(items) => Ok(items.clone()),
                other => Err(Error::Serve(format!(
                    "{}: a finished job's {field} are {other}",
                    self.name
                ))),
            };
            documents.extend(listed("documents")?);
            failures.extend(listed("failures")?);
            // A server from before the language-model steps reports none.
            if !done["llm"].is_null() {
                let spent: LlmCost = serde_json::from_value(done["llm"].clone()).map_err(|e| {
                    Error::Serve(format!("{}: a finished job's llm cost: {e}", self.name))
                })?;
                llm.add(&spent);
            }
        }
        progress.finish();
        Ok(json!({ "documents": documents, "failures": failures, "llm": llm }))
    }

    fn remove(&self, id: &str) -> Result<Value> {
        self.call(Method::DELETE, &["docs", id], &[], Body::None)
    }

    fn tree(&self, id: &str) -> Result<Value> {
        self.call(Method::GET, &["docs", id, "tree"], &[], Body::None)
    }

    fn pages(&self, id: &str) -> Result<Value> {
        self.call(Method::GET, &["docs", id, "pages"], &[], Body::None)
    }

    fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Value> {
        let query: Vec<(&str, String)> = range
            .map(|(first, last)| vec![("first", first.to_string()), ("last", last.to_string())])
            .unwrap_or_default();
        self.call(Method::GET, &["docs", id, "edus"], &query, Body::None)
    }

    fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<Value> {
        let query: Vec<(&str, String)> = level
            .map(|l| ("level", l.to_string()))
            .into_iter()
            .collect();
        self.call(Method::GET, &["docs", id, "dag"], &query, Body::None)
    }

    fn search(&self, query: &str, limit: usize) -> Result<Value> {
        let args = [("q", query.to_owned()), ("limit", limit.to_string())];
        self.call(Method::GET, &["search"], &args, Body::None)
    }

    fn query(&self, statement: &str, params: &Params, explain: bool) -> Result<Value> {
        let params: serde_json::Map<String, Value> = params
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    Param::Text(text) => json!(text),
                    Param::Number(n) => json!(n),
                    Param::Vector(vector) => json!(vector),
                };
                (name.to_owned(), value)
            })
            .collect();
        let body = json!({ "statement": statement, "params": params, "explain": explain });
        self.call(Method::POST, &["query"], &[], Body::Json(body))
    }

    fn stats(&self) -> Result<Value> {
        self.call(Method::GET, &["stats"], &[], Body::None)
    }

    fn check(&self) -> Result<Value> {
        self.call(Method::GET, &["check"], &[], Body::None)
    }

    fn reindex(&self, _progress: &dyn Progress, _cancel: &CancelToken) -> Result<Value> {
        self.call(Method::POST, &["reindex"], &[], Body::None)
    }

    /// The server writes the copy, so a relative `dest` is made absolute
    /// here first (the caller's meaning, for a server on this machine).
    fn backup(
        &self,
        dest: &Path,
        _progress: &dyn Progress,
        _cancel: &CancelToken,
    ) -> Result<Value> {
        let dest = std::path::absolute(dest).map_err(|e| {
            Error::Usage(format!("the backup's destination {}: {e}", dest.display()))
        })?;
        let body = Body::Json(json!({ "dest": dest }));
        self.call(Method::POST, &["backup"], &[], body)
    }

    fn append_turn(&self, session: &str, turn: &TurnInput) -> Result<Value> {
        let path = ["sessions", session, "turns"];
        self.call(Method::POST, &path, &[], Body::Json(turn.to_json()))
    }

    fn sessions(&self) -> Result<Value> {
        self.call(Method::GET, &["sessions"], &[], Body::None)
    }

    fn session(&self, id: &str) -> Result<Value> {
        self.call(Method::GET, &["sessions", id], &[], Body::None)
    }

    fn session_context(&self, session: &str, budget: u64, query: Option<&str>) -> Result<Value> {
        let mut args = vec![("budget", budget.to_string())];
        args.extend(query.map(|q| ("query", q.to_owned())));
        self.call(
            Method::GET,
            &["sessions", session, "context"],
            &args,
            Body::None,
        )
    }

    fn remove_session(&self, id: &str) -> Result<Value> {
        self.call(Method::DELETE, &["sessions", id], &[], Body::None)
    }

    fn forget_turn(&self, session: &str, turn: u32) -> Result<Value> {
        let turn = turn.to_string();
        self.call(
            Method::DELETE,
            &["sessions", session, "turns", &turn],
            &[],
            Body::None,
        )
    }

    fn ask(&self, question: &str, options: &AskOptions) -> Result<Value> {
        let body = json!({
            "question": question,
            "budget": options.budget,
            "statement": options.statement,
            "group": options.group,
            "answer": options.answer,
        });
        self.call(Method::POST, &["ask"], &[], Body::Json(body))
    }
}

/// A request's body.
enum Body {
    None,
    Bytes(Vec<u8>),
    Json(Value),
}

/// `err`, which stopped the ingest job of `batch`, as what the whole
/// ingest did: the ids of `written` (earlier jobs' documents) and any the
/// failed job stored are `stored`; its other documents and those of the
/// jobs `not_sent` are `not_stored` ([`Error::PartlyIngested`]). A
/// cancellation, or a failure before anything was stored, stays as it is.
fn partly_ingested(
    err: Error,
    written: &[Value],
    batch: &[Value],
    not_sent: &[Vec<Value>],
) -> Error {
    let ids = |documents: &[Value]| -> Vec<String> {
        (documents.iter())
            .filter_map(|d| d["id"].as_str().map(str::to_owned))
            .collect()
    };
    let (cause, mut stored, mut not_stored) = match err {
        Error::PartlyIngested {
            cause,
            stored,
            not_stored,
        } => (*cause, stored, not_stored),
        Error::Cancelled => return Error::Cancelled,
        other => (other, Vec::new(), ids(batch)),
    };
    stored.splice(0..0, ids(written));
    if stored.is_empty() {
        return cause;
    }
    not_stored.extend(not_sent.iter().flat_map(|batch| ids(batch)));
    Error::PartlyIngested {
        cause: Box::new(cause),
        stored,
        not_stored,
    }
}

/// The HTTP status a request refused with `class` would have had: how a
/// failure the server reports inside a 200 (a job's) is presented.
fn status_of(class: &str) -> u16 {
    match class {
        "user" => 400,
        "busy" => 503,
        _ => 500,
    }
}
