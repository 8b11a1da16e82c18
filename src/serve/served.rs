//! [`Served`]: what a server (or a command line) holds open, one store or
//! a shard set, and the typed calls made on either beyond the [`Api`]'s
//! JSON answers: where it is, an ingest's report (for a job's progress),
//! whether it was abandoned, its counts, check, rebuilt indexes and backup,
//! searches, statements and questions, and a vacuum that gives it back
//! open.

use std::path::Path;

use super::api::Api;
use crate::ask::{AskOptions, AskResult};
use crate::db::Db;
use crate::engine::OpenOptions;
use crate::engine::backup::BackupReport;
use crate::engine::reads::{CheckReport, Damaged, SearchHit, Stats};
use crate::engine::vacuum::VacuumReport;
use crate::engine::write::IngestReport;
use crate::error::Result;
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::progress::{CancelToken, Progress};
use crate::query::{Params, QueryResult};
use crate::shards::ShardSet;
use crate::storage::vectors::VectorCounts;

/// One store, or a shard set (its stores as one), held open by a server.
#[derive(Debug)]
pub enum Served {
    /// One store.
    Store(Box<Db>),
    /// A shard set.
    Set(ShardSet),
}

impl Served {
    /// Opens the shard set at `dir` when it is one, else the store there,
    /// with `options`.
    pub fn open(dir: impl AsRef<Path>, options: &OpenOptions) -> Result<Served> {
        let dir = dir.as_ref();
        if ShardSet::is_shard_set(dir) {
            ShardSet::open(dir, options).map(Served::Set)
        } else {
            Db::open_with(dir, options).map(|db| Served::Store(Box::new(db)))
        }
    }

    /// Its directory (where the server's socket goes).
    pub fn path(&self) -> &Path {
        self.either(Db::path, ShardSet::path)
    }

    /// Its calls.
    pub fn api(&self) -> &(dyn Api + Send + Sync) {
        match self {
            Served::Store(db) => &**db,
            Served::Set(set) => set,
        }
    }

    /// Whether a failure in the file system abandoned the store (or one of
    /// the set's): every later call would fail.
    pub fn is_abandoned(&self) -> bool {
        self.either(Db::is_abandoned, |set| {
            set.shards().iter().any(Db::is_abandoned)
        })
    }

    /// `store` on one store, `set` on a shard set.
    fn either<'s, T>(
        &'s self,
        store: impl FnOnce(&'s Db) -> T,
        set: impl FnOnce(&'s ShardSet) -> T,
    ) -> T {
        match self {
            Served::Store(db) => store(db),
            Served::Set(shards) => set(shards),
        }
    }

    /// The store that holds document `doc` (a shard set's store for it).
    pub fn holding(&self, doc: &str) -> &Db {
        self.either(|db| db, |set| set.shard_for(doc))
    }

    /// Its counts and sizes ([`Db::stats`], [`ShardSet::stats`]).
    pub fn stats(&self) -> Result<Stats> {
        self.either(Db::stats, ShardSet::stats)
    }

    /// The vectors it stores ([`Db::vector_counts`],
    /// [`ShardSet::vector_counts`]).
    pub fn vector_counts(&self) -> Result<VectorCounts> {
        self.either(Db::vector_counts, ShardSet::vector_counts)
    }

    /// Every record and index validated ([`Db::check`], [`ShardSet::check`]).
    pub fn check(&self) -> Result<CheckReport> {
        self.either(Db::check, ShardSet::check)
    }

    /// Its derived indexes rebuilt, the damaged documents left out
    /// ([`Db::reindex`], [`ShardSet::reindex`]).
    pub fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Vec<Damaged>> {
        self.either(
            |db| db.reindex(progress, cancel),
            |set| set.reindex(progress, cancel),
        )
    }

    /// A consistent copy of it written to `to` ([`Db::backup`],
    /// [`ShardSet::backup`]: a shard set's copy is a shard set).
    pub fn backup(
        &self,
        to: &Path,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        self.either(
            |db| db.backup(to, progress, cancel),
            |set| set.backup(to, progress, cancel),
        )
    }

    /// BM25 search in tantivy query syntax, best first ([`Db::search`],
    /// [`ShardSet::search`]).
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        self.either(|db| db.search(query, limit), |set| set.search(query, limit))
    }

    /// Parses and runs a statement ([`Db::query`], [`ShardSet::query`]).
    pub fn query(&self, statement: &str, params: &Params) -> Result<QueryResult> {
        self.either(
            |db| db.query(statement, params),
            |set| set.query(statement, params),
        )
    }

    /// Answers `question` from retrieved evidence ([`Db::ask`],
    /// [`ShardSet::ask`]).
    pub fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<AskResult> {
        self.either(
            |db| db.ask(question, options, progress, cancel),
            |set| set.ask(question, options, progress, cancel),
        )
    }

    /// Ingests `sources` as [`Db::ingest`] (or [`ShardSet::ingest`]) does.
    pub fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<IngestReport> {
        match self {
            Served::Store(db) => db.ingest(sources, options, progress, cancel),
            Served::Set(set) => set.ingest(sources, options, progress, cancel),
        }
    }

    /// Vacuums it while held open and gives it back open, as
    /// [`Db::vacuum_reopened`] (or [`ShardSet::vacuum_reopened`]) does.
    pub fn vacuum_reopened(
        self,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> (Result<VacuumReport>, Result<Served>) {
        match self {
            Served::Store(db) => {
                let (report, reopened) = db.vacuum_reopened(progress, cancel);
                (report, reopened.map(|db| Served::Store(Box::new(db))))
            }
            Served::Set(set) => {
                let (report, reopened) = set.vacuum_reopened(progress, cancel);
                (report, reopened.map(Served::Set))
            }
        }
    }
}
