//! The HTTP embedder: any server speaking the OpenAI embeddings API
//! (`POST {base_url}/embeddings` with `{"model": ..., "input": [...]}`),
//! such as llama.cpp's server, vLLM, TEI, Ollama or a hosted API.
//!
//! [`Embedder::embed`] is synchronous and may be called from many threads at
//! once. Each call splits its texts into batches of
//! [`HttpConfig::batch_size`] and runs them on a tokio runtime owned by the
//! embedder; at most [`HttpConfig::max_concurrency`] requests are in flight
//! across all callers together. Connection failures, timeouts, 429 and 5xx
//! answers are retried with exponential backoff (honouring `Retry-After`);
//! other answers are checked strictly and every vector is L2-normalised.

use std::fmt;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::compute::embed::embedder::Embedder;
use crate::compute::vector::normalise;
use crate::error::EmbedError;

/// Longest exponential backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest `Retry-After` wait honoured; longer requests are cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Characters of a reply body quoted in errors.
const BODY_SNIPPET_CHARS: usize = 200;
/// Text embedded once to learn the dimension when the config has none.
const PROBE_TEXT: &str = "dimension probe";
/// Upper bound on [`HttpConfig::max_concurrency`].
const MAX_CONCURRENCY: usize = 1024;
/// Upper bound on [`HttpConfig::timeout_secs`] (one day).
const MAX_TIMEOUT_SECS: u64 = 86_400;
/// Most runtime worker threads (they only move bytes and parse JSON).
const MAX_WORKER_THREADS: usize = 4;

/// Settings of an [`HttpEmbedder`]; persisted as JSON with the store, so
/// every optional field has a serde default. The API key itself is never
/// stored, only the name of the environment variable holding it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpConfig {
    /// Base URL of the API, e.g. `http://127.0.0.1:8080/v1`; requests go to
    /// `{base_url}/embeddings`.
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Name of the environment variable holding the bearer API key, if the
    /// server needs one.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Vector length; `None` makes [`HttpEmbedder::new`] learn it by
    /// embedding one probe text.
    #[serde(default)]
    pub dimension: Option<usize>,
    /// Texts per request.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Requests in flight at once, over all concurrent callers.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    /// Time limit of one request (connecting, sending and reading), seconds.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Retries after a failed attempt before giving up.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First backoff between attempts, in milliseconds; it doubles on every
    /// retry up to 30 s.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
}

fn default_batch_size() -> usize {
    64
}

fn default_max_concurrency() -> usize {
    4
}

fn default_timeout_secs() -> u64 {
    30
}

fn default_max_retries() -> u32 {
    4
}

fn default_backoff_ms() -> u64 {
    200
}

impl HttpConfig {
    /// A configuration for `model` at `base_url` with the default batch
    /// size (64), concurrency (4), timeout (30 s), retries (4) and backoff
    /// (200 ms), no API key, and a dimension learned on first use.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> HttpConfig {
        HttpConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            dimension: None,
            batch_size: default_batch_size(),
            max_concurrency: default_max_concurrency(),
            timeout_secs: default_timeout_secs(),
            max_retries: default_max_retries(),
            backoff_ms: default_backoff_ms(),
        }
    }

    /// Rejects settings the embedder cannot work with.
    fn validate(&self) -> Result<(), EmbedError> {
        let fail = |message: String| Err(EmbedError::Config(message));
        if self.model.trim().is_empty() {
            return fail("the HTTP embedder needs a model name".into());
        }
        if self.dimension == Some(0) {
            return fail("the HTTP embedder's dimension must be at least 1".into());
        }
        if self.batch_size == 0 {
            return fail("the HTTP embedder's batch_size must be at least 1".into());
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.max_concurrency) {
            return fail(format!(
                "the HTTP embedder's max_concurrency must be between 1 and {MAX_CONCURRENCY}, not {}",
                self.max_concurrency
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&self.timeout_secs) {
            return fail(format!(
                "the HTTP embedder's timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, not {}",
                self.timeout_secs
            ));
        }
        Ok(())
    }

    /// `{base_url}/embeddings`, checked to be an http(s) URL with a host.
    fn endpoint(&self) -> Result<reqwest::Url, EmbedError> {
        let base = self.base_url.trim().trim_end_matches('/');
        let endpoint = format!("{base}/embeddings");
        let url = reqwest::Url::parse(&endpoint).map_err(|e| {
            EmbedError::Config(format!(
                "embedding base URL {:?} is not a valid URL: {e}",
                self.base_url
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(EmbedError::Config(format!(
                "embedding base URL {:?} must be an http:// or https:// URL with a host",
                self.base_url
            )));
        }
        Ok(url)
    }

    /// The `Authorization` header value from the key variable, if any.
    fn authorization(&self) -> Result<Option<HeaderValue>, EmbedError> {
        let Some(name) = &self.api_key_env else {
            return Ok(None);
        };
        let key = std::env::var(name).map_err(|e| {
            let why = match e {
                std::env::VarError::NotPresent => "is not set",
                std::env::VarError::NotUnicode(_) => "is not valid Unicode",
            };
            EmbedError::Config(format!("the embedding API key variable {name} {why}"))
        })?;
        if key.trim().is_empty() {
            return Err(EmbedError::Config(format!(
                "the embedding API key variable {name} is empty"
            )));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
            EmbedError::Config(format!(
                "the embedding API key in {name} contains characters not allowed in an HTTP header"
            ))
        })?;
        value.set_sensitive(true);
        Ok(Some(value))
    }
}

/// An [`Embedder`] calling an OpenAI-compatible embeddings server (see the
/// module docs). Safe to share between threads.
pub struct HttpEmbedder {
    /// What the request tasks need.
    shared: Arc<Shared>,
    batch_size: usize,
    dimension: usize,
    identity: String,
    /// Where `embed` spawns its work.
    handle: Handle,
    /// Owns the worker threads; taken and shut down without blocking on
    /// drop (a plain drop would panic inside another async runtime).
    runtime: Option<Runtime>,
}

/// The part of the embedder the request tasks hold.
struct Shared {
    client: reqwest::Client,
    url: reqwest::Url,
    model: String,
    authorization: Option<HeaderValue>,
    /// Limits requests in flight over all callers.
    permits: Semaphore,
    timeout_secs: u64,
    max_retries: u32,
    backoff: Duration,
}

/// One failed attempt, and whether another may succeed.
struct Failure {
    error: EmbedError,
    retry: bool,
    /// The server's `Retry-After`, if it sent one.
    retry_after: Option<Duration>,
}

/// The request body of one batch.
#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

/// The parts of an OpenAI embeddings reply that are used.
#[derive(Deserialize)]
struct EmbeddingReply {
    data: Vec<EmbeddingItem>,
}

/// One vector of a reply.
#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    /// Read as f64 and narrowed after, so a value beyond the f32 range is
    /// the range error below whichever float parsing serde_json is built
    /// with (with `float_roundtrip` it refuses to read one as f32).
    embedding: Vec<f64>,
}

impl HttpEmbedder {
    /// Checks `config`, reads the API key variable, starts the client and
    /// its runtime, and (when `config.dimension` is `None`) learns the
    /// dimension by embedding one probe text.
    pub fn new(config: HttpConfig) -> Result<HttpEmbedder, EmbedError> {
        config.validate()?;
        let url = config.endpoint()?;
        let authorization = config.authorization()?;
        // reqwest is built without a bundled crypto provider; an error here
        // only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_secs(config.timeout_secs);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| {
                EmbedError::Config(format!(
                    "could not build the HTTP client for {url}: {}",
                    chain(e)
                ))
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.max_concurrency.min(MAX_WORKER_THREADS))
            .thread_name("edudb-embed")
            .enable_all()
            .build()
            .map_err(|e| {
                EmbedError::Config(format!("could not start the HTTP embedder's runtime: {e}"))
            })?;
        let shared = Shared {
            client,
            url,
            model: config.model.clone(),
            authorization,
            permits: Semaphore::new(config.max_concurrency),
            timeout_secs: config.timeout_secs,
            max_retries: config.max_retries,
            backoff: Duration::from_millis(config.backoff_ms),
        };
        let mut embedder = HttpEmbedder {
            shared: Arc::new(shared),
            batch_size: config.batch_size,
            dimension: config.dimension.unwrap_or(0),
            identity: String::new(),
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        };
        if config.dimension.is_none() {
            let probe = embedder.request(&[PROBE_TEXT], None)?;
            embedder.dimension = probe.first().map_or(0, Vec::len);
            tracing::debug!(
                url = %embedder.shared.url,
                dimension = embedder.dimension,
                "learned the embedding dimension"
            );
        }
        embedder.identity = format!("openai:{}:{}", config.model, embedder.dimension);
        Ok(embedder)
    }

    /// Embeds `texts` in batches; `expected` is the vector length to insist
    /// on (`None` while probing: any consistent, non-zero length).
    fn request(
        &self,
        texts: &[&str],
        expected: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let shared = Arc::clone(&self.shared);
        let bodies = texts
            .chunks(self.batch_size)
            .map(|input| {
                let body = serde_json::to_vec(&EmbeddingRequest {
                    model: &shared.model,
                    input,
                })
                .map_err(|e| EmbedError::Request {
                    url: shared.url.to_string(),
                    message: format!("could not encode the request: {e}"),
                })?;
                Ok((body, input.len()))
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        // The work runs on the embedder's runtime and the answer comes back
        // over a channel, so callers may be plain threads or even tasks of
        // another runtime (where `block_on` would panic).
        let (sender, receiver) = mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let result = embed_batches(shared, bodies, expected).await;
            // The caller waits on `receiver` until this arrives.
            let _ = sender.send(result);
        });
        receiver.recv().unwrap_or_else(|_| {
            Err(EmbedError::Request {
                url: self.shared.url.to_string(),
                message: "the embedding task stopped without an answer".into(),
            })
        })
    }
}

impl Embedder for HttpEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.request(texts, Some(self.dimension))
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn identity(&self) -> String {
        self.identity.clone()
    }
}

impl fmt::Debug for HttpEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpEmbedder")
            .field("url", &self.shared.url.as_str())
            .field("model", &self.shared.model)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .field("authorization", &self.shared.authorization.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for HttpEmbedder {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Sends every batch (as many at once as the permits allow) and joins the
/// vectors in input order. The first failure aborts the other batches.
async fn embed_batches(
    shared: Arc<Shared>,
    bodies: Vec<(Vec<u8>, usize)>,
    expected: Option<usize>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let mut slots: Vec<Option<Vec<Vec<f32>>>> = vec![None; bodies.len()];
    let mut tasks = JoinSet::new();
    for (number, (body, count)) in bodies.into_iter().enumerate() {
        let shared = Arc::clone(&shared);
        tasks.spawn(async move { (number, shared.send_batch(body, count, expected).await) });
    }
    while let Some(joined) = tasks.join_next().await {
        let (number, result) = joined.map_err(|e| EmbedError::Request {
            url: shared.url.to_string(),
            message: format!("an embedding task failed: {e}"),
        })?;
        if let Some(slot) = slots.get_mut(number) {
            *slot = Some(result?);
        }
    }
    let mut vectors = Vec::new();
    for slot in slots {
        let Some(batch) = slot else {
            return Err(shared.malformed("a batch got no answer".into()));
        };
        vectors.extend(batch);
    }
    Ok(vectors)
}

impl Shared {
    /// One batch with retries: the vectors of `count` texts, in order.
    async fn send_batch(
        &self,
        body: Vec<u8>,
        count: usize,
        expected: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut retries = 0;
        loop {
            let outcome = {
                let _permit = self
                    .permits
                    .acquire()
                    .await
                    .map_err(|e| EmbedError::Request {
                        url: self.url.to_string(),
                        message: format!("the request limiter closed: {e}"),
                    })?;
                self.attempt(body.clone(), count, expected).await
            };
            let failure = match outcome {
                Ok(vectors) => return Ok(vectors),
                Err(failure) => failure,
            };
            if !failure.retry || retries >= self.max_retries {
                return Err(with_attempts(failure.error, retries + 1));
            }
            let delay = failure.retry_after.unwrap_or_else(|| self.backoff(retries));
            retries += 1;
            tracing::warn!(
                url = %self.url,
                retry = retries,
                of = self.max_retries,
                delay_ms = delay.as_millis() as u64,
                "embedding request failed, retrying: {}",
                failure.error
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// The wait before retry number `retries + 1`: the base backoff doubled
    /// `retries` times, at most [`MAX_BACKOFF`].
    fn backoff(&self, retries: u32) -> Duration {
        let factor = 1u32.checked_shl(retries).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(MAX_BACKOFF)
    }

    /// One request: the checked vectors, or why not.
    async fn attempt(
        &self,
        body: Vec<u8>,
        count: usize,
        expected: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, Failure> {
        let mut request = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_failure(e))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_failure(e))?;
        if !status.is_success() {
            return Err(Failure {
                error: EmbedError::Status {
                    url: self.url.to_string(),
                    status: status.as_u16(),
                    body: snippet(&bytes),
                },
                retry: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
                retry_after,
            });
        }
        self.parse(&bytes, count, expected)
            .map_err(|error| Failure {
                error,
                retry: false,
                retry_after: None,
            })
    }

    /// A failure to connect, send or receive; all are worth a retry.
    fn transport_failure(&self, error: reqwest::Error) -> Failure {
        let retry = !error.is_builder();
        let message = if error.is_timeout() {
            format!("no answer within {} s", self.timeout_secs)
        } else if error.is_connect() {
            format!("could not connect: {}", chain(error))
        } else {
            chain(error)
        };
        Failure {
            error: EmbedError::Request {
                url: self.url.to_string(),
                message,
            },
            retry,
            retry_after: None,
        }
    }

    /// Checks a successful reply strictly and returns its vectors in input
    /// order, normalised.
    fn parse(
        &self,
        bytes: &[u8],
        count: usize,
        expected: Option<usize>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let reply: EmbeddingReply = serde_json::from_slice(bytes).map_err(|e| {
            self.malformed(format!(
                "not an embeddings response ({e}); it starts: {}",
                snippet(bytes)
            ))
        })?;
        if reply.data.len() != count {
            return Err(self.malformed(format!(
                "{} embeddings for {count} inputs",
                reply.data.len()
            )));
        }
        let mut dimension = expected;
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
        for EmbeddingItem { index, embedding } in reply.data {
            let mut embedding: Vec<f32> = embedding.into_iter().map(|x| x as f32).collect();
            let Some(slot) = slots.get_mut(index) else {
                return Err(
                    self.malformed(format!("index {index} is out of range for {count} inputs"))
                );
            };
            if slot.is_some() {
                return Err(self.malformed(format!("index {index} appears more than once")));
            }
            match (expected, dimension) {
                (Some(expected), _) if embedding.len() != expected => {
                    return Err(EmbedError::Dimension {
                        identity: format!("openai:{}:{expected}", self.model),
                        expected,
                        found: embedding.len(),
                    });
                }
                (None, Some(first)) if embedding.len() != first => {
                    return Err(self.malformed(format!(
                        "embeddings of different lengths ({first} and {}) in one reply",
                        embedding.len()
                    )));
                }
                _ => {}
            }
            if embedding.is_empty() {
                return Err(self.malformed(format!("the embedding at index {index} is empty")));
            }
            if embedding.iter().any(|x| !x.is_finite()) {
                return Err(self.malformed(format!(
                    "the embedding at index {index} holds a value outside the f32 range"
                )));
            }
            dimension = Some(embedding.len());
            normalise(&mut embedding);
            *slot = Some(embedding);
        }
        // Every slot is filled: `count` unique in-range indexes were seen.
        slots
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| self.malformed("an input got no embedding".into()))
    }

    fn malformed(&self, message: String) -> EmbedError {
        EmbedError::Malformed {
            url: self.url.to_string(),
            message,
        }
    }
}

/// `error` noting how many attempts were made, where it has room for that.
fn with_attempts(error: EmbedError, attempts: u32) -> EmbedError {
    match error {
        EmbedError::Request { url, message } if attempts > 1 => EmbedError::Request {
            url,
            message: format!("{message} (after {attempts} attempts)"),
        },
        other => other,
    }
}

/// A `Retry-After` given in seconds, capped; HTTP dates are ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// The start of a reply body, as text.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut out: String = text.chars().take(BODY_SNIPPET_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// An error and its sources, without the URL (the caller's error names it).
fn chain(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
