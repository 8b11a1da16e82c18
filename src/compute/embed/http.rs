//! The HTTP embedder: any server speaking the OpenAI embeddings API
//! (`POST {base_url}/embeddings` with `{"model": ..., "input": [...]}`),
//! such as llama.cpp's server, vLLM, TEI, Ollama or a hosted API.
//!
//! [`Embedder::embed`] is synchronous and may be called from many threads at
//! once. Each call splits its texts into batches of
//! [`HttpConfig::batch_size`] and sends them through a [`Transport`]: at
//! most [`HttpConfig::max_concurrency`] requests in flight across all
//! callers together, connection failures, timeouts, 429 and 5xx answers
//! retried with exponential backoff (honouring `Retry-After`). Other
//! answers are checked strictly and every vector is L2-normalised.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::compute::embed::embedder::Embedder;
use crate::compute::transport::{Transport, TransportSettings, snippet};
use crate::compute::vector::normalise;
use crate::error::EmbedError;

/// Text embedded once to learn the dimension when the config has none.
const PROBE_TEXT: &str = "dimension probe";

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
        Ok(())
    }

    /// How the transport sends this embedder's requests.
    fn transport(&self) -> TransportSettings<'_> {
        TransportSettings {
            service: "embedding",
            base_url: &self.base_url,
            path: "embeddings",
            api_key_env: self.api_key_env.as_deref(),
            max_concurrency: self.max_concurrency,
            timeout_secs: self.timeout_secs,
            max_retries: self.max_retries,
            backoff_ms: self.backoff_ms,
        }
    }
}

/// An [`Embedder`] calling an OpenAI-compatible embeddings server (see the
/// module docs). Safe to share between threads.
pub struct HttpEmbedder {
    transport: Transport,
    model: String,
    batch_size: usize,
    dimension: usize,
    identity: String,
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

/// What checking one batch's reply needs.
struct ReplyCheck {
    url: String,
    model: String,
    /// Texts in each batch, by batch number.
    counts: Vec<usize>,
    /// The vector length to insist on (`None` while probing: any
    /// consistent, non-zero length).
    expected: Option<usize>,
}

impl HttpEmbedder {
    /// Checks `config`, reads the API key variable, starts the client and
    /// its runtime, and (when `config.dimension` is `None`) learns the
    /// dimension by embedding one probe text.
    pub fn new(config: HttpConfig) -> Result<HttpEmbedder, EmbedError> {
        config.validate()?;
        let transport = Transport::new(&config.transport())?;
        let mut embedder = HttpEmbedder {
            transport,
            model: config.model.clone(),
            batch_size: config.batch_size,
            dimension: config.dimension.unwrap_or(0),
            identity: String::new(),
        };
        if config.dimension.is_none() {
            let probe = embedder.request(&[PROBE_TEXT], None)?;
            embedder.dimension = probe.first().map_or(0, Vec::len);
            tracing::debug!(
                url = embedder.transport.url(),
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
        let url = self.transport.url().to_owned();
        let mut bodies = Vec::new();
        let mut counts = Vec::new();
        for input in texts.chunks(self.batch_size) {
            let body = serde_json::to_vec(&EmbeddingRequest {
                model: &self.model,
                input,
            })
            .map_err(|e| EmbedError::Request {
                url: url.clone(),
                message: format!("could not encode the request: {e}"),
            })?;
            bodies.push(body);
            counts.push(input.len());
        }
        let check = ReplyCheck {
            url,
            model: self.model.clone(),
            counts,
            expected,
        };
        let batches = self
            .transport
            .post_all(bodies, move |number, bytes| check.parse(number, bytes))?;
        Ok(batches.into_iter().flatten().collect())
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
            .field("transport", &self.transport)
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl ReplyCheck {
    /// Checks batch `number`'s successful reply strictly and returns its
    /// vectors in input order, normalised.
    fn parse(&self, number: usize, bytes: &[u8]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let count = self.counts.get(number).copied().unwrap_or(0);
        let expected = self.expected;
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
            url: self.url.clone(),
            message,
        }
    }
}
