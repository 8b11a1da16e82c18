//! [`EmbedderConfig`]: how a store's embedder is built; recorded in the
//! store so a reopened store embeds queries as its documents were.

use serde::{Deserialize, Serialize};

use crate::compute::embed::embedder::Embedder;
use crate::compute::embed::hashed;
use crate::compute::embed::http;
use crate::compute::embed::local::LocalEmbedder;
use crate::error::EmbedError;

/// How to build a store's embedder; persisted in the store so a reopened
/// store embeds queries the way its documents were embedded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum EmbedderConfig {
    /// The built-in hashed n-gram embedder.
    Hashed {
        /// Vector length.
        dimension: usize,
    },
    /// An OpenAI-compatible `/v1/embeddings` server.
    Http(http::HttpConfig),
    /// A sentence-transformers model run in-process from local files.
    Local {
        /// The model's directory (`config.json`, `tokenizer.json`,
        /// `model.safetensors`).
        model: std::path::PathBuf,
    },
}

impl Default for EmbedderConfig {
    fn default() -> EmbedderConfig {
        EmbedderConfig::Hashed {
            dimension: hashed::DEFAULT_DIMENSION,
        }
    }
}

impl EmbedderConfig {
    /// Builds the embedder this configuration describes.
    pub fn build(&self) -> Result<Box<dyn Embedder>, EmbedError> {
        Ok(match self {
            EmbedderConfig::Hashed { dimension } => {
                Box::new(hashed::HashedEmbedder::new(*dimension)?)
            }
            EmbedderConfig::Http(config) => Box::new(http::HttpEmbedder::new(config.clone())?),
            EmbedderConfig::Local { model } => Box::new(LocalEmbedder::load(model)?),
        })
    }
}
