//! [`Served`]: what a server holds open, one store or a shard set, and
//! the few things the server asks of it beyond the [`Api`] calls: where it
//! is, an ingest's typed report (for a job's progress), whether it was
//! abandoned, and a vacuum that gives it back open.

use std::path::Path;

use super::api::Api;
use crate::db::Db;
use crate::engine::OpenOptions;
use crate::engine::vacuum::VacuumReport;
use crate::engine::write::IngestReport;
use crate::error::Result;
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::progress::{CancelToken, Progress};
use crate::shards::ShardSet;

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
        match self {
            Served::Store(db) => db.path(),
            Served::Set(set) => set.path(),
        }
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
        match self {
            Served::Store(db) => db.is_abandoned(),
            Served::Set(set) => set.shards().iter().any(Db::is_abandoned),
        }
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
