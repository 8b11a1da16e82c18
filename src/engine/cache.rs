//! What reads derive from a stored document, kept between reads: the
//! documents that queries read, deserialised with their token prefix sums
//! and DAGs ([`DocumentCache`]), so a service asking many questions of the
//! same store validates and decodes each document once, not once per
//! query; documents' centroids ([`CentroidCache`]), which placing a
//! session's next turn compares with every turn of its topic; and
//! sessions' dialogues ([`SessionCache`]), decoded and checked once, not
//! on every append or context.
//!
//! Each [`Cache`] is bounded by an estimate of the bytes its entries
//! occupy, least recently used first out. Writers invalidate a document
//! after committing it (or [`Cache::replace`] it with what they
//! committed); a read that raced with a write is returned but not cached
//! (see [`Cache::get_or_load`]), so a cache never serves a version older
//! than the store's.

use std::sync::{Arc, Mutex, MutexGuard};

use lru::LruCache;

use crate::error::Result;
use crate::model::dag::{Dag, DagNode};
use crate::model::dialogue::{Branch, Dialogue, SummaryPick, Topic, Turn};
use crate::model::document::Document;
use crate::model::edu::Edu;
use crate::model::tokens::TokenPrefix;
use crate::model::tree::Node;

/// Default bound on cached document bytes.
pub const DEFAULT_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// Bound on cached centroid bytes: 16 MiB holds those of about 16,000
/// documents at 256 dimensions.
pub const CENTROID_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// What a cache entry costs.
pub trait Weighed {
    /// Approximate heap bytes held.
    fn bytes(&self) -> usize;
}

/// A bounded, thread-safe cache of decoded documents by id.
pub type DocumentCache = Cache<CachedDocument>;

/// A bounded, thread-safe cache of documents' centroids (the unit mean of
/// their EDU vectors) by id.
pub type CentroidCache = Cache<Vec<f32>>;

/// Bound on cached dialogue bytes: 16 MiB holds about 100 sessions of
/// 1,000 turns.
pub const SESSION_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// A bounded, thread-safe cache of sessions' dialogues (each checked as
/// the store reads it) by session id.
pub type SessionCache = Cache<Dialogue>;

/// A document ready for query execution.
#[derive(Debug)]
pub struct CachedDocument {
    /// The whole document.
    pub document: Document,
    /// Prefix sums of its EDUs' token counts.
    pub tokens: TokenPrefix,
    /// Its weighted DAG (validated against it).
    pub dag: Dag,
}

impl CachedDocument {
    /// Wraps `document` and its DAG, computing its token prefix sums.
    pub fn new(document: Document, dag: Dag) -> CachedDocument {
        let tokens = TokenPrefix::new(document.edus.iter().map(|e| e.tokens));
        CachedDocument {
            document,
            tokens,
            dag,
        }
    }
}

impl Weighed for CachedDocument {
    fn bytes(&self) -> usize {
        let doc = &self.document;
        let nodes: usize = doc
            .tree
            .nodes
            .iter()
            .map(|n| size_of::<Node>() + n.title.len() + n.children.len() * size_of::<u32>())
            .sum();
        let dag = &self.dag;
        let dag_bytes = dag.targets.len() * 8
            + dag.offsets.len() * 4
            + (dag.nodes.iter())
                .map(|n| {
                    size_of::<DagNode>()
                        + n.points.len() * 4
                        + n.text.as_ref().map_or(0, String::len)
                })
                .sum::<usize>();
        doc.text.len() + doc.edus.len() * (size_of::<Edu>() + size_of::<u64>()) + nodes + dag_bytes
    }
}

impl Weighed for Vec<f32> {
    fn bytes(&self) -> usize {
        self.len() * size_of::<f32>()
    }
}

impl Weighed for Dialogue {
    fn bytes(&self) -> usize {
        let picks = |summary: &[SummaryPick]| size_of_val(summary);
        let turns: usize = (self.turns.iter())
            .map(|t| size_of::<Turn>() + t.doc.len())
            .sum();
        let topics: usize = (self.topics.iter())
            .map(|t| {
                size_of::<Topic>()
                    + size_of_val(t.branches.as_slice())
                    + picks(&t.summary)
                    + size_of_val(t.vector_sum.as_slice())
            })
            .sum();
        let branches: usize = (self.branches.iter())
            .map(|b| size_of::<Branch>() + size_of_val(b.turns.as_slice()) + picks(&b.summary))
            .sum();
        self.id.len() + turns + topics + branches
    }
}

/// A bounded, thread-safe cache of values derived from stored documents,
/// by document id.
#[derive(Debug)]
pub struct Cache<V> {
    inner: Mutex<Inner<V>>,
}

#[derive(Debug)]
struct Inner<V> {
    entries: LruCache<String, Arc<V>>,
    bytes: usize,
    capacity: usize,
    /// Bumped by every invalidation; a load that saw it change is not kept.
    generation: u64,
}

impl<V: Weighed> Cache<V> {
    /// An empty cache holding at most about `capacity` bytes (0 disables it).
    pub fn new(capacity: usize) -> Cache<V> {
        Cache {
            inner: Mutex::new(Inner {
                entries: LruCache::unbounded(),
                bytes: 0,
                capacity,
                generation: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        // The cache holds no invariant a panicking holder could break
        // halfway that matters beyond a stale byte count; keep serving.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached value for document `id`, or the one `load` reads (kept
    /// when no invalidation happened meanwhile). `load` returns `None` for
    /// a document that does not exist.
    pub fn get_or_load(
        &self,
        id: &str,
        load: impl FnOnce() -> Result<Option<V>>,
    ) -> Result<Option<Arc<V>>> {
        let generation = {
            let mut inner = self.lock();
            if let Some(hit) = inner.entries.get(id) {
                return Ok(Some(Arc::clone(hit)));
            }
            inner.generation
        };
        let Some(document) = load()? else {
            return Ok(None);
        };
        let loaded = Arc::new(document);
        let mut inner = self.lock();
        if inner.generation == generation {
            inner.insert(id, Arc::clone(&loaded));
        }
        Ok(Some(loaded))
    }

    /// Forgets document `id`; call after its new version (or its removal)
    /// is committed to the store.
    pub fn invalidate(&self, id: &str) {
        drop(self.take(id));
    }

    /// Removes and returns the value cached for `id`, as
    /// [`Cache::invalidate`] forgets it: a writer about to change `id`
    /// takes the current version to change.
    pub fn take(&self, id: &str) -> Option<Arc<V>> {
        let mut inner = self.lock();
        inner.generation += 1;
        let old = inner.entries.pop(id)?;
        inner.bytes -= old.bytes();
        Some(old)
    }

    /// Caches `value` as `id`'s, dropping any older value; call after
    /// `value` is committed to the store. Like [`Cache::invalidate`], it
    /// keeps a load that started before it from being cached.
    pub fn replace(&self, id: &str, value: V) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.insert(id, Arc::new(value));
    }

    /// Changes the bound, evicting as needed (0 disables the cache).
    pub fn set_capacity(&self, capacity: usize) {
        let mut inner = self.lock();
        inner.capacity = capacity;
        inner.evict();
    }

    /// Entries and estimated bytes held.
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }
}

impl<V: Weighed> Inner<V> {
    fn insert(&mut self, id: &str, value: Arc<V>) {
        self.bytes += value.bytes();
        if let Some(old) = self.entries.put(id.to_owned(), value) {
            self.bytes -= old.bytes();
        }
        self.evict();
    }

    fn evict(&mut self) {
        while self.bytes > self.capacity {
            match self.entries.pop_lru() {
                Some((_, old)) => self.bytes -= old.bytes(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::ingest::pipeline::analyze;
    use crate::model::document::Format;

    fn document(id: &str, text: &str) -> CachedDocument {
        CachedDocument::new(
            analyze(id, text.to_owned(), Format::Text).unwrap(),
            Dag::default(),
        )
    }

    #[test]
    fn a_document_is_loaded_once_then_served_from_the_cache() {
        let cache = DocumentCache::new(DEFAULT_CACHE_BYTES);
        let loads = Cell::new(0);
        let load = || {
            loads.set(loads.get() + 1);
            Ok(Some(document("a", "One sentence here. Another one there.")))
        };
        let first = cache.get_or_load("a", load).unwrap().unwrap();
        let second = cache.get_or_load("a", load).unwrap().unwrap();
        assert_eq!(loads.get(), 1);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(
            first.tokens.tokens(first.document.tree.nodes[0].span),
            first.document.meta.tokens
        );
        assert!(cache.get_or_load("missing", || Ok(None)).unwrap().is_none());
    }

    #[test]
    fn invalidation_drops_an_entry_and_a_racing_load_is_not_kept() {
        let cache = DocumentCache::new(DEFAULT_CACHE_BYTES);
        cache
            .get_or_load("a", || Ok(Some(document("a", "Old text."))))
            .unwrap();
        cache.invalidate("a");
        assert_eq!(cache.usage(), (0, 0));
        // A write commits while this read is in flight: the (possibly old)
        // version read is returned but not cached.
        let raced = cache
            .get_or_load("a", || {
                cache.invalidate("a");
                Ok(Some(document("a", "Maybe old text.")))
            })
            .unwrap();
        assert!(raced.is_some());
        assert_eq!(cache.usage().0, 0);
        let fresh = cache
            .get_or_load("a", || Ok(Some(document("a", "New text."))))
            .unwrap()
            .unwrap();
        assert_eq!(fresh.document.text, "New text.");
    }

    #[test]
    fn a_writer_takes_the_cached_value_and_replaces_it_with_what_it_wrote() {
        let cache = DocumentCache::new(DEFAULT_CACHE_BYTES);
        assert!(cache.take("a").is_none());
        cache
            .get_or_load("a", || Ok(Some(document("a", "Old text."))))
            .unwrap();
        let taken = cache.take("a").unwrap();
        assert_eq!(taken.document.text, "Old text.");
        assert_eq!(cache.usage(), (0, 0));
        // A read that loaded the old version before the writer committed
        // is not kept over the replacement, nor after it.
        let raced = cache
            .get_or_load("a", || {
                cache.replace("a", document("a", "New text."));
                Ok(Some(document("a", "Old text.")))
            })
            .unwrap()
            .unwrap();
        assert_eq!(raced.document.text, "Old text.");
        let served = cache
            .get_or_load("a", || panic!("the replacement is cached"))
            .unwrap()
            .unwrap();
        assert_eq!(served.document.text, "New text.");
        assert_eq!(cache.usage(), (1, served.bytes()));
        cache.replace("a", document("a", "Newer, longer text."));
        let (count, bytes) = cache.usage();
        assert_eq!(count, 1);
        assert_eq!(bytes, document("a", "Newer, longer text.").bytes());
    }

    #[test]
    fn the_byte_bound_evicts_least_recently_used_first() {
        let sentence = "A sentence of some length for the cache to hold. ";
        let one = document("x", &sentence.repeat(20)).bytes();
        let cache = DocumentCache::new(2 * one + one / 2);
        for id in ["a", "b", "c"] {
            cache
                .get_or_load(id, || Ok(Some(document(id, &sentence.repeat(20)))))
                .unwrap();
        }
        let (count, bytes) = cache.usage();
        assert_eq!(count, 2);
        assert!(bytes <= 2 * one + one / 2);
        let reloaded = Cell::new(false);
        cache
            .get_or_load("a", || {
                reloaded.set(true);
                Ok(Some(document("a", &sentence.repeat(20))))
            })
            .unwrap();
        assert!(reloaded.get(), "the oldest entry was evicted");
        cache.set_capacity(0);
        assert_eq!(cache.usage(), (0, 0));
    }
}
