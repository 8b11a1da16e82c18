//! Chat models: the language-model steps' one seam, the [`ChatModel`]
//! trait, and [`http::HttpChat`], any server speaking the OpenAI
//! `/v1/chat/completions` API (llama.cpp's server, vLLM, Ollama, hosted
//! APIs) through the same transport as the HTTP embedder.

mod chat_model;
mod checked;
pub mod http;

pub use crate::error::ChatError;
pub use chat_model::{ChatModel, ChatReply, ChatRequest, strict_object};
pub use checked::{RETRY_TEMPERATURE, ask_checked, ask_one, clip, parse_reply};
