//! The [`Embedder`] trait: text in, unit vectors of one dimension out.

use std::sync::Arc;

use crate::compute::transformer::LocalModel;
use crate::error::EmbedError;

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

    /// The in-process transformer behind these vectors, if any: its
    /// attention then weights the DAG's edges too.
    fn transformer(&self) -> Option<Arc<LocalModel>> {
        None
    }
}
