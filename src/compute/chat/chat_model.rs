//! The [`ChatModel`] trait and what passes through it.

use std::fmt;

use crate::error::ChatError;
use crate::model::cost::LlmCost;

/// One chat completion to make: a system and a user message, and the JSON
/// schema the reply must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The system message.
    pub system: String,
    /// The user message.
    pub user: String,
    /// Name of the reply's schema (letters, digits, `_` and `-`).
    pub schema_name: &'static str,
    /// The JSON schema the reply's content must follow; servers that
    /// support `response_format` constrain decoding to it, and the caller
    /// validates the reply against its own rules whatever the server did.
    pub schema: serde_json::Value,
    /// Most tokens the reply may hold.
    pub max_tokens: u32,
    /// Sampling temperature (0: greedy).
    pub temperature: f32,
}

/// A chat model's answer to one [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatReply {
    /// The reply's content (JSON text when the request had a schema;
    /// empty when the server gave none, e.g. a refusal).
    pub content: String,
    /// Whether the reply was cut at `max_tokens`.
    pub truncated: bool,
    /// Prompt tokens the server counted.
    pub prompt_tokens: u64,
    /// Completion tokens the server counted.
    pub completion_tokens: u64,
}

/// A chat model: answers many requests at once (as concurrently as it
/// allows). Implementations must be safe to share between threads.
pub trait ChatModel: Send + Sync + fmt::Debug {
    /// Answers every request, in order, with what the answers cost (calls,
    /// tokens, time; no fallbacks). Fails only when the model could not be
    /// asked (after its retries); the content is the caller's to check.
    fn chat(&self, requests: &[ChatRequest]) -> Result<(Vec<ChatReply>, LlmCost), ChatError>;

    /// Names the model, e.g. `openai-chat:MODEL@URL`.
    fn identity(&self) -> String;
}
