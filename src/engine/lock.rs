//! The store's process lock: the `LOCK` file, held exclusively (an OS file
//! lock, [`lock_within`]) for as long as an [`crate::Db`] has the store
//! open, so that one process at a time writes it.
//!
//! A store this process has just closed can still look locked for a moment
//! while another thread starts a process (see [`crate::storage::file_lock`]).
//! An open therefore tells the two cases apart: a store this process holds
//! open is busy as ever, while a lock whose recorded holder is this process
//! but which no open store of it holds is such a leftover copy, waited for
//! up to [`LEFTOVER_GRACE`]. A child made by `fork` alone, which may run for
//! long without starting a program, lets go of its copy at once.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::storage::file_lock::{HeldLock, LEFTOVER_GRACE, LockFailure, lock_within};

/// The lock file's name in the store directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// The store directories this process holds open.
static HELD: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// The held lock of one store directory, released when dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    /// The directory, as registered in [`HELD`].
    dir: PathBuf,
    /// The lock, released as the fields drop.
    _held: HeldLock,
}

impl StoreLock {
    /// Takes the lock of the store directory `dir` (which exists), waiting
    /// up to `busy_timeout` while another process holds it, and records
    /// this process's id in it for others' error messages.
    pub(crate) fn take(dir: &Path, busy_timeout: Duration) -> Result<StoreLock> {
        refuse_in_forked_child()?;
        let path = dir.join(LOCK_FILE);
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        let timeout = wait_for(&path, &key, busy_timeout);
        let held = lock_within(&path, timeout).map_err(|e| match e {
            LockFailure::Held => Error::Locked {
                path: dir.to_owned(),
                holder: lock_holder(&path),
            },
            LockFailure::Io(source) => Error::Io {
                path: path.clone(),
                source,
            },
        })?;
        // The pid is for others' error messages only: a full disk (or a
        // read-only mount) must not stop the open.
        if let Err(e) = record_holder(held.file()) {
            tracing::warn!("the holder's pid could not be written to {LOCK_FILE}: {e}");
        }
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
        Ok(StoreLock {
            dir: key,
            _held: held,
        })
    }
}

impl Drop for StoreLock {
    /// Forgets the directory, then (as the fields drop) releases the lock.
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.dir);
    }
}

/// The process that first opened a store in this address space.
static FIRST_OPENED_BY: OnceLock<u32> = OnceLock::new();

/// Refuses ([`Error::Forked`]) in a process forked from one that had
/// opened a store: the thread pools sled and edudb started there exist in
/// the child only as state (a pool that believes it has threads, a lock a
/// vanished thread held), so a store opened in the child would hang on the
/// first task given to them.
fn refuse_in_forked_child() -> Result<()> {
    let this = std::process::id();
    match *FIRST_OPENED_BY.get_or_init(|| this) {
        parent if parent != this => Err(Error::Forked { parent }),
        _ => Ok(()),
    }
}

/// How long an open of the store `key`, whose lock file is `path`, waits
/// for its lock: `busy_timeout`, or at least [`LEFTOVER_GRACE`] when the
/// recorded holder is this process but no open store of it holds the lock
/// (a starting child's leftover copy).
fn wait_for(path: &Path, key: &Path, busy_timeout: Duration) -> Duration {
    let leftover = lock_holder(path) == Some(std::process::id()) && !is_held(key);
    if leftover {
        busy_timeout.max(LEFTOVER_GRACE)
    } else {
        busy_timeout
    }
}

/// True when this process holds the store directory `key` open.
fn is_held(key: &Path) -> bool {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(key)
}

/// Writes this process's id into the held `LOCK` file, for the error a
/// process waiting on the store gets ([`lock_holder`]).
fn record_holder(mut lock: &File) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    lock.set_len(0)?;
    lock.seek(std::io::SeekFrom::Start(0))?;
    writeln!(lock, "{}", std::process::id())
}

/// The process id the holder of the `LOCK` file at `path` recorded, if it
/// can be read.
fn lock_holder(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds `dir`'s lock through a file of its own, as a starting child's
    /// copy of this process's files would, with this process's id in it.
    fn leftover_copy(dir: &Path) -> File {
        let file = crate::storage::file_lock::leftover_copy(&dir.join(LOCK_FILE));
        record_holder(&file).unwrap();
        file
    }

    #[test]
    fn a_leftover_copy_of_this_processs_lock_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let copy = leftover_copy(dir.path());
        let (taking, taken) = std::sync::mpsc::channel();
        let path = dir.path().to_owned();
        let opener = std::thread::spawn(move || {
            taking.send(()).unwrap();
            StoreLock::take(&path, Duration::ZERO)
        });
        taken.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(copy);
        opener.join().unwrap().unwrap();
    }

    #[test]
    fn a_store_this_process_holds_open_is_busy_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let held = StoreLock::take(dir.path(), Duration::ZERO).unwrap();
        let (path, key) = (dir.path().join(LOCK_FILE), canonical(dir.path()));
        assert_eq!(wait_for(&path, &key, Duration::ZERO), Duration::ZERO);
        let err = StoreLock::take(dir.path(), Duration::ZERO).unwrap_err();
        assert!(
            matches!(err, Error::Locked { holder: Some(pid), .. } if pid == std::process::id()),
            "{err}"
        );
        drop(held);
        assert_eq!(
            wait_for(&path, &key, Duration::ZERO),
            LEFTOVER_GRACE,
            "once closed, the lock is this process's leftover"
        );
        StoreLock::take(dir.path(), Duration::ZERO).unwrap();
    }

    #[test]
    fn another_processs_lock_is_busy_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let copy = leftover_copy(dir.path());
        let path = dir.path().join(LOCK_FILE);
        std::fs::write(&path, "1\n").unwrap();
        let key = canonical(dir.path());
        assert_eq!(wait_for(&path, &key, Duration::ZERO), Duration::ZERO);
        let err = StoreLock::take(dir.path(), Duration::ZERO).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Locked {
                    holder: Some(1),
                    ..
                }
            ),
            "{err}"
        );
        drop(copy);
    }

    /// The key [`StoreLock::take`] registers `dir` under.
    fn canonical(dir: &Path) -> PathBuf {
        std::fs::canonicalize(dir).unwrap()
    }
}
