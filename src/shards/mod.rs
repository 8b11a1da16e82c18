//! [`ShardSet`]: one store made of several. A corpus too large for one
//! machine's build shards by document (each document has its own tree,
//! DAG and vectors), so a shard set is a directory holding a small
//! manifest (`shards.json`) that names its stores, in order; each document
//! lives in the store its id hashes to (CRC-32 of the id's bytes, modulo
//! the number of stores: stable across versions and machines, so any
//! writer, a Ray task's included, places a document alike).
//!
//! Writes go to the document's store; a batch is atomic within each store
//! it touches, not across them. Queries run over all the stores as one
//! ([`crate::query`]'s corpus): BM25 scored with statistics summed over the
//! stores, vector searches merged, every later stage on the documents
//! wherever they lie, so a statement returns the same spans from a shard
//! set as from one store holding the same documents. Sessions are a single
//! store's (a session's turns must stay together); a shard set holds
//! documents only.

use std::path::{Path, PathBuf};

use crate::ask::{AskOptions, AskResult, Evidence};
use crate::db::Db;
use crate::engine::OpenOptions;
use crate::engine::reads::SearchHit;
use crate::engine::write::IngestReport;
use crate::error::{Error, Result, io_error};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::prepared::PreparedDocument;
use crate::ingest::sources::Source;
use crate::model::document::{DocMeta, Document};
use crate::progress::{CancelToken, Progress, in_parts};
use crate::query::corpus::Corpus;
use crate::query::{Params, Query, QueryResult};

mod maintenance;
mod manifest;

pub use manifest::{MANIFEST_FILE, MAX_SHARDS};
use manifest::{Manifest, read_manifest, write_manifest};

/// Which of `shards` stores holds the document `id`: CRC-32 (IEEE) of the
/// id's UTF-8 bytes, modulo `shards`. Stable: a shard set's placement
/// never changes under it.
pub fn shard_of(id: &str, shards: usize) -> usize {
    (crc32fast::hash(id.as_bytes()) as usize) % shards.max(1)
}

/// An open shard set: its stores, each open.
#[derive(Debug)]
pub struct ShardSet {
    dir: PathBuf,
    shards: Vec<Db>,
}

impl ShardSet {
    /// True when `dir` is a shard set (it holds a manifest).
    pub fn is_shard_set(dir: impl AsRef<Path>) -> bool {
        dir.as_ref().join(MANIFEST_FILE).is_file()
    }

    /// Creates a shard set of `count` new stores at `dir` (absent or
    /// empty), `shard-000`, `shard-001`, … inside it, each created with
    /// `options`. The manifest is written last, so a stop before it leaves
    /// no shard set.
    pub fn create(dir: impl AsRef<Path>, count: usize, options: &OpenOptions) -> Result<ShardSet> {
        let dir = dir.as_ref();
        if !(1..=MAX_SHARDS).contains(&count) {
            return Err(Error::Usage(format!(
                "a shard set has 1 to {MAX_SHARDS} stores, not {count}"
            )));
        }
        make_new_directory(dir)?;
        let names = store_names(count);
        let options = OpenOptions {
            create: true,
            ..options.clone()
        };
        let mut shards = Vec::with_capacity(count);
        for name in &names {
            shards.push(Db::open_with(dir.join(name), &options)?);
        }
        write_manifest(dir, &Manifest::new(names))?;
        Ok(ShardSet {
            dir: dir.to_owned(),
            shards,
        })
    }

    /// Opens the shard set at `dir`, each store with `options` (never
    /// created: a store the manifest names must be there); the stores must
    /// share one embedder.
    pub fn open(dir: impl AsRef<Path>, options: &OpenOptions) -> Result<ShardSet> {
        let dir = dir.as_ref();
        let manifest = read_manifest(dir)?;
        let options = OpenOptions {
            create: false,
            ..options.clone()
        };
        let mut shards: Vec<Db> = Vec::with_capacity(manifest.shards.len());
        for path in &manifest.shards {
            let db = Db::open_with(dir.join(path), &options)?;
            if let Some(first) = shards.first()
                && first.embedder().identity() != db.embedder().identity()
            {
                return Err(Error::BadShardSet {
                    path: dir.to_owned(),
                    message: format!(
                        "its stores embed differently ({} has {}, {} has {})",
                        first.path().display(),
                        first.embedder().identity(),
                        db.path().display(),
                        db.embedder().identity()
                    ),
                });
            }
            shards.push(db);
        }
        Ok(ShardSet {
            dir: dir.to_owned(),
            shards,
        })
    }

    /// Where the store that holds (or would hold) document `id` of the
    /// shard set at `dir` is, read from its manifest (no store opened).
    pub fn store_for(dir: impl AsRef<Path>, id: &str) -> Result<PathBuf> {
        let mut stores = ShardSet::store_paths(dir)?;
        let at = shard_of(id, stores.len());
        Ok(stores.swap_remove(at))
    }

    /// Where the stores of the shard set at `dir` are, in placement order,
    /// read from its manifest (no store opened): what a writer of one store
    /// (a distributed ingest's) opens.
    pub fn store_paths(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        let manifest = read_manifest(dir)?;
        Ok(manifest.shards.iter().map(|path| dir.join(path)).collect())
    }

    /// The set's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The stores, in placement order.
    pub fn shards(&self) -> &[Db] {
        &self.shards
    }

    /// The index of the store that holds (or would hold) document `id`.
    pub fn shard_of(&self, id: &str) -> usize {
        shard_of(id, self.shards.len())
    }

    /// The store that holds (or would hold) document `id`.
    pub fn shard_for(&self, id: &str) -> &Db {
        &self.shards[self.shard_of(id)]
    }

    /// Ingests `sources`, each into its store (see [`Db::ingest`]); the
    /// reports of the stores together. Each store's part is written as
    /// that store's ingest writes it; `progress` sees one ingest of them all.
    pub fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<IngestReport> {
        let parts = self.by_store(sources.iter().cloned(), |source| &source.id);
        let total = sources.iter().map(Source::len_hint).sum();
        in_parts(progress, "ingest", total, |progress| {
            let mut report = IngestReport::default();
            for (db, part) in self.shards.iter().zip(parts) {
                if part.is_empty() {
                    continue;
                }
                let written = db.ingest(&part, options.clone(), progress, cancel)?;
                report.documents.extend(written.documents);
                report.failures.extend(written.failures);
                report.elapsed += written.elapsed;
                report.llm.add(&written.llm);
            }
            Ok(report)
        })
    }

    /// Writes prepared documents, each into its store: one atomic batch
    /// per store touched ([`Db::write_prepared`]), not one over all. The
    /// metadata of each, in the order given.
    pub fn write_prepared(&self, docs: Vec<PreparedDocument>) -> Result<Vec<DocMeta>> {
        let count = docs.len();
        let parts = self.by_store(docs.into_iter().enumerate(), |(_, doc)| doc.id());
        let mut metas: Vec<Option<DocMeta>> = vec![None; count];
        for (db, part) in self.shards.iter().zip(parts) {
            if part.is_empty() {
                continue;
            }
            let (places, docs): (Vec<usize>, Vec<PreparedDocument>) = part.into_iter().unzip();
            for (at, meta) in places.into_iter().zip(db.write_prepared(docs)?) {
                metas[at] = Some(meta);
            }
        }
        Ok(metas.into_iter().flatten().collect())
    }

    /// Deletes document `id` from its store ([`Db::remove`]).
    pub fn remove(&self, id: &str) -> Result<()> {
        self.shard_for(id).remove(id)
    }

    /// Every document's metadata, over all the stores, by id.
    pub fn documents(&self) -> Result<Vec<DocMeta>> {
        self.corpus(|corpus| corpus.documents())
    }

    /// The documents whose metadata meets `condition` (a WHERE condition,
    /// as [`Db::documents_where`] takes it), over all the stores, by id.
    pub fn documents_where(&self, condition: &str) -> Result<Vec<DocMeta>> {
        let parsed = crate::query::parser::parse_condition(condition)?;
        self.corpus(|corpus| {
            let ids = crate::query::plan::documents_where(condition, &parsed, corpus)?;
            let mut metas = corpus.documents()?;
            metas.retain(|meta| ids.binary_search(&meta.id).is_ok());
            Ok(metas)
        })
    }

    /// Document `id`, whole, from its store.
    pub fn document(&self, id: &str) -> Result<Document> {
        self.shard_for(id).document(id)
    }

    /// Parses and runs a statement over all the stores as one (see
    /// [`Db::query`]).
    pub fn query(&self, statement: &str, params: &Params) -> Result<QueryResult> {
        self.run(&Query::parse(statement)?, params)
    }

    /// Runs a parsed statement over all the stores as one.
    pub fn run(&self, query: &Query, params: &Params) -> Result<QueryResult> {
        self.corpus(|corpus| query.run_on(corpus, params))
    }

    /// BM25 search in tantivy query syntax over every store's EDU texts
    /// and section titles, scored with statistics over all of them, best
    /// first (see [`Db::search`]).
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let ranked = self.corpus(|corpus| corpus.fulltext().search(query, limit))?;
        let mut hits = Vec::new();
        for (db, part) in self
            .shards
            .iter()
            .zip(self.by_store(ranked, |hit| &hit.doc))
        {
            hits.extend(db.engine().search_hits(part)?);
        }
        hits.sort_by(|a, b| {
            (b.score.total_cmp(&a.score))
                .then_with(|| (&a.doc, a.node, a.edus.first).cmp(&(&b.doc, b.node, b.edus.first)))
        });
        Ok(hits)
    }

    /// Answers `question` from every store's documents with the chat model
    /// the stores were opened with, as [`Db::ask`] does from one.
    pub fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<AskResult> {
        self.corpus(|corpus| crate::ask::run::ask(corpus, question, options, progress, cancel))
    }

    /// The evidence [`ShardSet::ask`] would read, best first.
    pub fn evidence(&self, question: &str, options: &AskOptions) -> Result<Evidence> {
        self.corpus(|corpus| {
            Evidence::retrieve(corpus, question, options.statement(), options.budget)
        })
    }

    /// `items` split by the store that holds each (its id by `id_of`): one
    /// part per store, in placement order, each in the order given.
    fn by_store<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        id_of: impl Fn(&T) -> &str,
    ) -> Vec<Vec<T>> {
        let mut parts: Vec<Vec<T>> = (0..self.shards.len()).map(|_| Vec::new()).collect();
        for item in items {
            let at = self.shard_of(id_of(&item));
            parts[at].push(item);
        }
        parts
    }

    /// `work` on the stores as one corpus.
    fn corpus<T>(&self, work: impl FnOnce(&Corpus<'_>) -> Result<T>) -> Result<T> {
        let shards = self.shards.len();
        let place = move |id: &str| shard_of(id, shards);
        let engines = self.shards.iter().map(Db::engine).collect();
        work(&Corpus::sharded(engines, &place))
    }
}

/// The names of a new set's `count` stores, inside its directory.
fn store_names(count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|i| PathBuf::from(format!("shard-{i:03}")))
        .collect()
}

/// Makes `dir` for a new shard set (or a copy of one): absent or empty,
/// else refused as in use.
fn make_new_directory(dir: &Path) -> Result<()> {
    let in_use = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if in_use || (dir.exists() && !dir.is_dir()) {
        return Err(Error::Usage(format!(
            "{} is in use: a shard set is made in a new or empty directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(io_error(dir))
}
