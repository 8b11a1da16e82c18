//! Keeping the derived indexes caught up with the store: the full-text
//! index (replayed from the change log on open and after a failed write,
//! or rebuilt), a reindex of both (the vector graph's own upkeep is
//! [`super::vector_graph`]'s), and the change log trimmed to what both
//! have applied.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::engine::reads::Damaged;
use crate::engine::{Engine, VECTORS_DIR};
use crate::error::{Error, Result};
use crate::progress::{CancelToken, Progress};
use crate::storage::fulltext::FullText;
use crate::storage::store::Loss;
use crate::storage::vectors::VectorIndex;

/// Changes of the log a saved vector graph keeps for its catch-up, at
/// most.
const VECTOR_LOG_KEPT: u64 = 20_000;

impl Engine {
    /// Brings the full-text index up to the store's latest change: replays
    /// the change log past what the index applied, or rebuilds it when the
    /// log no longer reaches back that far (or the index is ahead).
    pub(super) fn catch_up(&self, force_rebuild: bool) -> Result<()> {
        let mut fulltext = self.fulltext_writer();
        let applied = fulltext.applied_seq()?;
        let last = self.store.last_seq()?;
        if applied == last && !force_rebuild {
            return Ok(());
        }
        if applied > last {
            // Only damage (sled recovers a damaged log up to the damage) or
            // an older copy of the store put back can do this: say so, and
            // record which documents went, before the rebuild forgets them.
            tracing::warn!(
                "the store is at change {last} but its full-text index applied change {applied}: changes after {last} were lost (damaged files, or an older copy restored); the index is rebuilt from what the store holds"
            );
            self.record_loss(last, applied);
        }
        if force_rebuild || applied > last || applied < self.store.trimmed_seq()? {
            tracing::info!("rebuilding the full-text index from the store");
            drop(fulltext);
            let skipped = self.reindex(&crate::progress::NoProgress, &CancelToken::new())?;
            for damaged in skipped {
                tracing::warn!(
                    "document {} left out of the full-text index: {}",
                    damaged.doc,
                    damaged.problem
                );
            }
            return Ok(());
        }
        tracing::info!("full-text index catching up from change {applied} to {last}");
        self.replay(&mut fulltext, applied)?;
        fulltext.commit(last)?;
        self.trim_log(last)
    }

    /// Records what the store lost that the full-text index still holds
    /// (a stale term of a document removed earlier is not a loss): the
    /// documents, and the sessions of lost turns whose dialogue is gone
    /// too. Also drops a persisted vector graph that reflects the lost
    /// changes, so that it is rebuilt from what the store holds. Best
    /// effort: a store too damaged to say or to record it still opens.
    fn record_loss(&self, last: u64, applied: u64) {
        let recorded = (|| -> Result<()> {
            let vectors = self.dir.join(VECTORS_DIR);
            if VectorIndex::persisted_seq(&vectors) > last {
                VectorIndex::discard(&vectors)?;
            }
            let stored: std::collections::HashSet<String> = self.store.ids()?.into_iter().collect();
            let (mut ids, mut sessions) = (Vec::new(), Vec::new());
            for id in self.reader.document_ids()? {
                if stored.contains(&id) || !self.reader.holds(&id)? {
                    continue;
                }
                match crate::model::ids::parse_turn_id(&id) {
                    None => ids.push(id),
                    Some((session, _)) => {
                        if !sessions.iter().any(|s| s == session)
                            && self.store.dialogue(session)?.is_none()
                        {
                            sessions.push(session.to_owned());
                        }
                    }
                }
            }
            let found_at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            self.store.record_loss(Loss {
                store_change: last,
                index_change: applied,
                found_at,
                ids,
                sessions,
            })
        })();
        if let Err(err) = recorded {
            tracing::warn!("the lost documents could not be recorded: {err}");
        }
    }

    /// The full-text writer for a write about to start: its tantivy writer
    /// made now, so the write overlaps making it with its own first work
    /// (analysing text, loading the tokenizer), and the index caught up
    /// after an earlier failure ([`Engine::recover_index`]).
    pub(super) fn start_fulltext_write(&self) -> Result<std::sync::MutexGuard<'_, FullText>> {
        let mut fulltext = self.fulltext_writer();
        fulltext.start_writing()?;
        self.recover_index(&mut fulltext)?;
        Ok(fulltext)
    }

    /// After a change missed the full-text writer ([`Engine::fulltext_behind`]):
    /// drops the writer's uncommitted changes (a failed writer may have
    /// lost some) and replays the change log from the index's last commit.
    /// Does nothing otherwise.
    pub(super) fn recover_index(&self, fulltext: &mut FullText) -> Result<()> {
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
    pub(super) fn replay(&self, fulltext: &mut FullText, applied: u64) -> Result<()> {
        let mut latest: HashMap<String, u64> = HashMap::new();
        for (seq, id) in self.store.changes_after(applied)? {
            latest.insert(id, seq);
        }
        for id in latest.keys() {
            let stored = (self.store.get(id))
                .and_then(|stored| stored.map(|stored| stored.to_document()).transpose());
            match stored {
                Ok(Some(doc)) => fulltext.replace(&doc)?,
                Ok(None) => fulltext.remove(id)?,
                // As in every read: left out, with a warning, and named by
                // `check`; its earlier entries stay for salvage to list.
                Err(err) if err.is_damage() => {
                    tracing::warn!("document {id} left out of the full-text index: {err}")
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Drops change-log entries every derived index has applied, up to
    /// `seq` (and no further than a running backup holds it). The vector
    /// index, when it has been built, holds the log back to what it has
    /// persisted; when it has never been built, its first build reads the
    /// whole store anyway. Trimming is upkeep: on a disk
    /// too full for it the log is kept (a warning) and the next write
    /// trims it.
    pub(super) fn trim_log(&self, seq: u64) -> Result<()> {
        let vectors = VectorIndex::persisted_seq(&self.dir.join(VECTORS_DIR));
        // A saved graph holds the log back for its catch-up, but only so
        // far: a store searched only by short-lived processes (which never
        // load the graph) would keep its log for ever. Past that the graph
        // is rebuilt from the stored vectors when it is next loaded.
        let upto = if vectors == 0 || seq.saturating_sub(vectors) > VECTOR_LOG_KEPT {
            seq
        } else {
            seq.min(vectors)
        };
        // A running backup reads the log after the change it holds.
        let upto = upto.min(self.log_floor.load(Ordering::SeqCst));
        // So does a background build of the vector graph.
        let upto = upto.min(self.build_floor.load(Ordering::SeqCst));
        match self.store.trim_log(upto) {
            Err(err @ Error::DiskFull { .. }) => {
                tracing::warn!("the change log is kept untrimmed for now: {err}");
                Ok(())
            }
            other => other,
        }
    }

    /// The work of [`crate::Db::reindex`].
    pub(crate) fn reindex(
        &self,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Vec<Damaged>> {
        let mut fulltext = self.start_fulltext_write()?;
        let ids = self.store.ids()?;
        let last = self.store.last_seq()?;
        progress.start("reindex", ids.len() as u64);
        fulltext.clear()?;
        let mut skipped = Vec::new();
        let result: Result<()> = ids.iter().try_for_each(|id| {
            cancel.check()?;
            let document =
                (self.store.get(id)).and_then(|stored| stored.map(|s| s.to_document()).transpose());
            match document {
                Ok(Some(doc)) => fulltext.replace(&doc)?,
                Ok(None) => {}
                // A damaged document is left out and named, so the rest of
                // the store is searchable and the damage can be removed.
                Err(err) if err.is_damage() => skipped.push(Damaged {
                    doc: id.clone(),
                    problem: err.to_string(),
                }),
                Err(err) => return Err(err),
            }
            progress.advance(1, id);
            Ok(())
        });
        progress.finish();
        if let Err(err) = result {
            // Cancelled or failed part-way: the cleared, part-rebuilt index
            // must not go out with the next write's commit.
            fulltext.rollback()?;
            return Err(err);
        }
        fulltext.commit(last)?;
        drop(fulltext);
        self.refresh_vectors(true, progress, cancel)?;
        Ok(skipped)
    }
}

#[cfg(test)]
mod tests {
    //! Salvage: a damaged document is named by check, left out of a
    //! reindex (the rest stays searchable) and removable.
    use crate::engine::{Engine, OpenOptions, three_fruit_store};
    use crate::ingest::pipeline::IngestOptions;
    use crate::progress::{CancelToken, NoProgress};

    #[test]
    fn catching_up_leaves_a_damaged_document_out_instead_of_failing() {
        let (_dir, engine) = three_fruit_store();
        let logged = engine.store().changes_after(0).unwrap();
        assert!(logged.iter().any(|(_, id)| id == "pears"), "{logged:?}");
        engine.store().damage("pears", false);
        let mut fulltext = engine.fulltext_writer();
        engine.replay(&mut fulltext, 0).unwrap();
        fulltext.commit(engine.store().last_seq().unwrap()).unwrap();
        drop(fulltext);
        assert_eq!(engine.search("orchards", 5).unwrap().len(), 1);
    }

    #[test]
    fn a_cancelled_reindex_leaves_the_index_as_it_was_through_later_writes() {
        let (_dir, engine) = three_fruit_store();
        let cancel = CancelToken::new();
        cancel.cancel();
        let err = engine.reindex(&NoProgress, &cancel).unwrap_err();
        assert!(matches!(err, crate::error::Error::Cancelled), "{err:?}");
        // The next write commits the index: nothing of the cancelled
        // rebuild (the clearing) goes with it.
        engine
            .ingest_bytes(
                "figs",
                b"Figs ripen in summer.".to_vec(),
                IngestOptions::default(),
            )
            .unwrap();
        for word in ["orchards", "picking", "prunes", "summer"] {
            assert_eq!(engine.search(word, 5).unwrap().len(), 1, "{word}");
        }
        assert!(engine.check().unwrap().damaged.is_empty());
    }

    #[test]
    fn a_damaged_document_is_named_skipped_by_reindex_and_removable() {
        let (_dir, engine) = three_fruit_store();
        engine.store().damage("pears", false);
        engine.store().damage("plums", true);
        let report = engine.check().unwrap();
        let named: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(named, ["pears", "plums"]);
        assert_eq!(report.documents, 3);
        // Listing shows what is readable: a damaged metadata record hides
        // only its own document.
        let listed: Vec<String> = engine
            .documents()
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(listed, ["apples", "pears"]);
        assert_eq!(engine.stats().unwrap().documents, 2);
        // Reindex leaves them out and says so; the rest is searchable.
        let skipped = engine.reindex(&NoProgress, &CancelToken::new()).unwrap();
        let skipped: Vec<&str> = skipped.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(skipped, ["pears", "plums"]);
        assert_eq!(engine.search("orchards", 5).unwrap()[0].doc, "apples");
        assert!(engine.search("prunes", 5).unwrap().is_empty());
        // Vector search works around them too.
        let hits = engine
            .nearest(
                "apples orchards",
                crate::model::rank::Target::Edus,
                5,
                false,
            )
            .unwrap();
        assert!(hits.iter().all(|h| h.doc == "apples"), "{hits:?}");
        // Removing them leaves a sound store.
        engine.remove("pears").unwrap();
        engine.remove("plums").unwrap();
        let report = engine.check().unwrap();
        assert!(report.damaged.is_empty(), "{:?}", report.damaged);
        assert_eq!(report.documents, 1);
    }

    #[test]
    fn a_document_the_store_lost_but_the_index_holds_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            create: true,
            ..Default::default()
        };
        let engine = Engine::open(dir.path().join("db"), &options).unwrap();
        for (id, text) in [("kept", "Kept text stays."), ("lost", "Lost text goes.")] {
            engine
                .ingest_bytes(id, text.as_bytes().to_vec(), IngestOptions::default())
                .unwrap();
        }
        engine.store().lose("lost");
        let report = engine.check().unwrap();
        let named: Vec<(&str, &str)> = (report.damaged.iter())
            .map(|d| (d.doc.as_str(), d.problem.as_str()))
            .collect();
        assert!(
            matches!(&named[..], [("lost", problem)] if problem.contains("lost to damage")),
            "{named:?}"
        );
        // A removed document's stale index terms are not mistaken for one.
        engine.remove("kept").unwrap();
        let report = engine.check().unwrap();
        let named: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(named, ["lost"]);
    }
}
