//! The HTTP chat model: any server speaking the OpenAI chat completions API
//! (`POST {base_url}/chat/completions`), such as llama.cpp's server, vLLM,
//! Ollama or a hosted API. Requests carry their schema as
//! `response_format: {type: "json_schema", ...}`, which those servers use
//! to constrain decoding; every request of a [`ChatModel::chat`] call is
//! sent through the shared [`Transport`] (bounded concurrency, retries with
//! backoff on connection failures, timeouts, 429 and 5xx).

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::compute::chat::chat_model::{ChatModel, ChatReply, ChatRequest};
use crate::compute::transport::{Transport, TransportSettings, snippet};
use crate::error::ChatError;
use crate::model::cost::LlmCost;

/// Settings of an [`HttpChat`]. The API key itself is never kept, only the
/// name of the environment variable holding it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatConfig {
    /// Base URL of the API, e.g. `http://127.0.0.1:8080/v1`; requests go to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Name of the environment variable holding the bearer API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Requests in flight at once, over all callers.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    /// Time limit of one request, seconds (a completion is slow).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Retries after a failed attempt before giving up.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First backoff between attempts, in milliseconds; it doubles on
    /// every retry up to 30 s.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
}

fn default_max_concurrency() -> usize {
    2
}

fn default_timeout_secs() -> u64 {
    300
}

fn default_max_retries() -> u32 {
    3
}

fn default_backoff_ms() -> u64 {
    500
}

impl ChatConfig {
    /// A configuration for `model` at `base_url` with the defaults: two
    /// requests in flight, 300 s timeout, 3 retries from 500 ms backoff, no
    /// API key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> ChatConfig {
        ChatConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            max_concurrency: default_max_concurrency(),
            timeout_secs: default_timeout_secs(),
            max_retries: default_max_retries(),
            backoff_ms: default_backoff_ms(),
        }
    }

    /// How the transport sends this model's requests.
    fn transport(&self) -> TransportSettings<'_> {
        TransportSettings {
            service: "chat",
            base_url: &self.base_url,
            path: "chat/completions",
            api_key_env: self.api_key_env.as_deref(),
            max_concurrency: self.max_concurrency,
            timeout_secs: self.timeout_secs,
            max_retries: self.max_retries,
            backoff_ms: self.backoff_ms,
        }
    }
}

/// A [`ChatModel`] calling an OpenAI-compatible chat server (see the module
/// docs). Safe to share between threads.
pub struct HttpChat {
    transport: Transport,
    model: String,
}

/// The request body of one completion.
#[derive(Serialize)]
struct CompletionRequest<'a> {
    model: &'a str,
    messages: [Message<'a>; 2],
    max_tokens: u32,
    temperature: f32,
    response_format: ResponseFormat<'a>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    json_schema: JsonSchema<'a>,
}

#[derive(Serialize)]
struct JsonSchema<'a> {
    name: &'a str,
    strict: bool,
    schema: &'a serde_json::Value,
}

/// The parts of a completion reply that are used.
#[derive(Deserialize)]
struct CompletionReply {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ReplyMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl HttpChat {
    /// Checks `config`, reads the API key variable and starts the client.
    /// Sends nothing.
    pub fn new(config: &ChatConfig) -> Result<HttpChat, ChatError> {
        if config.model.trim().is_empty() {
            return Err(ChatError::Config(
                "the chat model needs a model name".into(),
            ));
        }
        Ok(HttpChat {
            transport: Transport::new(&config.transport())?,
            model: config.model.clone(),
        })
    }
}

impl ChatModel for HttpChat {
    fn chat(&self, requests: &[ChatRequest]) -> Result<(Vec<ChatReply>, LlmCost), ChatError> {
        let url = self.transport.url().to_owned();
        let bodies = requests
            .iter()
            .map(|request| {
                serde_json::to_vec(&CompletionRequest {
                    model: &self.model,
                    messages: [
                        Message {
                            role: "system",
                            content: &request.system,
                        },
                        Message {
                            role: "user",
                            content: &request.user,
                        },
                    ],
                    max_tokens: request.max_tokens,
                    temperature: request.temperature,
                    response_format: ResponseFormat {
                        kind: "json_schema",
                        json_schema: JsonSchema {
                            name: request.schema_name,
                            strict: true,
                            schema: &request.schema,
                        },
                    },
                })
                .map_err(|e| ChatError::Request {
                    url: url.clone(),
                    message: format!("could not encode the request: {e}"),
                })
            })
            .collect::<Result<Vec<_>, ChatError>>()?;
        let started = Instant::now();
        let replies = self
            .transport
            .post_all(bodies, move |_, bytes| parse(&url, bytes))?;
        let cost = LlmCost {
            calls: replies.len() as u32,
            prompt_tokens: (replies.iter().map(|r| r.prompt_tokens)).fold(0, u64::saturating_add),
            completion_tokens: (replies.iter().map(|r| r.completion_tokens))
                .fold(0, u64::saturating_add),
            millis: started.elapsed().as_millis() as u64,
            ..LlmCost::default()
        };
        Ok((replies, cost))
    }

    fn identity(&self) -> String {
        format!("openai-chat:{}@{}", self.model, self.transport.url())
    }
}

impl fmt::Debug for HttpChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpChat")
            .field("transport", &self.transport)
            .field("model", &self.model)
            .finish()
    }
}

/// The first choice of a successful completion reply.
fn parse(url: &str, bytes: &[u8]) -> Result<ChatReply, ChatError> {
    let malformed = |message: String| ChatError::Malformed {
        url: url.to_owned(),
        message,
    };
    let reply: CompletionReply = serde_json::from_slice(bytes).map_err(|e| {
        malformed(format!(
            "not a chat completion ({e}); it starts: {}",
            snippet(bytes)
        ))
    })?;
    let usage = reply.usage.unwrap_or(Usage {
        prompt_tokens: 0,
        completion_tokens: 0,
    });
    // A completion without content (no choice, or a refusal) is an empty
    // reply: the caller's check refuses it and asks again.
    let choice = reply.choices.into_iter().next();
    let truncated = choice
        .as_ref()
        .is_some_and(|c| c.finish_reason.as_deref() == Some("length"));
    let content = choice.and_then(|c| c.message.content).unwrap_or_default();
    Ok(ChatReply {
        content,
        truncated,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
    })
}
