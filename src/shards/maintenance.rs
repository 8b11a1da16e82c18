//! A shard set's upkeep: its counts, its check, its rebuilt indexes, its
//! backup and its vacuum, each done store by store and added up.

use std::path::Path;
use std::time::Instant;

use super::manifest::{Manifest, write_manifest};
use super::{ShardSet, make_new_directory, store_names};
use crate::db::Db;
use crate::engine::backup::BackupReport;
use crate::engine::reads::{CheckReport, Damaged, Stats};
use crate::engine::vacuum::VacuumReport;
use crate::error::{Error, Result};
use crate::progress::{CancelToken, Progress, in_parts};
use crate::storage::vectors::VectorCounts;

impl ShardSet {
    /// Totals over every store (see [`Db::stats`]); `last_change` is the
    /// sum of the stores' change numbers, so it moves whenever any store
    /// changes.
    pub fn stats(&self) -> Result<Stats> {
        let mut total: Option<Stats> = None;
        for db in &self.shards {
            let stats = db.stats()?;
            match &mut total {
                None => total = Some(stats),
                Some(total) => {
                    total.documents += stats.documents;
                    total.sessions += stats.sessions;
                    total.turns += stats.turns;
                    total.edus += stats.edus;
                    total.nodes += stats.nodes;
                    total.tokens += stats.tokens;
                    total.text_bytes += stats.text_bytes;
                    total.store_bytes += stats.store_bytes;
                    total.fulltext_entries += stats.fulltext_entries;
                    total.last_change += stats.last_change;
                }
            }
        }
        Ok(total.expect("a shard set has at least one store"))
    }

    /// Vectors stored over every store (see [`Db::vector_counts`]).
    pub fn vector_counts(&self) -> Result<VectorCounts> {
        let mut total = VectorCounts::default();
        for db in &self.shards {
            add_vectors(&mut total, &db.vector_counts()?);
        }
        Ok(total)
    }

    /// Checks every store (see [`Db::check`]): the counts summed, every
    /// damaged document named (ids are unique over the set); change numbers
    /// summed as [`ShardSet::stats`] sums them.
    pub fn check(&self) -> Result<CheckReport> {
        let mut total: Option<CheckReport> = None;
        for db in &self.shards {
            let report = db.check()?;
            match &mut total {
                None => total = Some(report),
                Some(total) => {
                    total.documents += report.documents;
                    total.sessions += report.sessions;
                    total.fulltext_entries += report.fulltext_entries;
                    add_vectors(&mut total.vectors, &report.vectors);
                    total.vector_graph_change += report.vector_graph_change;
                    total.last_change += report.last_change;
                    total.damaged.extend(report.damaged);
                }
            }
        }
        Ok(total.expect("a shard set has at least one store"))
    }

    /// Rebuilds every store's derived indexes in turn (see
    /// [`Db::reindex`], whose two passes, the full text and the vector
    /// graph, each store reports as its own); the documents left out as
    /// damaged, over all.
    pub fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Vec<Damaged>> {
        let mut skipped = Vec::new();
        for db in &self.shards {
            skipped.extend(db.reindex(progress, cancel)?);
        }
        Ok(skipped)
    }

    /// Writes a copy of the set to `to` (absent or empty): each store
    /// backed up as [`Db::backup`] does, while others keep using it, into
    /// `to/shard-NNN`, and the manifest last, so `to` is a shard set only
    /// once every store's copy is whole. Each store's copy is consistent
    /// in itself; a write batch spread over several stores while the
    /// backup runs may be in some stores' copies and not others'.
    pub fn backup(
        &self,
        to: impl AsRef<Path>,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        let started = Instant::now();
        let to = to.as_ref();
        make_new_directory(to)?;
        let names = store_names(self.shards.len());
        let mut total = BackupReport {
            path: to.to_owned(),
            ..BackupReport::default()
        };
        in_parts(progress, "backup", self.stats()?.documents, |progress| {
            for (db, name) in self.shards.iter().zip(&names) {
                let copy = db.backup(to.join(name), progress, cancel)?;
                total.documents += copy.documents;
                total.sessions += copy.sessions;
                total.change += copy.change;
                total.caught_up += copy.caught_up;
                total.bytes += copy.bytes;
                total.writers_held_seconds += copy.writers_held_seconds;
                total.skipped.extend(copy.skipped);
            }
            Ok::<_, Error>(())
        })?;
        write_manifest(to, &Manifest::new(names))?;
        total.seconds = started.elapsed().as_secs_f64();
        Ok(total)
    }

    /// Vacuums every store in turn as [`Db::vacuum_reopened`] does, each
    /// held open throughout, and gives the set back open: the reports
    /// added up, or the first failure (the stores after it not vacuumed).
    /// A store that could not be opened again leaves no set (the others
    /// are closed): the second result says why.
    pub fn vacuum_reopened(
        self,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> (Result<VacuumReport>, Result<ShardSet>) {
        let started = Instant::now();
        let ShardSet { dir, shards } = self;
        let mut total = VacuumReport::default();
        let mut failed = None;
        let mut reopened: Vec<Db> = Vec::with_capacity(shards.len());
        for db in shards {
            if failed.is_some() {
                reopened.push(db);
                continue;
            }
            let (report, db) = db.vacuum_reopened(progress, cancel);
            match report {
                Ok(report) => {
                    total.bytes_before += report.bytes_before;
                    total.bytes_after += report.bytes_after;
                    total.documents += report.documents;
                    total.sessions += report.sessions;
                }
                Err(err) => failed = Some(err),
            }
            match db {
                Ok(db) => reopened.push(db),
                Err(err) => {
                    total.seconds = started.elapsed().as_secs_f64();
                    return (failed.map_or(Ok(total), Err), Err(err));
                }
            }
        }
        total.seconds = started.elapsed().as_secs_f64();
        let set = ShardSet {
            dir,
            shards: reopened,
        };
        (failed.map_or(Ok(total), Err), Ok(set))
    }
}

/// Adds `more` to `total`.
fn add_vectors(total: &mut VectorCounts, more: &VectorCounts) {
    total.nodes += more.nodes;
    total.edus += more.edus;
    total.dead += more.dead;
}
