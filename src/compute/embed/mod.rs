//! Embedders: text → vectors, behind one [`Embedder`] trait.
//!
//! - [`hashed::HashedEmbedder`], the built-in default: deterministic hashed
//!   n-gram features, no model file, no network. It also gives per-token
//!   vectors ([`hashed::HashedEmbedder::token_vectors`]).
//! - [`http::HttpEmbedder`]: any server speaking the OpenAI `/v1/embeddings`
//!   API (llama.cpp server, vLLM, TEI, Ollama, hosted APIs).
//! - [`local::LocalEmbedder`]: a sentence-transformers model run
//!   in-process ([`crate::compute::transformer`]).
//! - an application's own [`Embedder`], supplied on every open; a store
//!   opened without it gets an [`absent::AbsentEmbedder`] in its place.
//!
//! Which embedder a store was built with is recorded in the store as an
//! [`EmbedderConfig`]; its [`Embedder::identity`] must match on every open,
//! because vectors of different models are not comparable.

pub mod absent;
mod config;
mod embedder;
pub mod hashed;
pub mod http;
pub mod local;

pub use crate::compute::vector::{dot, normalise};
pub use crate::error::EmbedError;
pub use config::EmbedderConfig;
pub use embedder::Embedder;
