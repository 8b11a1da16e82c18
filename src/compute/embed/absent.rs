//! [`AbsentEmbedder`]: stands in for an application's own embedder when a
//! store built with one is opened without it.

use crate::compute::embed::embedder::Embedder;
use crate::error::EmbedError;

/// The recorded identity and dimension of an application's own embedder
/// ([`crate::compute::embed::EmbedderConfig::Custom`]) that was not
/// supplied: everything that needs no new vector (browsing, BM25 search,
/// reading stored vectors) works, and embedding fails saying what to supply.
#[derive(Debug, Clone)]
pub struct AbsentEmbedder {
    identity: String,
    dimension: usize,
}

impl AbsentEmbedder {
    /// The stand-in for the embedder recorded as `identity` of `dimension`.
    pub fn new(identity: &str, dimension: usize) -> AbsentEmbedder {
        AbsentEmbedder {
            identity: identity.to_owned(),
            dimension,
        }
    }
}

impl Embedder for AbsentEmbedder {
    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Config(format!(
            "this store's vectors come from the application's own embedder {}, which only \
             the application can supply (OpenOptions::custom_embedder)",
            self.identity
        )))
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn identity(&self) -> String {
        self.identity.clone()
    }
}
