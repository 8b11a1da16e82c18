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

impl ChatRequest {
    /// A greedy request (temperature 0) whose reply must be an object
    /// holding exactly `properties` ([`strict_object`]).
    pub fn for_object(
        system: &str,
        user: String,
        schema_name: &'static str,
        properties: serde_json::Value,
        max_tokens: u32,
    ) -> ChatRequest {
        ChatRequest {
            system: system.into(),
            user,
            schema_name,
            schema: strict_object(properties),
            max_tokens,
            temperature: 0.0,
        }
    }
}

/// The JSON schema of an object holding exactly `properties` (an object of
/// property names and their schemas), every one required and no other
/// allowed: the strict form servers' structured outputs accept.
pub fn strict_object(properties: serde_json::Value) -> serde_json::Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|fields| fields.keys().cloned().collect())
        .unwrap_or_default();
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strict_object_requires_every_property_and_allows_no_other() {
        let schema = strict_object(serde_json::json!({
            "enough": {"type": "boolean"},
            "relevant": {"type": "array", "items": {"type": "integer"}}
        }));
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(
            schema["required"],
            serde_json::json!(["enough", "relevant"])
        );
        assert_eq!(schema["properties"]["enough"]["type"], "boolean");
        let request = ChatRequest::for_object(
            "system",
            "user".into(),
            "judgement",
            schema["properties"].clone(),
            9,
        );
        assert_eq!(request.schema, schema);
        assert_eq!(
            (request.schema_name, request.max_tokens, request.temperature),
            ("judgement", 9, 0.0)
        );
        assert_eq!(
            (request.system.as_str(), request.user.as_str()),
            ("system", "user")
        );
    }
}
