//! Reads: documents (through the cache), trees, EDUs, DAGs, BM25 and
//! vector search, totals and the consistency check.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::compute::vector::{centroid, normalise};
use crate::engine::Engine;
use crate::engine::VECTORS_DIR;
use crate::engine::cache::CachedDocument;
use crate::error::{Error, Result};
use crate::ingest::dag::ip::EduVectors;
use crate::model::cost::LlmCost;
use crate::model::dag::{Dag, DagListing};
use crate::model::dialogue::Dialogue;
use crate::model::document::DocMeta;
use crate::model::edu::{EduKind, Span};
use crate::model::ids::{is_turn_id, parse_turn_id};
use crate::model::pages::PageLayout;
use crate::model::rank::{RankedHit, Target};
use crate::model::tree::Tree;
use crate::storage::fulltext::FullTextSet;
use crate::storage::store::{Damage, FORMAT_VERSION, StoredDoc};
use crate::storage::vector_record::Rows;
use crate::storage::vectors::{EXACT_SCOPE_LIMIT, MappedTable, VectorCounts, search_stored};

/// Graph searches a process answers from the flat tables before it loads
/// the graph: two queries' worth (a NEAR or HYBRID seed searches nodes and
/// EDUs).
const FLAT_SEARCHES: usize = 4;

/// One EDU with its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EduText {
    /// EDU id.
    pub id: u32,
    /// Byte range `[start, end)` in the stored text.
    pub bytes: [u32; 2],
    /// o200k_base tokens.
    pub tokens: u32,
    /// The block kind it came from.
    pub kind: EduKind,
    /// First and last page (1-based, inclusive) of a PDF's EDU; absent
    /// for other formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<[u32; 2]>,
    /// Exactly `text[start..end]`.
    pub text: String,
}

/// One full-text hit with its coordinates and text.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchHit {
    /// Document id.
    pub doc: String,
    /// The section whose title matched, or `None` for an EDU hit.
    pub node: Option<u32>,
    /// EDUs covered: the EDU, or the section's span.
    pub edus: Span,
    /// Byte range `[start, end)` of those EDUs in the stored text.
    pub bytes: [u32; 2],
    /// BM25 score.
    pub score: f32,
    /// The EDU's text, or the section's title.
    pub text: String,
}

impl SearchHit {
    /// The hit as the CLI's `search --json` and the server print it:
    /// `{doc, node, edus: [first, last], bytes, score, text}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "doc": self.doc, "node": self.node, "edus": [self.edus.first, self.edus.last],
            "bytes": self.bytes, "score": self.score, "text": self.text,
        })
    }
}

/// Totals over the whole store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Number of documents (session turns not counted).
    pub documents: u64,
    /// Number of agent-memory sessions.
    pub sessions: u64,
    /// Number of session turns (each stored as a document of its own).
    pub turns: u64,
    /// Number of EDUs, of documents and turns.
    pub edus: u64,
    /// Number of tree nodes, of documents and turns.
    pub nodes: u64,
    /// Tokens over all EDUs.
    pub tokens: u64,
    /// Bytes of stored text.
    pub text_bytes: u64,
    /// Bytes the storage engine uses on disk.
    pub store_bytes: u64,
    /// Entries in the full-text index.
    pub fulltext_entries: u64,
    /// Store change sequence number.
    pub last_change: u64,
    /// On-disk format version.
    pub format_version: u32,
    /// Tokenizer all counts are in.
    pub tokenizer: &'static str,
    /// What the language-model steps cost to build the stored documents.
    pub llm: LlmCost,
}

/// Result of [`crate::Db::check`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    /// Documents whose records were validated (session turns included).
    pub documents: usize,
    /// Sessions whose dialogue records were validated against their turns.
    pub sessions: usize,
    /// Full-text entries.
    pub fulltext_entries: u64,
    /// Node and EDU vectors stored (and checked against the documents'
    /// shapes); `dead` is 0. The graph over them is derived state and is
    /// not built by a check.
    pub vectors: VectorCounts,
    /// The change the persisted vector graph reflects (0: never built); it
    /// catches up with [`CheckReport::last_change`] on its next use.
    pub vector_graph_change: u64,
    /// The store's latest change.
    pub last_change: u64,
    /// Every damaged document (or session, or orphan record), with what is
    /// wrong: empty when the store is sound. The counts above leave their
    /// vectors out.
    pub damaged: Vec<Damaged>,
}

/// One damaged document in a [`CheckReport`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damaged {
    /// The document id (`session ID` for a session's dialogue).
    pub doc: String,
    /// What is wrong with it.
    pub problem: String,
}

impl Engine {
    /// Document `id` for query execution, from the cache or the store.
    pub(crate) fn cached_document(&self, id: &str) -> Result<Arc<CachedDocument>> {
        self.cache
            .get_or_load(id, || {
                let Some(stored) = self.store.get(id)? else {
                    return Ok(None);
                };
                let document = stored.to_document()?;
                let dag = self.read_dag(id, document.edus.len() as u32)?;
                Ok(Some(CachedDocument::new(document, dag)))
            })?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))
    }

    /// The centroid of document `id`: the unit mean of its EDU vectors,
    /// from the cache or the store.
    pub(crate) fn centroid(&self, id: &str) -> Result<Arc<Vec<f32>>> {
        self.centroids
            .get_or_load(id, || {
                let (edus, dimension) = match self.edu_vectors(id) {
                    Err(Error::NoSuchDocument(_)) => return Ok(None),
                    read => read?,
                };
                Ok(Some(centroid(&edus, dimension)))
            })?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))
    }

    /// Session `id`'s dialogue (checked, as the store reads it), from the
    /// cache or the store; `None` when there is no such session.
    pub(crate) fn dialogue(&self, id: &str) -> Result<Option<Arc<Dialogue>>> {
        self.sessions.get_or_load(id, || self.store.dialogue(id))
    }

    /// Session `id`'s dialogue for a writer to change under
    /// [`Engine::write`]: the cached one taken out of the cache (copied
    /// only if a reader still holds it), or the store's. The write puts
    /// what it commits back
    /// ([`Written::sessions`](crate::engine::write::Written::sessions)).
    pub(crate) fn dialogue_to_change(&self, id: &str) -> Result<Option<Dialogue>> {
        match self.sessions.take(id) {
            Some(cached) => Ok(Some(Arc::unwrap_or_clone(cached))),
            None => self.store.dialogue(id),
        }
    }

    /// Forgets what the caches hold of document `id` (and, for a turn, of
    /// its session); called once its new version (or its removal) is
    /// committed to the store.
    pub(super) fn forget_cached(&self, id: &str) {
        self.cache.invalidate(id);
        self.centroids.invalidate(id);
        if let Some((session, _)) = parse_turn_id(id) {
            self.sessions.invalidate(session);
        }
    }

    /// Document `id`'s DAG record, validated against its `edus` EDUs (a
    /// record that fails is [`Error::Corrupt`], never a panic later).
    pub(super) fn read_dag(&self, id: &str, edus: u32) -> Result<Dag> {
        let corrupt = |message: String| Error::Corrupt {
            key: format!("dag of {id}"),
            message,
        };
        let dag = self
            .store
            .dag(id)?
            .ok_or_else(|| corrupt("record missing".into()))?
            .to_dag()?;
        dag.validate(edus).map_err(corrupt)?;
        Ok(dag)
    }

    /// The work of [`crate::Db::set_document_cache_bytes`].
    pub(crate) fn set_document_cache_bytes(&self, bytes: usize) {
        self.cache.set_capacity(bytes);
    }

    /// The work of [`crate::Db::document_cache_usage`].
    pub(crate) fn document_cache_usage(&self) -> (usize, usize) {
        self.cache.usage()
    }

    /// `text`'s vector from the store's embedder, as searches use it.
    pub(crate) fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let mut vector = self.embedder.embed(&[text])?.pop().unwrap_or_default();
        normalise(&mut vector);
        Ok(vector)
    }

    /// The work of [`crate::Db::nearest`].
    pub(crate) fn nearest(
        &self,
        text: &str,
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        let query = self.embed_query(text)?;
        self.nearest_unit(&query, target, k, exact)
    }

    /// The work of [`crate::Db::nearest_vector`]: checks the caller's
    /// vector, then searches with it normalised.
    pub(crate) fn nearest_vector(
        &self,
        vector: &[f32],
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        let dimension = self.embedder.dimension();
        if vector.len() != dimension {
            return Err(Error::Usage(format!(
                "a query vector of dimension {} for a store whose vectors have dimension {dimension}",
                vector.len()
            )));
        }
        if !vector.iter().all(|x| x.is_finite()) || vector.iter().all(|&x| x == 0.0) {
            return Err(Error::Usage(
                "a query vector must have finite components, not all zero".into(),
            ));
        }
        let mut query = vector.to_vec();
        normalise(&mut query);
        self.nearest_unit(&query, target, k, exact)
    }

    /// The whole store's `k` nodes or EDUs nearest to the unit vector
    /// `query`: as [`Engine::vector_search`] searches without a scope, or
    /// scoring every stored vector when `exact` (through the graph's
    /// entries when it is loaded; it is not loaded for this).
    fn nearest_unit(
        &self,
        query: &[f32],
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        if !exact {
            return self.vector_search(target, query, k, None);
        }
        let guard = self.vectors_read();
        match guard.as_ref() {
            Some(index) => index.search_exact(&self.store, target, query, k),
            None => self.search_every_stored(target, query, k, None),
        }
    }

    /// The `k` nodes or EDUs nearest to the unit vector `query`, among the
    /// documents in `scope` when given. A scope of at most
    /// [`EXACT_SCOPE_LIMIT`] vectors is scored exactly from the store,
    /// without loading or building the graph. Anything larger searches the
    /// graph when it is loaded. No search waits for the graph: while it is
    /// not loaded, searches are scored exactly, from the flat tables
    /// persisted with the graph ([`Engine::search_flat`]) or, where there
    /// are none to use, from every stored vector; and past a process's
    /// first [`FLAT_SEARCHES`] such searches the graph is loaded (built
    /// when it never was) in the background for the searches after it. So
    /// a process that runs a query or two (a CLI command) never loads the
    /// graph, and one that searches on gets it without waiting for it.
    pub(crate) fn vector_search(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&[&str]>,
    ) -> Result<Vec<RankedHit>> {
        if let Some(docs) = scope
            && let Some(hits) =
                search_stored(&self.store, target, query, k, docs, EXACT_SCOPE_LIMIT)?
        {
            return Ok(hits);
        }
        {
            let guard = self.vectors_read();
            if let Some(index) = guard.as_ref() {
                return index.search(target, query, k, scope);
            }
        }
        if self
            .flat_searches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            >= FLAT_SEARCHES
        {
            self.build_vector_graph_in_background();
        }
        match self.search_flat(target, query, k, scope)? {
            Some(hits) => Ok(hits),
            None => self.search_every_stored(target, query, k, scope),
        }
    }

    /// Exact search over the stored vectors of `scope`'s documents, or of
    /// every document but session turns: what answers while no graph or
    /// flat table can.
    fn search_every_stored(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&[&str]>,
    ) -> Result<Vec<RankedHit>> {
        let unscoped: Vec<String>;
        let docs: Vec<&str> = match scope {
            Some(docs) => docs.to_vec(),
            None => {
                unscoped = self.store.ids()?;
                (unscoped.iter().map(String::as_str))
                    .filter(|id| !is_turn_id(id))
                    .collect()
            }
        };
        let hits = search_stored(&self.store, target, query, k, &docs, usize::MAX)?;
        Ok(hits.unwrap_or_default())
    }

    /// An exact search of the flat table persisted with the graph of
    /// `target` (see [`crate::storage::vectors::MappedTable`]), with the
    /// documents changed since it was written scored from their stored
    /// vectors. `None` when there is no usable table, or when the change
    /// log no longer reaches back to it or the changed documents hold more
    /// than [`EXACT_SCOPE_LIMIT`] vectors: the graph (caught up and saved
    /// on loading, with fresh tables) serves those.
    fn search_flat(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&[&str]>,
    ) -> Result<Option<Vec<RankedHit>>> {
        let Some(table) = MappedTable::open(
            &self.dir.join(VECTORS_DIR),
            target,
            &self.embedder.identity(),
            self.embedder.dimension(),
        ) else {
            return Ok(None);
        };
        let applied = table.applied_seq();
        if applied > self.store.last_seq()? || applied < self.store.trimmed_seq()? {
            return Ok(None);
        }
        let changed: HashSet<String> = (self.store.changes_after(applied)?.into_iter())
            .map(|(_, id)| id)
            .collect();
        let scope: Option<HashSet<&str>> = scope.map(|docs| docs.iter().copied().collect());
        let rescored: Vec<&str> = (changed.iter().map(String::as_str))
            .filter(|doc| match &scope {
                Some(scope) => scope.contains(doc),
                None => !is_turn_id(doc),
            })
            .collect();
        let Some(mut hits) =
            search_stored(&self.store, target, query, k, &rescored, EXACT_SCOPE_LIMIT)?
        else {
            return Ok(None);
        };
        hits.extend(table.search(target, query, k, scope.as_ref(), &changed)?);
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(k);
        Ok(Some(hits))
    }

    /// The work of [`crate::Db::dag`].
    pub(crate) fn dag(&self, id: &str) -> Result<Dag> {
        Ok(self.cached_document(id)?.dag.clone())
    }

    /// The work of [`crate::Db::dag_listing`].
    pub(crate) fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<DagListing> {
        let loaded = self.cached_document(id)?;
        Ok(loaded.dag.listing(&loaded.document, level))
    }

    /// Document `id`'s stored EDU vectors (row-major) and their dimension.
    pub(crate) fn edu_vectors(&self, id: &str) -> Result<(Vec<f32>, usize)> {
        self.stored_vectors(id, Target::Edus)
    }

    /// Document `id`'s stored node vectors (row-major, by node id) and
    /// their dimension.
    pub(crate) fn node_vectors(&self, id: &str) -> Result<(Vec<f32>, usize)> {
        self.stored_vectors(id, Target::Nodes)
    }

    /// `f` applied to document `id`'s stored EDU vectors, in the layout
    /// they were stored in (reading its vector record alone), once the
    /// record holds a row for each of its `edus` EDUs.
    pub(crate) fn with_edu_vectors<T>(
        &self,
        id: &str,
        edus: usize,
        f: impl FnOnce(EduVectors<'_>) -> Result<T>,
    ) -> Result<T> {
        let stored = self
            .store
            .vectors(id)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
        let rows = stored.get()?.rows(Target::Edus);
        if !rows.holds(edus) {
            return Err(Error::Invariant {
                doc: id.to_owned(),
                message: format!("{} EDU vector values for {edus} EDUs", rows.values_len()),
            });
        }
        match rows {
            rows @ Rows::Full(_, dimension) => f(EduVectors::Full {
                values: &rows.values(),
                dimension,
            }),
            Rows::Packed(codes, scales, dimension) => f(EduVectors::Packed {
                codes,
                scales: &scales.iter().map(|s| s.to_native()).collect::<Vec<f32>>(),
                dimension,
            }),
        }
    }

    /// Document `id`'s stored vectors of `target` and their dimension,
    /// reading its vector record alone.
    fn stored_vectors(&self, id: &str, target: Target) -> Result<(Vec<f32>, usize)> {
        let stored = self
            .store
            .vectors(id)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
        let vectors = stored.get()?;
        Ok((vectors.rows(target).values(), vectors.dimension()))
    }

    /// The work of [`crate::Db::documents`].
    pub(crate) fn documents(&self) -> Result<Vec<DocMeta>> {
        let mut metas = self.store.metas()?;
        metas.retain(|m| !is_turn_id(&m.id));
        Ok(metas)
    }

    /// The work of [`crate::Db::document`].
    pub(crate) fn document(&self, id: &str) -> Result<StoredDoc> {
        self.store
            .get(id)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))
    }

    /// The work of [`crate::Db::tree`].
    pub(crate) fn tree(&self, id: &str) -> Result<Tree> {
        Ok(self.document(id)?.to_document()?.tree)
    }

    /// The work of [`crate::Db::pages`].
    pub(crate) fn pages(&self, id: &str) -> Result<Option<PageLayout>> {
        self.document(id)?.pages()
    }

    /// The work of [`crate::Db::edus`].
    pub(crate) fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Vec<EduText>> {
        let stored = self.document(id)?;
        let edus = stored.edus()?;
        let text = stored.text()?;
        let pages = stored.pages()?;
        let count = edus.len() as u32;
        let (first, last) = range.unwrap_or((0, count.saturating_sub(1)));
        if first > last || last >= count {
            return Err(Error::EduRange {
                doc: id.to_owned(),
                first,
                last,
                count,
            });
        }
        Ok(edus[first as usize..=last as usize]
            .iter()
            .map(|e| {
                let (start, end) = (e.start.to_native(), e.end.to_native());
                EduText {
                    id: e.id.to_native(),
                    bytes: [start, end],
                    tokens: e.tokens.to_native(),
                    kind: rkyv::deserialize::<EduKind, rkyv::rancor::Infallible>(&e.kind)
                        .unwrap_or(EduKind::Text),
                    pages: pages.as_ref().map(|p| {
                        let on = p.pages_of(start..end);
                        [on.start + 1, on.end]
                    }),
                    text: text[start as usize..end as usize].to_owned(),
                }
            })
            .collect())
    }

    /// The work of [`crate::Db::search`].
    pub(crate) fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        self.search_hits(FullTextSet::of(&self.reader).search(query, limit)?)
    }

    /// `hits` of this store's documents with their coordinates and texts,
    /// in the order given; hits of documents no longer stored (or of
    /// session turns, which query syntax can name) are left out.
    pub(crate) fn search_hits(&self, hits: Vec<RankedHit>) -> Result<Vec<SearchHit>> {
        let mut docs: HashMap<String, StoredDoc> = HashMap::new();
        let mut out = Vec::with_capacity(hits.len());
        // Query syntax can name the turn fields; session turns are not
        // documents.
        for hit in hits.into_iter().filter(|h| !is_turn_id(&h.doc)) {
            if !docs.contains_key(&hit.doc) {
                let Some(stored) = self.store.get(&hit.doc)? else {
                    continue;
                };
                docs.insert(hit.doc.clone(), stored);
            }
            let stored = &docs[&hit.doc];
            let (edus, text) = (stored.edus()?, stored.text()?);
            let (Some(first), Some(last)) = (
                edus.get(hit.span.first as usize),
                edus.get(hit.span.last as usize),
            ) else {
                continue;
            };
            let bytes = [first.start.to_native(), last.end.to_native()];
            // Coordinates from a damaged index entry slice nothing.
            let Some(edu_text) = text.get(bytes[0] as usize..bytes[1] as usize) else {
                tracing::warn!(
                    "a full-text entry of {} names EDUs {}-{}, which do not slice its text: the index is damaged (`edudb reindex` rebuilds it)",
                    hit.doc,
                    hit.span.first,
                    hit.span.last
                );
                continue;
            };
            let text = match hit.node {
                Some(node) => stored
                    .tree()?
                    .nodes
                    .get(node as usize)
                    .map_or_else(String::new, |n| n.title.to_string()),
                None => edu_text.to_owned(),
            };
            out.push(SearchHit {
                doc: hit.doc,
                node: hit.node,
                edus: hit.span,
                bytes,
                score: hit.score,
                text,
            });
        }
        Ok(out)
    }

    /// The work of [`crate::Db::stats`].
    pub(crate) fn stats(&self) -> Result<Stats> {
        let metas = self.store.metas()?;
        let turns = metas.iter().filter(|m| is_turn_id(&m.id)).count() as u64;
        Ok(Stats {
            documents: metas.len() as u64 - turns,
            sessions: self.store.dialogues()?.len() as u64,
            turns,
            edus: metas.iter().map(|m| u64::from(m.edus)).sum(),
            nodes: metas.iter().map(|m| u64::from(m.nodes)).sum(),
            tokens: metas.iter().map(|m| m.tokens).sum(),
            text_bytes: metas.iter().map(|m| m.bytes).sum(),
            store_bytes: self.store.size_on_disk()?,
            fulltext_entries: self.reader.entries(),
            last_change: self.store.last_seq()?,
            format_version: FORMAT_VERSION,
            tokenizer: crate::model::tokens::TOKENIZER,
            llm: self
                .store
                .costs()?
                .iter()
                .fold(LlmCost::default(), |mut sum, (_, cost)| {
                    sum.add(cost);
                    sum
                }),
        })
    }

    /// The work of [`crate::Db::build_costs`].
    pub(crate) fn build_costs(&self) -> Result<Vec<(String, LlmCost)>> {
        self.store.costs()
    }

    /// The documents and sessions found lost when the store was opened
    /// (its change log cut by damage; the index has been rebuilt since, so
    /// only the store's record names them) and not stored again since: each
    /// is damage until it is ingested again or its loss acknowledged by
    /// removing it. An unreadable record of losses is damage itself.
    pub(crate) fn unrecovered_losses(&self) -> Result<Vec<Damage>> {
        let losses = match self.store.losses() {
            Ok(losses) => losses,
            Err(error) => {
                return Ok(vec![Damage {
                    doc: "the record of lost documents".into(),
                    error,
                }]);
            }
        };
        let mut damaged = Vec::new();
        for loss in losses {
            let lost = |doc: String, what: &str| Damage {
                error: Error::Invariant {
                    doc: doc.clone(),
                    message: format!(
                        "lost to damage: the store's change log was cut at change {} (its full-text index had reached {}), found {}; {what}",
                        loss.store_change,
                        loss.index_change,
                        crate::model::time::format(loss.found_at)
                    ),
                },
                doc,
            };
            for id in &loss.ids {
                if !self.store.contains(id)? {
                    damaged.push(lost(
                        id.clone(),
                        "ingest it again, or remove it to acknowledge the loss",
                    ));
                }
            }
            for id in &loss.sessions {
                if self.store.dialogue(id)?.is_none() {
                    damaged.push(lost(
                        format!("session {id}"),
                        "remove the session to acknowledge the loss",
                    ));
                }
            }
        }
        Ok(damaged)
    }

    /// The work of [`crate::Db::check`].
    pub(crate) fn check(&self) -> Result<CheckReport> {
        let mut store = self.store.check_all(&self.reader.document_ids()?)?;
        // A document the index holds and the store lacks was lost: sled
        // recovers a damaged log only up to the damage.
        let fulltext = self.fulltext_writer();
        let applied = fulltext.applied_seq()?;
        drop(fulltext);
        // An index behind the store (after a failed index update) still
        // holds documents since removed: only one at or past the store's
        // latest change can show a loss.
        let last = self.store.last_seq();
        let ahead = last.as_ref().is_ok_and(|&last| applied >= last);
        for id in std::mem::take(&mut store.absent) {
            if ahead && self.reader.holds(&id)? {
                let error = Error::Invariant {
                    doc: id.clone(),
                    message: "the full-text index holds it but the store does not: lost to damage"
                        .into(),
                };
                store.damaged.push(Damage { doc: id, error });
            }
        }
        store.damaged.extend(self.unrecovered_losses()?);
        // An unreadable change counter, or one the index disagrees with, is
        // damage to name like a record's.
        let last = match last {
            Ok(last) => {
                if last != applied {
                    let error = Error::Invariant {
                        doc: String::new(),
                        message: format!(
                            "the full-text index applied change {applied}, the store is at {last}"
                        ),
                    };
                    store.damaged.push(Damage {
                        doc: "the full-text index".into(),
                        error,
                    });
                }
                last
            }
            Err(error) => {
                store.damaged.push(Damage {
                    doc: "the store's change counter".into(),
                    error,
                });
                applied
            }
        };
        Ok(CheckReport {
            documents: store.documents,
            sessions: store.sessions,
            fulltext_entries: self.reader.entries(),
            vectors: VectorCounts {
                nodes: store.nodes,
                edus: store.edus,
                dead: 0,
            },
            vector_graph_change: self.vector_graph_change(),
            last_change: last,
            damaged: (store.damaged.into_iter())
                .map(|d| Damaged {
                    doc: d.doc,
                    problem: d.error.to_string(),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    //! The engine's centroids follow the store through rewrites and removals.
    use crate::compute::vector::{centroid, dot};
    use crate::engine::three_fruit_store;
    use crate::error::Error;
    use crate::ingest::pipeline::IngestOptions;

    #[test]
    fn a_centroid_is_the_unit_mean_of_the_stored_edu_vectors_and_follows_rewrites() {
        let (_dir, engine) = three_fruit_store();
        let stored = |id: &str| {
            let (edus, dimension) = engine.edu_vectors(id).unwrap();
            centroid(&edus, dimension)
        };
        let first = engine.centroid("apples").unwrap();
        assert_eq!(*first, stored("apples"));
        assert!((dot(&first, &first) - 1.0).abs() < 1e-5);
        // Served from the cache while the document is unchanged.
        assert!(std::sync::Arc::ptr_eq(
            &first,
            &engine.centroid("apples").unwrap()
        ));
        engine
            .ingest_bytes(
                "apples",
                b"Rain falls on the harbour at night.".to_vec(),
                IngestOptions::default(),
            )
            .unwrap();
        let rewritten = engine.centroid("apples").unwrap();
        assert_eq!(*rewritten, stored("apples"));
        assert_ne!(*rewritten, *first);
        engine.remove("apples").unwrap();
        assert!(matches!(
            engine.centroid("apples"),
            Err(Error::NoSuchDocument(id)) if id == "apples"
        ));
    }
}
