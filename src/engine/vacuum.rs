//! Vacuum: a store rewritten compactly, giving back the space removed and
//! replaced documents left behind (the storage engine keeps and rewrites
//! its free segments rather than return them).
//!
//! The store is opened (so no other process can use it meanwhile), backed
//! up into `NAME.vacuum` beside it (a compact copy: every document and
//! session written once), and the two directories are exchanged in one
//! atomic step (`renameat2` with `RENAME_EXCHANGE`), the old store then
//! removed. A stop at any moment leaves either the old store whole at its
//! path (before the exchange) or the new one (after); whatever is left
//! beside it, `NAME.vacuum` or `NAME.vacuum.partial`, is not the store
//! whichever side of the exchange the stop came, and the next vacuum
//! removes it.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::engine::backup::{BackupReport, directory_bytes};
use crate::engine::leftover::{remove_leftover, remove_store, sibling};
use crate::engine::reads::Damaged;
use crate::engine::{Engine, OpenOptions, SOCKET_FILE, io_error};
use crate::error::{Error, Result};
use crate::progress::{CancelToken, Progress};

/// What [`crate::Db::vacuum`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VacuumReport {
    /// The store's size on disk before, in bytes...
    pub bytes_before: u64,
    /// ...and after.
    pub bytes_after: u64,
    /// Documents kept (session turns not counted).
    pub documents: usize,
    /// Sessions kept, each with every turn.
    pub sessions: usize,
    /// Seconds it took.
    pub seconds: f64,
}

impl Engine {
    /// The work of [`crate::Db::vacuum`].
    pub(crate) fn vacuum(
        dir: &Path,
        options: &OpenOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<VacuumReport> {
        let options = OpenOptions {
            create: false,
            ..options.clone()
        };
        let engine = Engine::open(dir, &options)?;
        match engine.vacuum_held(progress, cancel, || ()) {
            Ok((report, ())) => Ok(report),
            Err(failed) => Err(failed.0),
        }
    }

    /// Vacuums the store this engine holds open, so locked from the
    /// start: the report, and what `reopen` gives, called as soon as the
    /// new store has taken the old one's place and the engine is closed
    /// (the store goes unlocked only between the two). On failure the
    /// error, with the engine still open on the store as it was.
    pub(crate) fn vacuum_held<R>(
        self,
        progress: &dyn Progress,
        cancel: &CancelToken,
        reopen: impl FnOnce() -> R,
    ) -> std::result::Result<(VacuumReport, R), Box<(Error, Engine)>> {
        let started = Instant::now();
        let dir = self.dir.clone();
        let beside = sibling(&dir, ".vacuum");
        let bytes_before = directory_bytes(&dir);
        let copy = match self.copy_and_exchange(&dir, &beside, progress, cancel) {
            Ok(copy) => copy,
            Err(err) => return Err(Box::new((err, self))),
        };
        drop(self);
        let reopened = reopen();
        // The old store, now beside: what is left of it if this fails is
        // removed by the next vacuum.
        if let Err(err) = remove_store(&beside) {
            tracing::warn!(
                "the store before the vacuum, at {}, could not be removed: {err}",
                beside.display()
            );
        }
        Ok((
            VacuumReport {
                bytes_before,
                bytes_after: directory_bytes(&dir),
                documents: copy.documents,
                sessions: copy.sessions,
                seconds: started.elapsed().as_secs_f64(),
            },
            reopened,
        ))
    }
}

impl Engine {
    /// Backs this engine's store, at `dir`, up into `beside` and exchanges
    /// the two directories: the copy's report. On failure `dir` holds the
    /// store as it was, and nothing the attempt made is left beside it.
    fn copy_and_exchange(
        &self,
        dir: &Path,
        beside: &Path,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        // A background build would save the old store's graph into the
        // directory the new store takes.
        drop(self.take_over_vector_graph(true));
        for leftover in [sibling(dir, ".vacuum.partial"), beside.to_owned()] {
            remove_leftover(&leftover)?;
        }
        let copy = self.backup(beside, progress, cancel)?;
        if let Some(Damaged { doc, problem }) = copy.skipped.first() {
            remove_store(beside)?;
            return Err(Error::Usage(format!(
                "vacuum would leave out what does not read whole ({doc}: {problem}; {} in all): run `check`, then `salvage` or `rm`",
                copy.skipped.len()
            )));
        }
        // The store stays open, and so locked, through the exchange: no
        // other process writes the old store once it is copied. Its index
        // writer is closed first, so that no merge of it writes into the
        // directory that is the new store's after the exchange.
        self.close_fulltext_writer()?;
        keep_socket(dir, beside);
        if let Err(err) = exchange(dir, beside) {
            let _ = remove_store(beside);
            return Err(err);
        }
        Ok(copy)
    }

    /// Closes the full-text index's writer, waiting for its merges.
    fn close_fulltext_writer(&self) -> Result<()> {
        self.fulltext_writer().close_writer()
    }
}

/// Links the socket of a server vacuuming the store at `dir` (it closed
/// the store for that and serves it again after) into `beside`, the store
/// that takes its place: after the exchange clients find it where they
/// did, with no moment between.
fn keep_socket(dir: &Path, beside: &Path) {
    let socket = dir.join(SOCKET_FILE);
    match std::fs::hard_link(&socket, beside.join(SOCKET_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => tracing::warn!(
            "the server's socket could not be kept across the vacuum (its clients reach it by TCP only until it restarts): {e}"
        ),
        _ => {}
    }
}

/// Exchanges directories `a` and `b` in one atomic step.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Usage(format!("{} holds a NUL byte", p.display())))
    };
    let (from, to) = (path(a)?, path(b)?);
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io_error(a)(std::io::Error::last_os_error()))
    }
}

/// Exchanges directories `a` and `b` in one atomic step: only Linux has
/// one, so elsewhere vacuum is refused (its copy removed, the store as it
/// was).
#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> Result<()> {
    Err(Error::Usage(
        "vacuum needs an atomic exchange of directories, which edudb has only on Linux".into(),
    ))
}
