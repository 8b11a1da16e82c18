//! Progress reporting and cancellation for long work (ingest, reindex).
//!
//! The library never prints: it reports through a [`Progress`] the caller
//! supplies (the CLI draws bars) and stops early when a [`CancelToken`] is
//! cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Receives progress of one long operation. All methods may be called from
/// worker threads.
pub trait Progress: Send + Sync {
    /// The operation starts; `total` units (bytes or documents) are expected.
    fn start(&self, _what: &str, _total: u64) {}
    /// `units` more units are done; `item` names the one just finished.
    fn advance(&self, _units: u64, _item: &str) {}
    /// Work inside an item goes on (a PDF's pages): `what` says where it
    /// is; no unit is done yet.
    fn working_on(&self, _what: &str) {}
    /// The operation is over (successfully or not).
    fn finish(&self) {}
}

/// A [`Progress`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// The progress of one part of a larger operation whose report the
/// caller started (with the whole's total) and finishes: the part's own
/// start and finish are absorbed, its advances count toward the whole, so
/// work spread over several stores shows as one operation.
pub(crate) struct Part<'a>(pub(crate) &'a dyn Progress);

impl Progress for Part<'_> {
    fn advance(&self, units: u64, item: &str) {
        self.0.advance(units, item);
    }

    fn working_on(&self, what: &str) {
        self.0.working_on(what);
    }
}

/// Runs `work` as one operation `what` of `total` units on `progress`,
/// handing it the [`Part`] each of its pieces reports through; finished
/// whatever `work` returns.
pub(crate) fn in_parts<T>(
    progress: &dyn Progress,
    what: &str,
    total: u64,
    work: impl FnOnce(&Part<'_>) -> T,
) -> T {
    progress.start(what, total);
    let done = work(&Part(progress));
    progress.finish();
    done
}

/// A shared flag that asks long work to stop at the next safe point.
/// Work already committed stays committed; nothing is half-written.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Asks the work holding this token (or a clone) to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Err(Cancelled)` once cancelled.
    pub fn check(&self) -> crate::error::Result<()> {
        if self.is_cancelled() {
            Err(crate::error::Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A stage of one document's preparation that reports its own steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A PDF's pages read.
    Pages,
    /// Texts embedded (its nodes' representations, then its EDUs).
    Vectors,
    /// Windows of its DAG whose attention the local model has read.
    Attention,
}

impl Stage {
    /// What the stage counts, for a progress line.
    pub fn units(self) -> &'static str {
        match self {
            Stage::Pages => "page",
            Stage::Vectors => "vectors",
            Stage::Attention => "attention windows",
        }
    }
}

/// Where one document's preparation tells its steps and checks for
/// cancellation between them.
#[derive(Clone, Copy)]
pub struct Steps<'a> {
    /// Stops the work at its next step once cancelled.
    pub cancel: &'a CancelToken,
    /// Told `(stage, done, total)` after each step.
    pub report: &'a (dyn Fn(Stage, usize, usize) + Sync),
}

impl std::fmt::Debug for Steps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steps")
            .field("cancel", self.cancel)
            .finish_non_exhaustive()
    }
}

/// Runs `work` with steps that go untold and are never cancelled (for
/// callers with no progress to show).
pub fn untold<T>(work: impl FnOnce(&Steps<'_>) -> T) -> T {
    let cancel = CancelToken::new();
    work(&Steps {
        cancel: &cancel,
        report: &|_, _, _| {},
    })
}

impl Steps<'_> {
    /// Tells one step done, then stops with [`crate::error::Error::Cancelled`]
    /// if the work was cancelled.
    pub fn step(&self, stage: Stage, done: usize, total: usize) -> crate::error::Result<()> {
        (self.report)(stage, done, total);
        self.cancel.check()
    }
}
