//! The vector graph of an open store: loaded on first use, caught up with
//! the change log, persisted when due, and built where no search waits for
//! it. A search that finds no graph loaded is answered exactly from the
//! flat tables or the stored vectors ([`Engine::vector_search`]); past a
//! process's first few such searches the graph is loaded, caught up and
//! saved on a thread of its own ([`GraphBuild`]), and searches use it once
//! it is whole. Explicit builds (`build_vectors`, `reindex`) and reads that
//! need the graph itself (its counts, exhaustive search) run in the
//! foreground, after a background build they find running.

use std::sync::{Arc, MutexGuard, RwLockReadGuard, RwLockWriteGuard};

use crate::engine::graph_build::{BuildJob, GraphBuild, replay_vectors};
use crate::engine::{Engine, VECTORS_DIR};
use crate::error::{Error, Result};
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::storage::vectors::{VectorCounts, VectorIndex};

impl Engine {
    /// The vector index, loaded (and caught up with the store) on first
    /// use: commands that never search by vector never pay for loading it.
    /// Waits for a background build it finds running.
    pub(crate) fn vector_index(&self) -> Result<RwLockReadGuard<'_, Option<VectorIndex>>> {
        loop {
            let guard = self.vectors_read();
            if guard.is_some() {
                return Ok(guard);
            }
            drop(guard);
            self.with_vector_index(|_| Ok(()))?;
        }
    }

    /// The vector index slot, read (a panic elsewhere does not close it).
    pub(super) fn vectors_read(&self) -> RwLockReadGuard<'_, Option<VectorIndex>> {
        self.vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The vector index slot, held for writing.
    pub(super) fn vectors_write(&self) -> RwLockWriteGuard<'_, Option<VectorIndex>> {
        self.vectors
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the vector graph is loaded, so searches can use it.
    pub(super) fn vector_graph_loaded(&self) -> bool {
        self.vectors_read().is_some()
    }

    /// Starts loading, catching up and saving the vector graph on a thread
    /// of its own, unless it is loaded, being built already, or being
    /// loaded in the foreground. A failure to start one is a warning:
    /// searches go on answering exactly.
    pub(super) fn build_vector_graph_in_background(&self) {
        let mut running = match self.graph_build.try_lock() {
            Ok(running) => running,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if running.is_some() || self.vector_graph_loaded() {
            return;
        }
        let job = BuildJob {
            store: Arc::clone(&self.store),
            dir: self.dir.join(VECTORS_DIR),
            identity: self.embedder.identity(),
            dimension: self.embedder.dimension(),
            slot: Arc::clone(&self.vectors),
            floor: Arc::clone(&self.build_floor),
            cancel: CancelToken::new(),
        };
        let spawned = GraphBuild::start(job);
        match spawned {
            Ok(build) => *running = Some(build),
            Err(err) => tracing::warn!("the vector graph is not built in the background: {err}"),
        }
    }

    /// Ends a background build of the vector graph, if one runs (waiting
    /// for it, after cancelling it when `cancel`), and keeps others from
    /// starting while the guard it returns is held: whoever loads or
    /// builds the graph in the foreground, or closes the store, holds it.
    pub(super) fn take_over_vector_graph(
        &self,
        cancel: bool,
    ) -> MutexGuard<'_, Option<GraphBuild>> {
        let mut running = self
            .graph_build
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(build) = running.take() {
            build.finish(cancel);
        }
        running
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

    /// Runs `f` on the loaded, caught-up vector index under the write
    /// lock, loading it (after a background build it finds running) when
    /// it is not.
    fn with_vector_index<R>(&self, f: impl FnOnce(&mut VectorIndex) -> Result<R>) -> Result<R> {
        let _no_background_build = self.take_over_vector_graph(false);
        let mut guard = self.vectors_write();
        if guard.is_none() {
            let mut index = self.open_vector_index();
            let replayed =
                replay_vectors(&self.store, &mut index, &NoProgress, &CancelToken::new())?;
            // Saving the caught-up graph is upkeep for the read that
            // needed it: on a full disk the read still gets its answer, and
            // the kept change log brings the saved graph along next time.
            let saved = match replayed {
                Some(last) => self.persist_vectors(&mut index, last),
                // A graph saved before the flat tables existed gets them,
                // so later processes need not load it.
                None if index.lacks_flat_tables() => index.persist(),
                None => Ok(()),
            };
            if let Err(err) = saved {
                tracing::warn!("saving the caught-up vector graph failed: {err}");
            }
            *guard = Some(index);
        }
        let index = guard
            .as_mut()
            .ok_or_else(|| Error::Vectors("not loaded".into()))?;
        f(index)
    }

    /// Saves `index`, caught up to change `last`, and drops the change log
    /// as far as both derived indexes have applied it.
    fn persist_vectors(&self, index: &mut VectorIndex, last: u64) -> Result<()> {
        index.persist()?;
        self.trim_log(last.min(self.fulltext_writer().applied_seq()?))
    }

    /// Brings the vector index up to the store's latest change when it is
    /// loaded, by replaying the change log (not the caller's list of
    /// documents, so concurrent writers applying out of order, or a
    /// document stored but not indexed after a failure, are never skipped).
    /// An index that is not loaded is left alone: it catches up on its
    /// first use, so bulk ingest does not pay for graph inserts until a
    /// vector search or [`Engine::reindex`] needs the graph. Persisting is
    /// deferred ([`VectorIndex::persist_due`]; at the latest when the `Engine`
    /// is dropped): the change log is kept until it happens, so a crash
    /// before it only means a replay on the next open.
    pub(super) fn apply_to_vectors(&self) -> Result<()> {
        let mut guard = self.vectors_write();
        let Some(index) = guard.as_mut() else {
            return Ok(());
        };
        let replayed = replay_vectors(&self.store, index, &NoProgress, &CancelToken::new());
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
    pub(super) fn vector_graph_change(&self) -> u64 {
        let loaded = self.vectors_read().as_ref().map(VectorIndex::applied_seq);
        loaded.unwrap_or_else(|| VectorIndex::persisted_seq(&self.dir.join(VECTORS_DIR)))
    }

    /// The work of [`crate::Db::set_vector_search_effort`].
    pub(crate) fn set_vector_search_effort(&self, candidates: usize) -> Result<()> {
        self.with_vector_index(|index| {
            index.set_search_effort(candidates);
            Ok(())
        })
    }

    /// The work of [`crate::Db::vector_counts`].
    pub(crate) fn vector_counts(&self) -> Result<VectorCounts> {
        Ok(self
            .vector_index()?
            .as_ref()
            .map(VectorIndex::counts)
            .unwrap_or_default())
    }

    /// The work of [`crate::Db::build_vectors`].
    pub(crate) fn build_vectors(
        &self,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<()> {
        self.refresh_vectors(false, progress, cancel)
    }

    /// Brings the vector index (loaded, or opened as persisted; emptied
    /// first when `rebuild`) up to the store's latest change and saves it,
    /// after a background build it finds running (cancelled when
    /// `rebuild`, which would throw its work away).
    pub(super) fn refresh_vectors(
        &self,
        rebuild: bool,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<()> {
        let _no_background_build = self.take_over_vector_graph(rebuild);
        let mut guard = self.vectors_write();
        let mut index = match guard.take() {
            Some(index) => index,
            None => self.open_vector_index(),
        };
        if rebuild {
            index.clear();
        }
        // Put back only when whole: a part-built index would answer
        // searches with documents missing.
        if let Some(last) = replay_vectors(&self.store, &mut index, progress, cancel)? {
            self.persist_vectors(&mut index, last)?;
        }
        *guard = Some(index);
        Ok(())
    }
}
