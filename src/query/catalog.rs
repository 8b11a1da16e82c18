//! What the binder asks of the store ([`Catalog`]), answered by the
//! engine: ids, sessions' turns and document sizes. It lives in the query
//! layer because sessions are read through `memory`, which stands above
//! the engine.

use std::collections::BTreeSet;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::session as sessions;
use crate::model::dialogue::TimedTurns;
use crate::model::metadata::MetaTest;

/// What the binder needs to know about the store.
pub trait Catalog {
    /// Every document id, sorted (session turns are not listed).
    fn document_ids(&self) -> Result<Vec<String>>;
    /// Number of nodes and EDUs of a document, `None` when it does not exist.
    fn document_size(&self, id: &str) -> Result<Option<(u32, u32)>>;
    /// Every session id, sorted.
    fn session_ids(&self) -> Result<Vec<String>>;
    /// A session's turn document ids in turn order, each with its time
    /// (seconds since the Unix epoch) when it has one; `None` when the
    /// session does not exist.
    fn session_turns(&self, id: &str) -> Result<Option<TimedTurns>>;
    /// The documents (session turns included) whose metadata key `key`
    /// passes `test`.
    fn documents_matching(&self, key: &str, test: &MetaTest) -> Result<BTreeSet<String>>;
    /// The length of the store's vectors (its embedder's dimension).
    fn vector_dimension(&self) -> usize;
}

impl Catalog for Engine {
    fn document_ids(&self) -> Result<Vec<String>> {
        Ok(self.documents()?.into_iter().map(|m| m.id).collect())
    }

    fn session_ids(&self) -> Result<Vec<String>> {
        Ok(sessions::sessions(self)?
            .into_iter()
            .map(|s| s.id)
            .collect())
    }

    fn session_turns(&self, id: &str) -> Result<Option<crate::model::dialogue::TimedTurns>> {
        sessions::session_turns(self, id)
    }

    fn documents_matching(
        &self,
        key: &str,
        test: &crate::model::metadata::MetaTest,
    ) -> Result<std::collections::BTreeSet<String>> {
        Engine::documents_matching(self, key, test)
    }

    fn vector_dimension(&self) -> usize {
        self.embedder().dimension()
    }

    fn document_size(&self, id: &str) -> Result<Option<(u32, u32)>> {
        // Through the cache: the executor reads the same document next.
        match self.cached_document(id) {
            Ok(loaded) => {
                let meta = &loaded.document.meta;
                Ok(Some((meta.nodes, meta.edus)))
            }
            Err(Error::NoSuchDocument(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }
}
