//! Online backup: a consistent copy of an open store, made while others
//! keep reading and writing it.
//!
//! The copy is a new store built as salvage builds one (each document and
//! session read whole and written, its indexes built as it is written), in
//! two passes. The first copies everything without holding up writers; the
//! documents and sessions written meanwhile are then copied again while
//! the store's writer is held, from the change log since the first pass
//! began (kept untrimmed until then), together with every document's
//! metadata (whose changes the log does not record). So the copy holds the
//! store exactly as it was at that second moment, and writers wait only
//! for the second pass. The copy is built under `DEST.partial` and renamed
//! to `DEST` once whole, so a backup stopped at any moment leaves no
//! `DEST` that looks like a copy.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;

use crate::engine::leftover::{remove_leftover, remove_store, sibling};
use crate::engine::reads::Damaged;
use crate::engine::salvage::{Copied, require_new};
use crate::engine::write::Written;
use crate::engine::{Engine, OpenOptions, io_error};
use crate::error::{Error, Result};
use crate::model::ids::parse_turn_id;
use crate::progress::{CancelToken, Progress};

/// What [`crate::Db::backup`] copied.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BackupReport {
    /// Where the copy is.
    pub path: PathBuf,
    /// Documents copied (session turns not counted).
    pub documents: usize,
    /// Sessions copied, each with every turn.
    pub sessions: usize,
    /// The store's change the copy holds: every write up to it, none after.
    pub change: u64,
    /// Documents and sessions changed while the first pass ran, copied
    /// again with the writer held.
    pub caught_up: usize,
    /// The copy's size on disk, in bytes.
    pub bytes: u64,
    /// Seconds the whole backup took...
    pub seconds: f64,
    /// ...and of them, seconds writers waited (the second pass).
    pub writers_held_seconds: f64,
    /// What did not read whole and was left out, with why (a document id,
    /// or `session ID`); empty for a sound store.
    pub skipped: Vec<Damaged>,
}

impl Engine {
    /// The work of [`crate::Db::backup`].
    pub(crate) fn backup(
        &self,
        to: &Path,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        let started = Instant::now();
        require_new(to)?;
        let partial = sibling(to, ".partial");
        let store = self.dir.canonicalize().map_err(io_error(&self.dir))?;
        for path in [to, partial.as_path()] {
            let resolved = resolved(path)?;
            if resolved.starts_with(&store) || store.starts_with(&resolved) {
                return Err(Error::Usage(format!(
                    "a backup goes outside the store: {} is inside {} or holds it",
                    path.display(),
                    self.dir.display()
                )));
            }
        }
        remove_leftover(&partial)?;
        let target = Engine::open(
            &partial,
            &OpenOptions {
                create: true,
                embedder: Some(self.embedder_config().clone()),
                ..Default::default()
            },
        )?;
        let copied = self.hold_log_from().and_then(|first| {
            // Released however the copy ends, a panic included.
            let _held = LogHeld(self);
            self.copy_at_one_moment(&target, first, progress, cancel)
        });
        drop(target);
        let renamed = copied.and_then(|report| {
            std::fs::rename(&partial, to).map_err(io_error(to))?;
            Ok(report)
        });
        let mut report = match renamed {
            Ok(report) => report,
            Err(err) => {
                let _ = remove_store(&partial);
                return Err(err);
            }
        };
        report.path = to.to_owned();
        report.bytes = directory_bytes(to);
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Both passes into `target`, the log held from change `first`.
    fn copy_at_one_moment(
        &self,
        target: &Engine,
        first: u64,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        let (mut report, sessions_read) = self.first_pass(target, progress, cancel)?;
        cancel.check()?;
        let held = Instant::now();
        let (change, caught_up) = self.write(|| {
            let caught = self.catch_up_copy(target, first, &sessions_read, &mut report)?;
            Ok((caught, Written::default()))
        })?;
        report.writers_held_seconds = held.elapsed().as_secs_f64();
        report.change = change;
        report.caught_up = caught_up;
        Ok(report)
    }

    /// Keeps the change log from being trimmed past its latest change, so
    /// the second pass can read every change after it; returns that change.
    fn hold_log_from(&self) -> Result<u64> {
        // Under the writer, so that no trim runs between reading the
        // latest change and holding the log there.
        self.write(|| {
            let last = self.store().last_seq()?;
            (self.log_floor)
                .compare_exchange(u64::MAX, last, Ordering::SeqCst, Ordering::SeqCst)
                .map_err(|_| {
                    Error::Usage(
                        "another backup of this store is running: wait for it to end".into(),
                    )
                })?;
            Ok((last, Written::default()))
        })
    }

    /// Copies every document and session into `target` as they read now,
    /// without holding writers; what a write changes meanwhile is copied
    /// again by [`Engine::catch_up_copy`]. Also gives the store's latest
    /// change as each session began to be read: its copy holds every
    /// change up to that one.
    fn first_pass(
        &self,
        target: &Engine,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<(BackupReport, HashMap<String, u64>)> {
        let documents: Vec<String> = (self.store().ids()?.into_iter())
            .filter(|id| parse_turn_id(id).is_none())
            .collect();
        let sessions = self.store().session_ids()?;
        let mut report = BackupReport::default();
        let costs = costs_or_skipped(self, &mut report);
        let mut sessions_read = HashMap::new();
        progress.start("backup", (documents.len() + sessions.len()) as u64);
        let result = (|| {
            for id in &documents {
                cancel.check()?;
                let copied = self.copy_document(target, id, &costs)?;
                note(&mut report, id, copied);
                progress.advance(1, id);
            }
            for id in &sessions {
                cancel.check()?;
                sessions_read.insert(id.clone(), self.store().last_seq()?);
                let copied = self.copy_session(target, id)?;
                note(&mut report, &format!("session {id}"), copied);
                progress.advance(1, id);
            }
            Ok(())
        })();
        progress.finish();
        result.map(|()| (report, sessions_read))
    }

    /// With the writer held: copies again into `target` every document and
    /// session changed after change `first` (first removing its earlier
    /// copy, so what is gone here is gone there; a session that only gained
    /// turns since `sessions_read` says it was read gets just those), and
    /// every document's metadata; returns the store's latest change and how
    /// many were copied again. The counts in `report` become the copy's.
    fn catch_up_copy(
        &self,
        target: &Engine,
        first: u64,
        sessions_read: &HashMap<String, u64>,
        report: &mut BackupReport,
    ) -> Result<(u64, usize)> {
        let last = self.store().last_seq()?;
        if self.store().trimmed_seq()? > first {
            return Err(Error::Invariant {
                doc: "the change log".into(),
                message: format!("trimmed past change {first}, where a backup held it"),
            });
        }
        let mut documents = BTreeSet::new();
        // Each changed session, with its turn documents written after it
        // was read (its copy holds those written before).
        let mut sessions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (change, id) in self.store().changes_after(first)? {
            match parse_turn_id(&id) {
                Some((session, _)) => {
                    let read = sessions_read.get(session).copied().unwrap_or(first);
                    let changed = sessions.entry(session.to_owned()).or_default();
                    if change > read {
                        changed.insert(id);
                    }
                }
                None => {
                    documents.insert(id);
                }
            }
        }
        report.skipped.retain(|skipped| {
            let session = skipped.doc.strip_prefix("session ");
            !documents.contains(&skipped.doc) && !session.is_some_and(|s| sessions.contains_key(s))
        });
        let costs = costs_or_skipped(self, report);
        for id in &documents {
            if target.store().contains(id)? {
                target.write(|| {
                    target.store().remove(id)?;
                    Ok(((), removed(vec![id.clone()])))
                })?;
            }
            let copied = self.copy_document(target, id, &costs)?;
            note(report, id, copied);
        }
        let caught_up = documents.len() + sessions.len();
        // The removal of a session whose every turn was forgotten is not in
        // the change log: a session the copy has and the store no longer
        // does is refreshed too (so removed).
        let kept: BTreeSet<String> = self.store().session_ids()?.into_iter().collect();
        for gone in (target.store().session_ids()?.into_iter()).filter(|id| !kept.contains(id)) {
            sessions.entry(gone).or_default();
        }
        for (id, changed) in &sessions {
            // A session that only gained turns (an agent's, most often)
            // gets just those, so writers do not wait while a long one is
            // copied again.
            if self.copy_session_tail(target, id, changed)? {
                continue;
            }
            if target.store().dialogue(id)?.is_some() {
                target.write(|| {
                    let turns = target.store().remove_session(id)?.unwrap_or_default();
                    Ok(((), removed(turns)))
                })?;
            }
            let copied = self.copy_session(target, id)?;
            note(report, &format!("session {id}"), copied);
        }
        // Nor are metadata changed in place.
        let mut given = HashMap::new();
        for (id, metadata) in self.store().all_metadata()? {
            if let Ok(metadata) = metadata {
                given.insert(id, metadata);
            }
        }
        for (id, _) in target.store().all_metadata()? {
            given.entry(id).or_default();
        }
        for (id, metadata) in &given {
            if (target.store().metadata(id)?).is_some_and(|copied| copied != *metadata) {
                target.store().set_metadata(id, metadata)?;
            }
        }
        report.documents = (target.store().ids()?.iter())
            .filter(|id| parse_turn_id(id).is_none())
            .count();
        report.sessions = target.store().session_ids()?.len();
        Ok((last, caught_up))
    }
}

/// Resets the change log's floor when dropped: the backup holding it is
/// over, however it ended.
struct LogHeld<'a>(&'a Engine);

impl Drop for LogHeld<'_> {
    fn drop(&mut self) {
        self.0.log_floor.store(u64::MAX, Ordering::SeqCst);
    }
}

/// What each document cost to build; the record of those costs left out,
/// and named in `report`, when it does not read.
fn costs_or_skipped(
    engine: &Engine,
    report: &mut BackupReport,
) -> std::collections::HashMap<String, crate::model::cost::LlmCost> {
    engine.costs_by_document().unwrap_or_else(|err| {
        report.skipped.push(Damaged {
            doc: "the build costs".into(),
            problem: err.to_string(),
        });
        Default::default()
    })
}

/// Records in `report` what copying `what` found unreadable.
fn note(report: &mut BackupReport, what: &str, copied: Copied) {
    if let Copied::Unreadable(err) = copied {
        report.skipped.push(Damaged {
            doc: what.to_owned(),
            problem: err.to_string(),
        });
    }
}

/// A write that removed documents `ids`.
fn removed(ids: Vec<String>) -> Written {
    Written {
        removed: ids,
        ..Written::default()
    }
}

/// Where `path` really lies (links and `..` resolved), for comparing where
/// two paths lie; a path that does not exist yet, by its parent's.
fn resolved(path: &Path) -> Result<PathBuf> {
    if let Ok(real) = path.canonicalize() {
        return Ok(real);
    }
    let absolute = std::path::absolute(path).map_err(io_error(path))?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Ok(absolute);
    };
    let parent = parent.canonicalize().map_err(io_error(parent))?;
    Ok(parent.join(name))
}

/// The bytes of the files under `dir`.
pub(super) fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => directory_bytes(&entry.path()),
            _ => entry.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
