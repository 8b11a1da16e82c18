//! [`EmbedderConfig`]: how a store's embedder is built; recorded in the
//! store so a reopened store embeds queries as its documents were.

use serde::{Deserialize, Serialize};

use crate::compute::embed::absent::AbsentEmbedder;
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
    /// An embedder the application supplies itself each time it opens the
    /// store (`OpenOptions::custom_embedder`): only its identity and
    /// dimension are recorded, so it cannot be built from this record.
    Custom {
        /// The embedder's [`Embedder::identity`].
        identity: String,
        /// Its vector length.
        dimension: usize,
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
    /// Whether its vectors carry meaning beyond the words: every embedder
    /// but the built-in hashed one, whose n-gram vectors match the words
    /// BM25 already scores (measured: adding them to a session context's
    /// relevance lowers its recall; docs/benchmarks.md).
    pub fn is_semantic(&self) -> bool {
        !matches!(self, EmbedderConfig::Hashed { .. })
    }

    /// The record of an embedder the application supplies itself.
    pub fn custom(embedder: &dyn Embedder) -> EmbedderConfig {
        EmbedderConfig::Custom {
            identity: embedder.identity(),
            dimension: embedder.dimension(),
        }
    }

    /// Builds the embedder this configuration describes (for a
    /// [`EmbedderConfig::Custom`] one, which only the application can
    /// supply, a stand-in whose every embedding fails saying so).
    pub fn build(&self) -> Result<Box<dyn Embedder>, EmbedError> {
        Ok(match self {
            EmbedderConfig::Hashed { dimension } => {
                Box::new(hashed::HashedEmbedder::new(*dimension)?)
            }
            EmbedderConfig::Http(config) => Box::new(http::HttpEmbedder::new(config.clone())?),
            EmbedderConfig::Local { model } => Box::new(LocalEmbedder::load(model)?),
            EmbedderConfig::Custom {
                identity,
                dimension,
            } => Box::new(AbsentEmbedder::new(identity, *dimension)),
        })
    }
}
