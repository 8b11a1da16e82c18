//! Building a vector graph from the store's stored vectors, alone: the
//! catch-up of an index from the change log (or its rebuild), and that
//! work run on a thread of its own ([`GraphBuild`]) over the parts of an
//! engine it shares. [`super::vector_graph`] decides when.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::storage::store::Store;
use crate::storage::vectors::VectorIndex;

/// The vector index slot an engine and its background build share.
pub(super) type VectorSlot = Arc<RwLock<Option<VectorIndex>>>;

/// A vector graph being loaded, caught up and saved on a thread of its own.
#[derive(Debug)]
pub(super) struct GraphBuild {
    cancel: CancelToken,
    thread: std::thread::JoinHandle<()>,
}

impl GraphBuild {
    /// Runs `job` on a thread of its own. Its failure is a warning (the
    /// process's searches go on answering exactly, and a read that needs
    /// the graph itself loads it in the foreground), its cancellation none.
    pub(super) fn start(job: BuildJob) -> Result<GraphBuild> {
        let cancel = job.cancel.clone();
        // Held from before the thread runs: no trim between here and the
        // change its first catch-up reads as the last.
        let floor = Arc::clone(&job.floor);
        floor.store(job.store.last_seq()?, Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("edudb-vector-graph".into())
            .spawn(move || {
                let _release = FloorRelease(&job.floor);
                match job.run() {
                    Err(Error::Cancelled) | Ok(()) => {}
                    Err(err) => tracing::warn!("building the vector graph failed: {err}"),
                }
            });
        match spawned {
            Ok(thread) => Ok(GraphBuild { cancel, thread }),
            Err(err) => {
                drop(FloorRelease(&floor));
                Err(Error::Vectors(format!(
                    "the thread to build the vector graph did not start: {err}"
                )))
            }
        }
    }

    /// Waits for the build to end, cancelling it first when `cancel`.
    pub(super) fn finish(self, cancel: bool) {
        if cancel {
            self.cancel.cancel();
        }
        if self.thread.join().is_err() {
            tracing::warn!("the background vector graph build panicked");
        }
    }
}

/// What a background build reads and fills: the engine's parts it shares.
pub(super) struct BuildJob {
    pub(super) store: Arc<Store>,
    pub(super) dir: PathBuf,
    pub(super) identity: String,
    pub(super) dimension: usize,
    pub(super) slot: VectorSlot,
    /// The change the log is kept from while the build runs (`u64::MAX`
    /// when none does), so that its catch-up finds every later change.
    pub(super) floor: Arc<AtomicU64>,
    pub(super) cancel: CancelToken,
}

/// Changes a build may leave to its last catch-up, the one made holding
/// the slot's lock (which searches and writers wait for): more are caught
/// up before it takes the lock.
const LOCKED_CATCH_UP: u64 = 64;

impl BuildJob {
    /// Loads the persisted graph (or starts an empty one), catches it up
    /// and saves it without holding the slot (again while writes came in
    /// faster than [`LOCKED_CATCH_UP`]), then catches up the last changes
    /// under the slot's lock and puts it there, unless a foreground load
    /// got there first. A failure to save is a warning, as it is for a
    /// foreground load: the kept change log brings the saved graph along.
    fn run(&self) -> Result<()> {
        let mut index = VectorIndex::open(&self.dir, &self.identity, self.dimension);
        loop {
            if replay_vectors(&self.store, &mut index, &NoProgress, &self.cancel)?.is_some()
                && let Err(err) = index.persist()
            {
                tracing::warn!("saving the vector graph built in the background failed: {err}");
            }
            if self.store.last_seq()? <= index.applied_seq() + LOCKED_CATCH_UP {
                break;
            }
        }
        let mut slot = self
            .slot
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            replay_vectors(&self.store, &mut index, &NoProgress, &self.cancel)?;
            *slot = Some(index);
        }
        Ok(())
    }
}

/// Lets go of the change log a build held when the build ends, however it
/// ends (a panic included).
struct FloorRelease<'a>(&'a AtomicU64);

impl Drop for FloorRelease<'_> {
    fn drop(&mut self) {
        self.0.store(u64::MAX, Ordering::SeqCst);
    }
}

/// Brings the vector index up to the store's latest change without
/// persisting it: replays the log past what it applied, or rebuilds it
/// from the stored vectors when the log no longer reaches back, it is
/// ahead, or a quarter of its entries are tombstones. Returns the change
/// it now reflects, or `None` when it was already there. On an error the
/// index is part-way and must be dropped, not used.
pub(super) fn replay_vectors(
    store: &Store,
    index: &mut VectorIndex,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<Option<u64>> {
    let applied = index.applied_seq();
    let last = store.last_seq()?;
    if applied == last && !index.needs_rebuild() {
        return Ok(None);
    }
    let ids: Vec<String> =
        if applied > last || applied < store.trimmed_seq()? || index.needs_rebuild() {
            tracing::info!("building the vector index from the stored vectors");
            index.clear();
            store.ids()?
        } else {
            tracing::info!("vector index catching up from change {applied} to {last}");
            let mut ids: Vec<String> = (store.changes_after(applied)?.into_iter())
                .map(|(_, id)| id)
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
    progress.start("vectors", ids.len() as u64);
    let result = ids.iter().try_for_each(|id| -> Result<()> {
        cancel.check()?;
        index_vectors(store, index, id)?;
        progress.advance(1, id);
        Ok(())
    });
    progress.finish();
    result?;
    index.set_applied(last);
    Ok(Some(last))
}

/// Puts document `id`'s stored vectors into `index`, or removes it from
/// the index when the store no longer has it.
fn index_vectors(store: &Store, index: &mut VectorIndex, id: &str) -> Result<()> {
    let replaced = (store.get(id)).and_then(|stored| match (stored, store.vectors(id)?) {
        (Some(stored), Some(vectors)) => index.replace(&stored.to_document()?, vectors.get()?),
        (None, _) => {
            index.remove(id);
            Ok(())
        }
        (Some(_), None) => Err(Error::Invariant {
            doc: id.to_owned(),
            message: "vectors record missing".into(),
        }),
    });
    match replaced {
        // A damaged document stays out of the graph (check names it)
        // rather than failing every vector search.
        Err(err) if err.is_damage() => {
            tracing::warn!("document {id} left out of the vector index: {err}");
            index.remove(id);
            Ok(())
        }
        other => other,
    }
}
