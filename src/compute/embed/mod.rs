//! Embedders: text → vectors, behind one [`Embedder`] trait.
//!
//! - [`hashed::HashedEmbedder`], the built-in default: deterministic hashed
//!   n-gram features, no model file, no network. It also gives per-token
//!   vectors ([`hashed::HashedEmbedder::token_vectors`]).
//! - [`http::HttpEmbedder`]: any server speaking the OpenAI `/v1/embeddings`
//!   API (llama.cpp server, vLLM, TEI, Ollama, hosted APIs).
//!
//! Which embedder a store was built with is recorded in the store as an
//! [`EmbedderConfig`]; its [`Embedder::identity`] must match on every open,
//! because vectors of different models are not comparable.

pub mod hashed;
pub mod http;

use serde::{Deserialize, Serialize};

pub use crate::error::EmbedError;

/// Turns batches of text into vectors of one fixed dimension.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// One vector per text, in order, each [`Embedder::dimension`] long and
    /// L2-normalised (a text with no features gives the zero vector).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Length of every vector.
    fn dimension(&self) -> usize;

    /// A stable name of the model and its settings, stored with the index:
    /// two embedders with the same identity give comparable vectors.
    fn identity(&self) -> String;
}

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
        })
    }
}

/// `v` scaled to unit length (left as is when it is all zeros).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product: the cosine similarity of two unit vectors.
///
/// Sums into 16 independent lanes so the compiler can keep them in SIMD
/// registers; a single running sum is one long dependency chain, which made
/// this the bottleneck of every graph insert and search.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = (a_chunks.remainder().iter())
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut lanes = [0f32; LANES];
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum_at_every_length() {
        for len in [0, 1, 15, 16, 17, 100, 256, 385] {
            let a: Vec<f32> = (0..len)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let b: Vec<f32> = (0..len)
                .map(|i| ((i * 5 % 13) as f32 - 6.0) / 4.0)
                .collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            let got = f64::from(dot(&a, &b));
            assert!(
                (got - plain).abs() <= 1e-4 * plain.abs().max(1.0),
                "{len}: {got} vs {plain}"
            );
        }
    }
}
