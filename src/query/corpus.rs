//! [`Corpus`]: what a query runs over, one store or the stores of a shard
//! set, and the reads the binder and the executor make of it. Over several
//! stores the reads fan out and merge as over one: BM25 rankings scored
//! with statistics summed over every store ([`FullTextSet`]), vector
//! searches merged by similarity, each document read from the store that
//! holds it. So every stage after the seed sees the same documents and
//! scores whichever way the documents are spread, and a statement returns
//! the same spans from a shard set as from one store holding them all.

use std::collections::BTreeSet;
use std::sync::Arc;

use rayon::prelude::*;

use super::catalog::Catalog;
use crate::compute::chat::ChatModel;
use crate::compute::device::Device;
use crate::engine::Engine;
use crate::engine::cache::CachedDocument;
use crate::error::{Error, Result};
use crate::memory::session as sessions;
use crate::model::dialogue::TimedTurns;
use crate::model::document::DocMeta;
use crate::model::metadata::MetaTest;
use crate::model::rank::{RankedHit, Target};
use crate::storage::fulltext::FullTextSet;

/// Which of a shard set's stores holds (or would hold) a document id.
pub type ShardOf<'a> = &'a (dyn Fn(&str) -> usize + Sync);

/// One store, or the stores of a shard set with the rule that places each
/// document id in one of them.
pub struct Corpus<'a> {
    engines: Vec<&'a Engine>,
    placement: Option<ShardOf<'a>>,
}

impl<'a> Corpus<'a> {
    /// One store.
    pub(crate) fn one(engine: &'a Engine) -> Corpus<'a> {
        Corpus {
            engines: vec![engine],
            placement: None,
        }
    }

    /// The stores of a shard set, `placement` naming the one that holds
    /// each document (an index into `engines`, which is not empty).
    pub(crate) fn sharded(engines: Vec<&'a Engine>, placement: ShardOf<'a>) -> Corpus<'a> {
        Corpus {
            engines,
            placement: Some(placement),
        }
    }

    /// The store that holds document `id`.
    pub(crate) fn holder(&self, id: &str) -> &'a Engine {
        let at = self.placement.map_or(0, |place| place(id));
        self.engines[at.min(self.engines.len() - 1)]
    }

    /// The only store, when there is one; what a statement that reads one
    /// store's own state (its sessions, its counts) runs on.
    pub(crate) fn single(&self) -> Option<&'a Engine> {
        match self.engines.as_slice() {
            [engine] => Some(engine),
            _ => None,
        }
    }

    /// Every store's full-text index, ranked as one.
    pub(crate) fn fulltext(&self) -> FullTextSet {
        FullTextSet::new(
            (self.engines.iter())
                .map(|e| e.fulltext_reader().clone())
                .collect(),
        )
    }

    /// `text` embedded as a query (every store of a set has one embedder).
    pub(crate) fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.engines[0].embed_query(text)
    }

    /// The chat model the stores were opened with (every store of a set is
    /// opened with the same options).
    pub(crate) fn chat(&self) -> Option<&'a dyn ChatModel> {
        self.engines[0].chat()
    }

    /// Where propagation runs.
    pub(crate) fn device(&self) -> &'a Device {
        self.engines[0].device()
    }

    /// The `k` nodes or EDUs nearest `query` within `scope` when given,
    /// best first: each store searched for its own documents of the scope,
    /// the hits merged (ties in document-id order).
    pub(crate) fn vector_search(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&[&str]>,
    ) -> Result<Vec<RankedHit>> {
        if let Some(engine) = self.single() {
            return engine.vector_search(target, query, k, scope);
        }
        let each: Vec<Vec<RankedHit>> = (0..self.engines.len())
            .into_par_iter()
            .map(|at| {
                let own: Option<Vec<&str>> = scope.map(|ids| {
                    ids.iter()
                        .copied()
                        .filter(|id| self.place(id) == at)
                        .collect()
                });
                match &own {
                    Some(ids) if ids.is_empty() => Ok(Vec::new()),
                    _ => self.engines[at].vector_search(target, query, k, own.as_deref()),
                }
            })
            .collect::<Result<_>>()?;
        let mut hits: Vec<RankedHit> = each.into_iter().flatten().collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| (&a.doc, a.node, a.span.first).cmp(&(&b.doc, b.node, b.span.first)))
        });
        hits.truncate(k);
        Ok(hits)
    }

    /// Document `id`, decoded, from the store that holds it.
    pub(crate) fn cached_document(&self, id: &str) -> Result<Arc<CachedDocument>> {
        self.holder(id).cached_document(id)
    }

    /// Every document's metadata (session turns not listed), by id.
    pub(crate) fn documents(&self) -> Result<Vec<DocMeta>> {
        if let Some(engine) = self.single() {
            return engine.documents();
        }
        let mut metas = Vec::new();
        for engine in &self.engines {
            metas.extend(engine.documents()?);
        }
        metas.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(metas)
    }

    /// The one store a statement reading a store's own state runs on, or
    /// a clear refusal naming `what` for a shard set.
    pub(crate) fn only_store(&self, what: &str) -> Result<&'a Engine> {
        self.single().ok_or_else(|| {
            Error::Usage(format!(
                "{what} reads one store: a shard set of {} stores has none of its own (ask each shard's store)",
                self.engines.len()
            ))
        })
    }

    fn place(&self, id: &str) -> usize {
        self.placement.map_or(0, |place| place(id))
    }
}

/// The binder's questions, answered over every store.
impl Catalog for Corpus<'_> {
    fn document_ids(&self) -> Result<Vec<String>> {
        Ok(self.documents()?.into_iter().map(|m| m.id).collect())
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

    fn session_ids(&self) -> Result<Vec<String>> {
        let mut ids = BTreeSet::new();
        for engine in &self.engines {
            ids.extend(sessions::sessions(engine)?.into_iter().map(|s| s.id));
        }
        Ok(ids.into_iter().collect())
    }

    fn session_turns(&self, id: &str) -> Result<Option<TimedTurns>> {
        for engine in &self.engines {
            if let Some(turns) = sessions::session_turns(engine, id)? {
                return Ok(Some(turns));
            }
        }
        Ok(None)
    }

    fn documents_matching(&self, key: &str, test: &MetaTest) -> Result<BTreeSet<String>> {
        let mut ids = BTreeSet::new();
        for engine in &self.engines {
            ids.extend(engine.documents_matching(key, test)?);
        }
        Ok(ids)
    }

    fn vector_dimension(&self) -> usize {
        self.engines[0].embedder().dimension()
    }
}
