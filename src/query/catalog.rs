//! What the binder asks of the store ([`Catalog`]): ids, sessions' turns
//! and document sizes, answered by a [`super::corpus::Corpus`] (one store
//! or a shard set's). It lives in the query layer because sessions are
//! read through `memory`, which stands above the engine.

use std::collections::BTreeSet;

use crate::error::Result;
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
