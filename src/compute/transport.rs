//! The HTTP transport under edudb's OpenAI-compatible clients: the
//! embedder ([`crate::compute::embed::http`]) and the chat model
//! ([`crate::compute::chat::http`]).
//!
//! A [`Transport`] posts JSON bodies to one endpoint
//! (`{base_url}/{path}`) from a tokio runtime it owns, so callers may be
//! plain threads or tasks of another runtime. At most
//! [`TransportSettings::max_concurrency`] requests are in flight over all
//! callers together. Connection failures, timeouts, 429 and 5xx answers are
//! retried with exponential backoff (honouring `Retry-After`); other
//! answers go to the caller's parser, whose verdict is final.

use std::fmt;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::error::{ChatError, EmbedError};

/// Longest exponential backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest `Retry-After` wait honoured; longer requests are cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Characters of a reply body quoted in errors.
const BODY_SNIPPET_CHARS: usize = 200;
/// Upper bound on [`TransportSettings::max_concurrency`].
pub const MAX_CONCURRENCY: usize = 1024;
/// Upper bound on [`TransportSettings::timeout_secs`] (one day).
pub const MAX_TIMEOUT_SECS: u64 = 86_400;
/// Most runtime worker threads (they only move bytes and parse JSON).
const MAX_WORKER_THREADS: usize = 4;

/// Where and how a [`Transport`] sends.
#[derive(Debug, Clone, Copy)]
pub struct TransportSettings<'a> {
    /// What the server does (`"embedding"`, `"chat"`): names it in messages.
    pub service: &'static str,
    /// Base URL of the API, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: &'a str,
    /// The endpoint under the base URL, e.g. `embeddings`.
    pub path: &'static str,
    /// Name of the environment variable holding the bearer API key.
    pub api_key_env: Option<&'a str>,
    /// Requests in flight at once, over all callers.
    pub max_concurrency: usize,
    /// Time limit of one request (connecting, sending and reading), seconds.
    pub timeout_secs: u64,
    /// Retries after a failed attempt before giving up.
    pub max_retries: u32,
    /// First backoff between attempts, in milliseconds; it doubles on every
    /// retry up to 30 s.
    pub backoff_ms: u64,
}

/// Why a request failed before its reply could be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The server could not be reached or did not answer in time.
    #[error("request to {url} failed: {message}")]
    Request {
        /// The endpoint called.
        url: String,
        /// What the HTTP client reported.
        message: String,
    },
    /// The server answered with an error status (after any retries).
    #[error("{url} answered {status}: {body}")]
    Status {
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the reply body.
        body: String,
    },
    /// The settings are unusable.
    #[error("{0}")]
    Config(String),
}

impl From<TransportError> for EmbedError {
    fn from(error: TransportError) -> EmbedError {
        match error {
            TransportError::Request { url, message } => EmbedError::Request { url, message },
            TransportError::Status { url, status, body } => {
                EmbedError::Status { url, status, body }
            }
            TransportError::Config(message) => EmbedError::Config(message),
        }
    }
}

impl From<TransportError> for ChatError {
    fn from(error: TransportError) -> ChatError {
        match error {
            TransportError::Request { url, message } => ChatError::Request { url, message },
            TransportError::Status { url, status, body } => ChatError::Status { url, status, body },
            TransportError::Config(message) => ChatError::Config(message),
        }
    }
}

/// Posts JSON to one endpoint with bounded concurrency and retries (see
/// the module docs). Safe to share between threads.
pub struct Transport {
    /// What the request tasks need.
    shared: Arc<Shared>,
    /// Where requests are spawned.
    handle: Handle,
    /// Owns the worker threads; taken and shut down without blocking on
    /// drop (a plain drop would panic inside another async runtime).
    runtime: Option<Runtime>,
}

/// The part of the transport the request tasks hold.
struct Shared {
    client: reqwest::Client,
    url: reqwest::Url,
    authorization: Option<HeaderValue>,
    /// Limits requests in flight over all callers.
    permits: Semaphore,
    timeout_secs: u64,
    max_retries: u32,
    backoff: Duration,
    service: &'static str,
}

/// One failed attempt, and whether another may succeed.
struct Failure {
    error: TransportError,
    retry: bool,
    /// The server's `Retry-After`, if it sent one.
    retry_after: Option<Duration>,
}

impl Transport {
    /// Checks the settings, reads the API key variable and starts the
    /// client and its runtime. Sends nothing.
    pub fn new(settings: &TransportSettings<'_>) -> Result<Transport, TransportError> {
        let service = settings.service;
        let fail = |message: String| Err(TransportError::Config(message));
        if !(1..=MAX_CONCURRENCY).contains(&settings.max_concurrency) {
            return fail(format!(
                "the {service} client's max_concurrency must be between 1 and {MAX_CONCURRENCY}, not {}",
                settings.max_concurrency
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&settings.timeout_secs) {
            return fail(format!(
                "the {service} client's timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, not {}",
                settings.timeout_secs
            ));
        }
        let url = endpoint(settings)?;
        let authorization = authorization(service, settings.api_key_env)?;
        // reqwest is built without a bundled crypto provider; an error here
        // only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_secs(settings.timeout_secs);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| {
                TransportError::Config(format!(
                    "could not build the HTTP client for {url}: {}",
                    chain(e)
                ))
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(settings.max_concurrency.min(MAX_WORKER_THREADS))
            .thread_name(format!("edudb-{service}"))
            .enable_all()
            .build()
            .map_err(|e| {
                TransportError::Config(format!(
                    "could not start the {service} client's runtime: {e}"
                ))
            })?;
        let shared = Shared {
            client,
            url,
            authorization,
            permits: Semaphore::new(settings.max_concurrency),
            timeout_secs: settings.timeout_secs,
            max_retries: settings.max_retries,
            backoff: Duration::from_millis(settings.backoff_ms),
            service,
        };
        Ok(Transport {
            shared: Arc::new(shared),
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &str {
        self.shared.url.as_str()
    }

    /// Posts every body (as many at once as the permits allow), each with
    /// retries, and parses each successful reply with `parse(index, bytes)`;
    /// the answers come back in input order. A parse failure is final (not
    /// retried); the first failure abandons the other bodies.
    pub fn post_all<T, E, P>(&self, bodies: Vec<Vec<u8>>, parse: P) -> Result<Vec<T>, E>
    where
        T: Send + 'static,
        E: From<TransportError> + Send + 'static,
        P: Fn(usize, &[u8]) -> Result<T, E> + Send + Sync + 'static,
    {
        let shared = Arc::clone(&self.shared);
        // The work runs on the transport's runtime and the answer comes back
        // over a channel, so callers may be plain threads or even tasks of
        // another runtime (where `block_on` would panic).
        let (sender, receiver) = mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let result = post_bodies(shared, bodies, Arc::new(parse)).await;
            // The caller waits on `receiver` until this arrives.
            let _ = sender.send(result);
        });
        receiver.recv().unwrap_or_else(|_| {
            Err(E::from(TransportError::Request {
                url: self.url().to_owned(),
                message: format!("the {} task stopped without an answer", self.shared.service),
            }))
        })
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("url", &self.shared.url.as_str())
            .field("authorization", &self.shared.authorization.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Sends every body and joins the parsed answers in input order.
async fn post_bodies<T, E, P>(
    shared: Arc<Shared>,
    bodies: Vec<Vec<u8>>,
    parse: Arc<P>,
) -> Result<Vec<T>, E>
where
    T: Send + 'static,
    E: From<TransportError> + Send + 'static,
    P: Fn(usize, &[u8]) -> Result<T, E> + Send + Sync + 'static,
{
    let mut slots: Vec<Option<T>> = (0..bodies.len()).map(|_| None).collect();
    let mut tasks = JoinSet::new();
    for (number, body) in bodies.into_iter().enumerate() {
        let (shared, parse) = (Arc::clone(&shared), Arc::clone(&parse));
        tasks.spawn(async move {
            let answer = match shared.send(body).await {
                Ok(bytes) => parse(number, &bytes),
                Err(error) => Err(E::from(error)),
            };
            (number, answer)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let (number, answer) = joined.map_err(|e| {
            E::from(TransportError::Request {
                url: shared.url.to_string(),
                message: format!("a {} task failed: {e}", shared.service),
            })
        })?;
        if let Some(slot) = slots.get_mut(number) {
            *slot = Some(answer?);
        }
    }
    slots
        .into_iter()
        .collect::<Option<Vec<T>>>()
        .ok_or_else(|| {
            E::from(TransportError::Request {
                url: shared.url.to_string(),
                message: "a request got no answer".into(),
            })
        })
}

impl Shared {
    /// One body with retries: the bytes of a successful reply.
    async fn send(&self, body: Vec<u8>) -> Result<Vec<u8>, TransportError> {
        let mut retries = 0;
        loop {
            let outcome = {
                let _permit =
                    self.permits
                        .acquire()
                        .await
                        .map_err(|e| TransportError::Request {
                            url: self.url.to_string(),
                            message: format!("the request limiter closed: {e}"),
                        })?;
                self.attempt(body.clone()).await
            };
            let failure = match outcome {
                Ok(bytes) => return Ok(bytes),
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
                "{} request failed, retrying: {}",
                self.service,
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

    /// One request: the reply's bytes when its status is a success.
    async fn attempt(&self, body: Vec<u8>) -> Result<Vec<u8>, Failure> {
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
                error: TransportError::Status {
                    url: self.url.to_string(),
                    status: status.as_u16(),
                    body: snippet(&bytes),
                },
                retry: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
                retry_after,
            });
        }
        Ok(bytes.to_vec())
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
            error: TransportError::Request {
                url: self.url.to_string(),
                message,
            },
            retry,
            retry_after: None,
        }
    }
}

/// `{base_url}/{path}`, checked to be an http(s) URL with a host.
fn endpoint(settings: &TransportSettings<'_>) -> Result<reqwest::Url, TransportError> {
    let service = settings.service;
    let base = settings.base_url.trim().trim_end_matches('/');
    let endpoint = format!("{base}/{}", settings.path);
    let url = reqwest::Url::parse(&endpoint).map_err(|e| {
        TransportError::Config(format!(
            "{service} base URL {:?} is not a valid URL: {e}",
            settings.base_url
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(TransportError::Config(format!(
            "{service} base URL {:?} must be an http:// or https:// URL with a host",
            settings.base_url
        )));
    }
    Ok(url)
}

/// The `Authorization` header value from the key variable, if any.
fn authorization(
    service: &str,
    api_key_env: Option<&str>,
) -> Result<Option<HeaderValue>, TransportError> {
    let Some(name) = api_key_env else {
        return Ok(None);
    };
    let key = std::env::var(name).map_err(|e| {
        let why = match e {
            std::env::VarError::NotPresent => "is not set",
            std::env::VarError::NotUnicode(_) => "is not valid Unicode",
        };
        TransportError::Config(format!("the {service} API key variable {name} {why}"))
    })?;
    if key.trim().is_empty() {
        return Err(TransportError::Config(format!(
            "the {service} API key variable {name} is empty"
        )));
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
        TransportError::Config(format!(
            "the {service} API key in {name} contains characters not allowed in an HTTP header"
        ))
    })?;
    value.set_sensitive(true);
    Ok(Some(value))
}

/// `error` noting how many attempts were made, where it has room for that.
fn with_attempts(error: TransportError, attempts: u32) -> TransportError {
    match error {
        TransportError::Request { url, message } if attempts > 1 => TransportError::Request {
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
pub fn snippet(bytes: &[u8]) -> String {
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
