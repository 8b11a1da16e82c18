//! [`LocalEmbedder`]: sentence vectors from a local transformer
//! ([`LocalModel`]) run in-process.

use std::path::Path;
use std::sync::Arc;

use crate::compute::embed::embedder::Embedder;
use crate::compute::transformer::LocalModel;
use crate::error::EmbedError;

/// Embeds with a sentence-transformers model loaded from a local
/// directory (for example all-MiniLM-L6-v2); its attention can also
/// weight the DAG ([`Embedder::transformer`]).
#[derive(Debug, Clone)]
pub struct LocalEmbedder {
    model: Arc<LocalModel>,
}

impl LocalEmbedder {
    /// Loads the model in `dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`).
    pub fn load(dir: &Path) -> Result<LocalEmbedder, EmbedError> {
        Ok(LocalEmbedder {
            model: Arc::new(LocalModel::load(dir)?),
        })
    }
}

impl Embedder for LocalEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.model.embed(texts)
    }

    fn dimension(&self) -> usize {
        self.model.dimension()
    }

    fn identity(&self) -> String {
        self.model.identity().to_owned()
    }

    fn transformer(&self) -> Option<Arc<LocalModel>> {
        Some(Arc::clone(&self.model))
    }
}
