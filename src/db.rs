//! [`Db`]: one open store directory. It owns the process lock, the sled
//! store (source of truth) and the full-text index (derived state), keeps
//! the index caught up with the store, and is the library's entry point for
//! ingesting, browsing, searching and maintenance.
//!
//! Directory layout: `LOCK` (held exclusively while open), `sled/` (the
//! [`Store`]), `fulltext/` (the [`FullText`] index).

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use crate::compute::device::Device;
use crate::compute::embed::{Embedder, EmbedderConfig};
use crate::compute::propagate::PropagateOptions;
use crate::dag::index::DagIndex;
use crate::error::{Error, Result};
use crate::ingest::dag::supplied::SuppliedAttention;
use crate::ingest::pipeline::{IngestOptions, build_dag, prepare, prepare_text};
use crate::ingest::sources::{Origin, Source};
use crate::model::dag::{Dag, DagListing};
use crate::model::document::{DocMeta, DocVectors, Document};
use crate::model::edu::{EduKind, Span};
use crate::model::ids::is_turn_id;
use crate::model::rank::{RankedHit, Target};
use crate::model::tree::Tree;
use crate::progress::{CancelToken, Progress};
use crate::query::cache::{CachedDocument, DEFAULT_CACHE_BYTES, DocumentCache};
use crate::storage::fulltext::{FullText, FullTextReader};
use crate::storage::store::{FORMAT_VERSION, Store, StoredDoc};
use crate::storage::vectors::{VectorCounts, VectorIndex};

const LOCK_FILE: &str = "LOCK";
const STORE_DIR: &str = "sled";
const FULLTEXT_DIR: &str = "fulltext";
const VECTORS_DIR: &str = "vectors";

/// An open edudb store.
#[derive(Debug)]
pub struct Db {
    dir: PathBuf,
    store: Store,
    fulltext: Mutex<FullText>,
    /// Searches run on this handle, never waiting for the writer.
    reader: FullTextReader,
    /// Documents queries read, kept between queries.
    documents: DocumentCache,
    /// The store's embedder and the configuration it was built from.
    embedder: Box<dyn Embedder>,
    embedder_config: EmbedderConfig,
    /// The vector index, loaded on first use (see [`Db::vector_index`]).
    vectors: RwLock<Option<VectorIndex>>,
    /// Where attention aggregation and propagation run, detected on first
    /// use (opening a GPU compiles its kernels, which plain commands skip).
    device: std::sync::OnceLock<Device>,
    /// Every document's DAG as one graph, built on first use and rebuilt
    /// after a change (see [`Db::dag_index`]).
    dag_index: Mutex<Option<Arc<DagIndex>>>,
    /// Set when a change reached the store but not the full-text writer (it
    /// failed after the store write): the next commit first drops the
    /// writer's uncommitted changes and replays the change log from the
    /// index's last commit, so no later commit can mark a missed change as
    /// applied.
    fulltext_behind: std::sync::atomic::AtomicBool,
    /// Held for the lifetime of the `Db`; the OS releases it on exit or crash.
    _lock: File,
}

/// One input that could not be ingested, and why.
#[derive(Debug)]
pub struct IngestFailure {
    /// The file name, `<stdin>`, or the id.
    pub source: String,
    /// What was wrong with it.
    pub error: Error,
}

/// What an ingest run did.
#[derive(Debug, Default)]
pub struct IngestReport {
    /// Metadata of every document written, in the order written.
    pub documents: Vec<DocMeta>,
    /// Inputs rejected for bad content; the others were still ingested.
    pub failures: Vec<IngestFailure>,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
}

impl IngestReport {
    /// Total EDUs written.
    pub fn edus(&self) -> u64 {
        self.documents.iter().map(|d| u64::from(d.edus)).sum()
    }

    /// Total tree nodes written.
    pub fn nodes(&self) -> u64 {
        self.documents.iter().map(|d| u64::from(d.nodes)).sum()
    }

    /// Total tokens written.
    pub fn tokens(&self) -> u64 {
        self.documents.iter().map(|d| d.tokens).sum()
    }

    /// Total bytes of stored text written.
    pub fn bytes(&self) -> u64 {
        self.documents.iter().map(|d| d.bytes).sum()
    }
}

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

/// One node found by batched propagation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DagHit {
    /// Document id.
    pub doc: String,
    /// The node's id in the document's DAG.
    pub node: u32,
    /// Its level (1: chunk).
    pub level: u16,
    /// The EDUs it stands for.
    pub edus: Span,
    /// Its propagated score.
    pub score: f32,
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
}

/// Result of [`Db::check`].
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
}

/// What a write under [`Db::write`] changed in the store.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Documents written (replacing any with their ids).
    pub put: Vec<Document>,
    /// Ids of documents removed.
    pub removed: Vec<String>,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// How [`Db::open_with`] opens a store.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Create the store when the directory is absent or empty.
    pub create: bool,
    /// The embedder: for a new store, the one it is built with (default:
    /// the hashed n-gram embedder); for an existing store, it must have the
    /// identity the store was built with (`None`: the recorded one).
    pub embedder: Option<EmbedderConfig>,
}

impl Db {
    /// Opens an existing store; [`Error::NoStore`] when the directory is
    /// absent or empty, [`Error::NotAStore`] when it holds something else.
    pub fn open(dir: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(dir, &OpenOptions::default())
    }

    /// Opens the store at `dir`, creating it when absent.
    pub fn create(dir: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(
            dir,
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
    }

    /// Opens (or, with `options.create`, creates) the store at `dir` with
    /// the given embedder; [`Error::EmbedderMismatch`] when the store's
    /// vectors were made by a different one.
    pub fn open_with(dir: impl AsRef<Path>, options: &OpenOptions) -> Result<Db> {
        let dir = dir.as_ref();
        let create = options.create;
        // The lock file is written first when a store is created, so a
        // directory holding it is a store, possibly one whose creation was
        // interrupted; opening it completes the creation (it has no
        // documents yet).
        let is_store = dir.join(STORE_DIR).is_dir() || dir.join(LOCK_FILE).is_file();
        if dir.exists() && !dir.is_dir() {
            return Err(Error::NotAStore(dir.to_owned()));
        }
        if !is_store {
            let empty = !dir.exists()
                || std::fs::read_dir(dir)
                    .map_err(io_error(dir))?
                    .next()
                    .is_none();
            if !empty {
                return Err(Error::NotAStore(dir.to_owned()));
            }
            if !create {
                return Err(Error::NoStore(dir.to_owned()));
            }
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        let lock_path = dir.join(LOCK_FILE);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(Error::Locked(dir.to_owned())),
            Err(TryLockError::Error(source)) => {
                return Err(Error::Io {
                    path: lock_path,
                    source,
                });
            }
        }
        let store = Store::open(&dir.join(STORE_DIR)).map_err(|e| match e {
            Error::FormatVersion {
                found, expected, ..
            } => Error::FormatVersion {
                path: dir.to_owned(),
                found,
                expected,
            },
            other => other,
        })?;
        let fulltext_dir = dir.join(FULLTEXT_DIR);
        let (fulltext, rebuild) = match FullText::open(&fulltext_dir) {
            Ok(index) => (index, false),
            Err(err) => {
                tracing::warn!("full-text index unreadable ({err}); rebuilding it from the store");
                std::fs::remove_dir_all(&fulltext_dir).map_err(io_error(&fulltext_dir))?;
                (FullText::open(&fulltext_dir)?, true)
            }
        };
        let (embedder, embedder_config) = store_embedder(&store, options.embedder.as_ref())?;
        let db = Db {
            dir: dir.to_owned(),
            store,
            reader: fulltext.reader(),
            fulltext: Mutex::new(fulltext),
            documents: DocumentCache::new(DEFAULT_CACHE_BYTES),
            embedder,
            embedder_config,
            vectors: RwLock::new(None),
            device: std::sync::OnceLock::new(),
            dag_index: Mutex::new(None),
            fulltext_behind: Default::default(),
            _lock: lock,
        };
        db.catch_up(rebuild)?;
        Ok(db)
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The document store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The full-text read handle.
    /// Document `id` for query execution, from the cache or the store.
    pub(crate) fn cached_document(&self, id: &str) -> Result<Arc<CachedDocument>> {
        self.documents
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

    /// Document `id`'s DAG record, validated against its `edus` EDUs (a
    /// record that fails is [`Error::Corrupt`], never a panic later).
    fn read_dag(&self, id: &str, edus: u32) -> Result<Dag> {
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

    /// Bounds the memory queries use to keep documents decoded between
    /// queries (default 64 MiB of document data; 0 turns the cache off).
    pub fn set_document_cache_bytes(&self, bytes: usize) {
        self.documents.set_capacity(bytes);
    }

    /// Documents held decoded between queries, and their estimated bytes.
    pub fn document_cache_usage(&self) -> (usize, usize) {
        self.documents.usage()
    }

    pub(crate) fn full_text(&self) -> &FullTextReader {
        &self.reader
    }

    fn fulltext(&self) -> std::sync::MutexGuard<'_, FullText> {
        self.fulltext
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Brings the full-text index up to the store's latest change: replays
    /// the change log past what the index applied, or rebuilds it when the
    /// log no longer reaches back that far (or the index is ahead).
    fn catch_up(&self, force_rebuild: bool) -> Result<()> {
        let mut fulltext = self.fulltext();
        let applied = fulltext.applied_seq()?;
        let last = self.store.last_seq()?;
        if applied == last && !force_rebuild {
            return Ok(());
        }
        if force_rebuild || applied > last || applied < self.store.trimmed_seq()? {
            tracing::info!("rebuilding the full-text index from the store");
            drop(fulltext);
            return self.reindex(&crate::progress::NoProgress, &CancelToken::new());
        }
        tracing::info!("full-text index catching up from change {applied} to {last}");
        self.replay(&mut fulltext, applied)?;
        fulltext.commit(last)?;
        self.trim_log(last)
    }

    /// After a change missed the full-text writer ([`Db::fulltext_behind`]):
    /// drops the writer's uncommitted changes (a failed writer may have
    /// lost some) and replays the change log from the index's last commit.
    /// Does nothing otherwise.
    fn recover_index(&self, fulltext: &mut FullText) -> Result<()> {
        if self.fulltext_behind.load(Ordering::SeqCst) {
            fulltext.rollback()?;
            let applied = fulltext.applied_seq()?;
            self.replay(fulltext, applied)?;
            self.fulltext_behind.store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Re-indexes (uncommitted) every document the change log names after
    /// `applied`, as the store now has it. Idempotent: a document indexed
    /// already is replaced by the same entries.
    fn replay(&self, fulltext: &mut FullText, applied: u64) -> Result<()> {
        let mut latest: HashMap<String, u64> = HashMap::new();
        for (seq, id) in self.store.changes_after(applied)? {
            latest.insert(id, seq);
        }
        for id in latest.keys() {
            match self.store.get(id)? {
                Some(stored) => fulltext.replace(&stored.to_document()?)?,
                None => fulltext.remove(id),
            }
        }
        Ok(())
    }

    /// Drops change-log entries every derived index has applied, up to
    /// `seq`. The vector index, when it has been built, holds the log back
    /// to what it has persisted; when it has never been built, its first
    /// build reads the whole store anyway.
    fn trim_log(&self, seq: u64) -> Result<()> {
        let vectors = VectorIndex::persisted_seq(&self.dir.join(VECTORS_DIR));
        let upto = if vectors == 0 { seq } else { seq.min(vectors) };
        self.store.trim_log(upto)
    }

    /// The store's embedder.
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// The configuration of the store's embedder.
    pub fn embedder_config(&self) -> &EmbedderConfig {
        &self.embedder_config
    }

    /// The vector index, loaded (and caught up with the store) on first
    /// use: commands that never search by vector never pay for loading it.
    pub(crate) fn vector_index(&self) -> Result<RwLockReadGuard<'_, Option<VectorIndex>>> {
        loop {
            let guard = self
                .vectors
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if guard.is_some() {
                return Ok(guard);
            }
            drop(guard);
            self.with_vector_index(|_| Ok(()))?;
        }
    }

    /// The vector index as persisted (empty when missing or damaged), not
    /// yet caught up.
    fn open_vector_index(&self) -> VectorIndex {
        VectorIndex::open(
            &self.dir.join(VECTORS_DIR),
            &self.embedder.identity(),
            self.embedder.dimension(),
        )
    }

    /// Runs `f` on the loaded, caught-up vector index under the write lock.
    fn with_vector_index<R>(&self, f: impl FnOnce(&mut VectorIndex) -> Result<R>) -> Result<R> {
        let mut guard = self
            .vectors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            let mut index = self.open_vector_index();
            self.catch_up_vectors(
                &mut index,
                &crate::progress::NoProgress,
                &CancelToken::new(),
            )?;
            *guard = Some(index);
        }
        let index = guard
            .as_mut()
            .ok_or_else(|| Error::Vectors("not loaded".into()))?;
        f(index)
    }

    /// Brings the vector index up to the store's latest change (see
    /// [`Db::replay_vectors`]) and persists it when anything changed.
    fn catch_up_vectors(
        &self,
        index: &mut VectorIndex,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<()> {
        if let Some(last) = self.replay_vectors(index, progress, cancel)? {
            index.persist()?;
            self.trim_log(last.min(self.fulltext().applied_seq()?))?;
        }
        Ok(())
    }

    /// Brings the vector index up to the store's latest change without
    /// persisting it: replays the log past what it applied, or rebuilds it
    /// from the stored vectors when the log no longer reaches back, it is
    /// ahead, or a quarter of its entries are tombstones. Returns the change
    /// it now reflects, or `None` when it was already there. On an error the
    /// index is part-way and must be dropped, not used.
    fn replay_vectors(
        &self,
        index: &mut VectorIndex,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Option<u64>> {
        let applied = index.applied_seq();
        let last = self.store.last_seq()?;
        if applied == last && !index.needs_rebuild() {
            return Ok(None);
        }
        let ids: Vec<String> =
            if applied > last || applied < self.store.trimmed_seq()? || index.needs_rebuild() {
                tracing::info!("building the vector index from the stored vectors");
                index.clear();
                self.store.metas()?.into_iter().map(|m| m.id).collect()
            } else {
                tracing::info!("vector index catching up from change {applied} to {last}");
                let mut ids: Vec<String> = self
                    .store
                    .changes_after(applied)?
                    .into_iter()
                    .map(|(_, id)| id)
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                ids
            };
        progress.start("vectors", ids.len() as u64);
        let result = ids.iter().try_for_each(|id| -> Result<()> {
            cancel.check()?;
            self.index_vectors(index, id)?;
            progress.advance(1, id);
            Ok(())
        });
        progress.finish();
        result?;
        index.set_applied(last);
        Ok(Some(last))
    }

    /// Puts document `id`'s stored vectors into `index`, or removes it
    /// from the index when the store no longer has it.
    fn index_vectors(&self, index: &mut VectorIndex, id: &str) -> Result<()> {
        match (self.store.get(id)?, self.store.vectors(id)?) {
            (Some(stored), Some(vectors)) => index.replace(&stored.to_document()?, vectors.get()?),
            (None, _) => {
                index.remove(id);
                Ok(())
            }
            (Some(_), None) => Err(Error::Invariant {
                doc: id.to_owned(),
                message: "vectors record missing".into(),
            }),
        }
    }

    /// `text`'s vector from the store's embedder, as searches use it.
    pub(crate) fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embedder.embed(&[text])?.pop().unwrap_or_default())
    }

    /// The `k` nodes or EDUs whose vectors are nearest to `text`'s (cosine
    /// similarity, best first), over the whole store. `exact` scores every
    /// stored vector instead of searching the graph: slow, but the truth
    /// the graph's recall is measured against.
    pub fn nearest(
        &self,
        text: &str,
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        let query = self.embed_query(text)?;
        let guard = self.vector_index()?;
        let Some(index) = guard.as_ref() else {
            return Ok(Vec::new());
        };
        if exact {
            index.search_exact(&self.store, target, &query, k, None)
        } else {
            index.search(&self.store, target, &query, k, None)
        }
    }

    /// Sets how many candidates a vector-graph search explores, at least
    /// (default [`crate::storage::vectors::EF_SEARCH`]), for this `Db`'s lifetime;
    /// loads the index if needed. See [`VectorIndex::set_search_effort`].
    pub fn set_vector_search_effort(&self, candidates: usize) -> Result<()> {
        self.with_vector_index(|index| {
            index.set_search_effort(candidates);
            Ok(())
        })
    }

    /// What the vector index holds (loading it if needed).
    pub fn vector_counts(&self) -> Result<VectorCounts> {
        Ok(self
            .vector_index()?
            .as_ref()
            .map(VectorIndex::counts)
            .unwrap_or_default())
    }

    /// Ingests `sources`: reads, decodes, analyses them on worker threads and
    /// writes each document in one atomic batch (replacing any document with
    /// its id). Inputs with bad content (invalid UTF-8, binary, empty) are
    /// reported in [`IngestReport::failures`] while the rest go on; storage
    /// failures stop the run. On cancellation, documents already written
    /// stay, and [`Error::Cancelled`] is returned.
    pub fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<IngestReport> {
        let started = Instant::now();
        let mut report = IngestReport::default();
        let mut fulltext = self.fulltext();
        self.recover_index(&mut fulltext)?;
        progress.start("ingest", sources.iter().map(Source::len_hint).sum());
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(sources.len())
            .max(1);
        let next = AtomicUsize::new(0);
        let mut written: Vec<String> = Vec::new();
        let outcome = std::thread::scope(|scope| -> Result<()> {
            let (sender, receiver) = std::sync::mpsc::sync_channel::<(
                usize,
                Result<(Document, DocVectors, Dag)>,
            )>(workers * 2);
            for _ in 0..workers {
                let sender = sender.clone();
                let next = &next;
                scope.spawn(move || {
                    while !cancel.is_cancelled() {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(source) = sources.get(index) else {
                            break;
                        };
                        let prepared =
                            prepare(source, options, self.embedder.as_ref(), self.device());
                        if sender.send((index, prepared)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(sender);
            for (index, prepared) in receiver {
                cancel.check()?;
                let source = &sources[index];
                match prepared {
                    Ok((doc, vectors, dag)) => {
                        self.store.put(&doc, &vectors, &dag)?;
                        self.index_put(&mut fulltext, &doc).inspect_err(|_| {
                            self.fulltext_behind.store(true, Ordering::SeqCst);
                        })?;
                        written.push(doc.meta.id.clone());
                        report.documents.push(doc.meta);
                    }
                    Err(error) if error.is_user_error() => {
                        report.failures.push(IngestFailure {
                            source: source.name(),
                            error,
                        });
                    }
                    Err(error) => return Err(error),
                }
                progress.advance(source.len_hint(), &source.id);
            }
            cancel.check()
        });
        progress.finish();
        if !written.is_empty() {
            self.finish_writes(fulltext)?;
        }
        outcome?;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Ingests one document from bytes under `id`; its content error, if
    /// any, is returned as the error.
    pub fn ingest_bytes(
        &self,
        id: &str,
        bytes: Vec<u8>,
        options: IngestOptions,
    ) -> Result<DocMeta> {
        crate::model::ids::validate_id(id)?;
        let source = Source {
            id: id.to_owned(),
            origin: Origin::Bytes(bytes),
        };
        let mut report = self.ingest(
            &[source],
            options,
            &crate::progress::NoProgress,
            &CancelToken::new(),
        )?;
        match (report.documents.pop(), report.failures.pop()) {
            (Some(meta), _) => Ok(meta),
            (None, Some(failure)) => Err(failure.error),
            (None, None) => Err(Error::Cancelled),
        }
    }

    /// Where batched arithmetic runs (see [`Device::detect`]).
    pub fn device(&self) -> &Device {
        self.device.get_or_init(Device::detect)
    }

    /// Document `id`'s weighted DAG (through the document cache).
    pub fn dag(&self, id: &str) -> Result<Dag> {
        Ok(self.cached_document(id)?.dag.clone())
    }

    /// The nodes at `level` (every level when `None`) of document `id`'s
    /// DAG with their text and out-edges, as SHOW DAG and `edudb dag` list them.
    pub fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<DagListing> {
        let loaded = self.cached_document(id)?;
        Ok(loaded.dag.listing(&loaded.document, level))
    }

    /// Document `id`'s stored EDU vectors (row-major) and their dimension.
    pub(crate) fn edu_vectors(&self, id: &str) -> Result<(Vec<f32>, usize)> {
        let stored = self
            .store
            .vectors(id)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
        let vectors = stored.get()?;
        Ok((
            vectors.edus.iter().map(|v| v.to_native()).collect(),
            vectors.dimension.to_native() as usize,
        ))
    }

    /// Rebuilds document `id`'s DAG with edge weights from attention a
    /// caller supplied for every one of its windows (see
    /// [`crate::ingest::dag::supplied`]) instead of computed attention, and writes
    /// it in one atomic batch. Nothing is written when the attention does
    /// not fit the DAG.
    pub fn reweight_dag(&self, id: &str, supplied: &SuppliedAttention) -> Result<()> {
        let fulltext = self.fulltext();
        let loaded = self.cached_document(id)?;
        let (edu_vectors, dimension) = self.edu_vectors(id)?;
        let source = supplied.source(self.device());
        let dag = build_dag(&loaded.document, &edu_vectors, dimension, &source)?;
        source.check_all_used(id)?;
        if dag.nodes != loaded.dag.nodes {
            return Err(Error::DagInput {
                what: format!("supplied attention for '{id}'"),
                message:
                    "the stored DAG was built with other settings; re-ingest the document first"
                        .into(),
            });
        }
        self.store
            .put_dag(id, &dag)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
        self.documents.invalidate(id);
        // The text did not change; the index only records the change as
        // applied, once it is durable.
        self.finish_writes(fulltext)
    }

    /// Every document's DAG as one graph (built from the store on first
    /// use, and again after any change); session turns are left out.
    pub fn dag_index(&self) -> Result<Arc<DagIndex>> {
        let mut cached = self
            .dag_index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seq = self.store.last_seq()?;
        if let Some(index) = cached.as_ref().filter(|index| index.seq == seq) {
            return Ok(index.clone());
        }
        let dimension = self.embedder.dimension();
        let metas = self.documents()?;
        let index = Arc::new(DagIndex::build(
            dimension,
            seq,
            metas.iter().map(|meta| -> Result<(String, Dag, Vec<f32>)> {
                let dag = self.read_dag(&meta.id, meta.edus)?;
                let (edus, _) = self.edu_vectors(&meta.id)?;
                Ok((meta.id.clone(), dag, edus))
            }),
        )?);
        *cached = Some(index.clone());
        Ok(index)
    }

    /// Propagates `batch` score vectors at once over the whole store's DAG
    /// ([`Db::dag_index`]; `seeds` node-major, `nodes × batch`, in its
    /// global node order) and returns each query's `k` best nodes.
    pub fn propagate_batch(
        &self,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        let index = self.dag_index()?;
        if seeds.len() != index.nodes.len() * batch {
            return Err(Error::DagInput {
                what: "propagation seeds".into(),
                message: format!(
                    "{} values given; the store's DAG has {} nodes, so {batch} queries need {}",
                    seeds.len(),
                    index.nodes.len(),
                    index.nodes.len() * batch
                ),
            });
        }
        let top = self
            .device()
            .propagate_top_k(&index.graph, seeds, batch, options, k)?;
        Ok(top
            .into_iter()
            .map(|hits| {
                hits.into_iter()
                    .map(|(global, score)| {
                        let node = index.nodes[global as usize];
                        DagHit {
                            doc: index.documents[node.doc as usize].clone(),
                            node: node.node,
                            level: node.level,
                            edus: node.span,
                            score,
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// [`Db::propagate_batch`] for text queries: each node's direct
    /// similarity is the cosine of its vector to the query's embedding.
    pub fn propagate_texts(
        &self,
        queries: &[&str],
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        let vectors = queries
            .iter()
            .map(|q| self.embed_query(q))
            .collect::<Result<Vec<_>>>()?;
        let seeds = self.dag_index()?.similarities(&vectors);
        self.propagate_batch(&seeds, queries.len(), options, k)
    }

    /// Metadata of every document, in id order. Session turns are
    /// documents too, but are not listed here ([`Db::sessions`] lists
    /// sessions; [`Db::document`] still reads a turn by its id).
    pub fn documents(&self) -> Result<Vec<DocMeta>> {
        let mut metas = self.store.metas()?;
        metas.retain(|m| !is_turn_id(&m.id));
        Ok(metas)
    }

    /// The stored document `id`, read in place.
    pub fn document(&self, id: &str) -> Result<StoredDoc> {
        self.store
            .get(id)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))
    }

    /// The structural tree of document `id`.
    pub fn tree(&self, id: &str) -> Result<Tree> {
        Ok(self.document(id)?.to_document()?.tree)
    }

    /// EDUs `first..=last` of document `id` with their text (all when `range` is `None`).
    pub fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Vec<EduText>> {
        let stored = self.document(id)?;
        let edus = stored.edus()?;
        let text = stored.text()?;
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
                    text: text[start as usize..end as usize].to_owned(),
                }
            })
            .collect())
    }

    /// BM25 search over EDU texts and section titles, best first.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let hits = self.reader.search(query, limit)?;
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
            let text = match hit.node {
                Some(node) => stored
                    .tree()?
                    .nodes
                    .get(node as usize)
                    .map_or_else(String::new, |n| n.title.to_string()),
                None => text[bytes[0] as usize..bytes[1] as usize].to_owned(),
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

    /// Deletes document `id` completely (records and index entries). A
    /// session's turn is refused ([`Error::TurnDocument`]): turns go with
    /// their session ([`Db::remove_session`]).
    pub fn remove(&self, id: &str) -> Result<()> {
        if let Some((session, turn)) = crate::model::ids::parse_turn_id(id) {
            return Err(Error::TurnDocument {
                doc: id.to_owned(),
                session: session.to_owned(),
                turn: turn.to_owned(),
            });
        }
        self.write(|| {
            self.store
                .remove(id)?
                .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
            Ok((
                (),
                Written {
                    put: Vec::new(),
                    removed: vec![id.to_owned()],
                },
            ))
        })
    }

    /// Runs `write`, which changes the store, as the store's only writer
    /// (holding the full-text index, as ingest does), makes the change
    /// durable, then brings the derived state along for what it
    /// [`Written`]: the document cache, the full-text index (committed at
    /// the store's latest change) and the loaded vector graph. Nothing
    /// derived is touched when `write` fails; a failure after the change is
    /// durable is [`Error::IndexBehind`], so the caller knows not to repeat
    /// it.
    pub(crate) fn write<R>(&self, write: impl FnOnce() -> Result<(R, Written)>) -> Result<R> {
        let mut fulltext = self.fulltext();
        self.recover_index(&mut fulltext)?;
        let (result, written) = write()?;
        // From here the change is in the store: any failure leaves the
        // full-text index behind until the next commit replays the log.
        let behind = |error: Error| {
            self.fulltext_behind.store(true, Ordering::SeqCst);
            error
        };
        self.store.flush().map_err(behind)?;
        for id in written
            .put
            .iter()
            .map(|d| &d.meta.id)
            .chain(&written.removed)
        {
            self.documents.invalidate(id);
        }
        let mut update_indexes = || -> Result<()> {
            for doc in &written.put {
                fulltext.replace(doc)?;
            }
            for id in &written.removed {
                fulltext.remove(id);
            }
            Ok(())
        };
        update_indexes()
            .and_then(|()| self.finish_writes(fulltext))
            .map_err(|source| Error::IndexBehind(Box::new(behind(source))))?;
        Ok(result)
    }

    /// After `doc` was written to the store: drops its cached copy and
    /// re-indexes its text (uncommitted).
    fn index_put(&self, fulltext: &mut FullText, doc: &Document) -> Result<()> {
        self.documents.invalidate(&doc.meta.id);
        fulltext.replace(doc)
    }

    /// Makes the store durable, then commits the full-text index at its
    /// latest change (never ahead of what is durable; first replaying the
    /// change log when an earlier change missed the index) and updates the
    /// loaded vector graph.
    fn finish_writes(&self, mut fulltext: std::sync::MutexGuard<'_, FullText>) -> Result<()> {
        self.store.flush()?;
        self.recover_index(&mut fulltext)?;
        fulltext.commit(self.store.last_seq()?)?;
        drop(fulltext);
        self.apply_to_vectors()
    }

    /// Analyses `text` as document `id` in `format`, embeds its nodes and
    /// EDUs and builds its DAG with the store's settings: everything a
    /// document's atomic batch holds. Ingest and session turns both go
    /// through here.
    pub(crate) fn prepare_text(
        &self,
        id: &str,
        text: String,
        format: crate::model::document::Format,
    ) -> Result<(Document, DocVectors, Dag)> {
        prepare_text(id, text, format, self.embedder.as_ref(), self.device())
    }

    /// Brings the vector index up to the store's latest change when it is
    /// loaded, by replaying the change log (not the caller's list of
    /// documents, so concurrent writers applying out of order, or a
    /// document stored but not indexed after a failure, are never skipped).
    /// An index that is not loaded is left alone: it catches up on its
    /// first use, so bulk ingest does not pay for graph inserts until a
    /// vector search or [`Db::reindex`] needs the graph. Persisting is
    /// deferred ([`VectorIndex::persist_due`]; at the latest when the `Db`
    /// is dropped): the change log is kept until it happens, so a crash
    /// before it only means a replay on the next open.
    fn apply_to_vectors(&self) -> Result<()> {
        let mut guard = self
            .vectors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(index) = guard.as_mut() else {
            return Ok(());
        };
        let replayed =
            self.replay_vectors(index, &crate::progress::NoProgress, &CancelToken::new());
        match replayed {
            Err(err) => {
                *guard = None;
                Err(err)
            }
            Ok(Some(last)) if index.persist_due() => {
                index.persist()?;
                self.trim_log(last)
            }
            Ok(_) => Ok(()),
        }
    }

    /// The change the vector graph reflects: the loaded one's, else the
    /// persisted one's (0 when never built).
    fn vector_graph_change(&self) -> u64 {
        let loaded = self
            .vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(VectorIndex::applied_seq);
        loaded.unwrap_or_else(|| VectorIndex::persisted_seq(&self.dir.join(VECTORS_DIR)))
    }

    /// Totals over the store.
    pub fn stats(&self) -> Result<Stats> {
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
        })
    }

    /// Rebuilds the full-text and vector indexes from the store.
    pub fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<()> {
        let mut fulltext = self.fulltext();
        self.recover_index(&mut fulltext)?;
        let metas = self.store.metas()?;
        let last = self.store.last_seq()?;
        progress.start("reindex", metas.len() as u64);
        fulltext.clear()?;
        let result: Result<()> = metas.iter().try_for_each(|meta| {
            cancel.check()?;
            if let Some(stored) = self.store.get(&meta.id)? {
                fulltext.replace(&stored.to_document()?)?;
            }
            progress.advance(1, &meta.id);
            Ok(())
        });
        progress.finish();
        result?;
        fulltext.commit(last)?;
        drop(fulltext);
        let mut guard = self
            .vectors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut index = match guard.take() {
            Some(index) => index,
            None => self.open_vector_index(),
        };
        index.clear();
        // Put back only when whole: a part-built index would answer
        // searches with documents missing.
        self.catch_up_vectors(&mut index, progress, cancel)?;
        *guard = Some(index);
        Ok(())
    }

    /// Validates every stored document, its stored vectors, every session's
    /// dialogue against its turn documents, and that the full-text index is
    /// caught up with the store. The vector graph is reported, not built.
    pub fn check(&self) -> Result<CheckReport> {
        let documents = self.store.check()?;
        self.check_session_documents()?;
        let fulltext = self.fulltext();
        let (applied, last) = (fulltext.applied_seq()?, self.store.last_seq()?);
        if applied != last {
            return Err(Error::Invariant {
                doc: String::new(),
                message: format!("full-text index applied change {applied}, store is at {last}"),
            });
        }
        drop(fulltext);
        let metas = self.store.metas()?;
        Ok(CheckReport {
            documents,
            sessions: self.store.dialogues()?.len(),
            fulltext_entries: self.reader.entries(),
            vectors: VectorCounts {
                nodes: metas.iter().map(|m| m.nodes as usize).sum(),
                edus: metas.iter().map(|m| m.edus as usize).sum(),
                dead: 0,
            },
            vector_graph_change: self.vector_graph_change(),
            last_change: last,
        })
    }
}

impl Drop for Db {
    /// Persists vector-index changes not yet written (see
    /// [`Db::apply_to_vectors`]); a failure only costs a replay next time.
    fn drop(&mut self) {
        let vectors = self
            .vectors
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(Err(err)) = vectors
            .as_mut()
            .filter(|index| index.is_dirty())
            .map(VectorIndex::persist)
        {
            tracing::warn!("vector index not persisted ({err}); it will catch up on open");
        }
    }
}

/// The embedder for `store`: the one recorded in it, or `given` (which
/// must have the recorded identity); a new store records `given` or the
/// default.
fn store_embedder(
    store: &Store,
    given: Option<&EmbedderConfig>,
) -> Result<(Box<dyn Embedder>, EmbedderConfig)> {
    let recorded: Option<EmbedderConfig> = store
        .embedder_config()?
        .map(|json| {
            serde_json::from_str(&json).map_err(|e| Error::Corrupt {
                key: "embedder".into(),
                message: e.to_string(),
            })
        })
        .transpose()?;
    let mut config = given.or(recorded.as_ref()).cloned().unwrap_or_default();
    let embedder = config.build()?;
    if let EmbedderConfig::Http(http) = &mut config {
        http.dimension = Some(embedder.dimension());
    }
    match (recorded, given) {
        (None, _) => {
            let json = serde_json::to_string(&config).map_err(|e| Error::Storage(e.to_string()))?;
            store.set_embedder_config(&json)?;
        }
        (Some(recorded), Some(_)) => {
            let stored = recorded.build()?.identity();
            if stored != embedder.identity() {
                return Err(Error::EmbedderMismatch {
                    stored,
                    given: embedder.identity(),
                });
            }
        }
        (Some(_), None) => {}
    }
    Ok((embedder, config))
}
