//! The store's process lock: the `LOCK` file, held exclusively (an OS file
//! lock) for as long as an [`crate::Db`] has the store open, so that one
//! process at a time writes it.
//!
//! An OS file lock belongs to the open file, and a child process holds a
//! copy of every open file from the moment it is started until it runs its
//! program (close-on-exec drops them then). So a store this process has
//! just closed can still look locked for that moment while another thread
//! starts a process. An open therefore tells the two cases apart: a store
//! this process holds open is busy as ever, while a lock whose recorded
//! holder is this process but which no open store of it holds is such a
//! leftover copy, waited for up to [`LEFTOVER_GRACE`]. A child made by
//! `fork` alone, which may run for long without starting a program, lets
//! go of its copy at once ([`ReleasedOnFork`]).

use std::collections::BTreeSet;
use std::fs::{File, TryLockError};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::storage::fork_release::ReleasedOnFork;

/// The lock file's name in the store directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// How long an open waits, whatever its busy timeout, for a lock that only
/// a starting child process's copy of this process's files can hold.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// The store directories this process holds open.
static HELD: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// The held lock of one store directory, released when dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    /// The directory, as registered in [`HELD`].
    dir: PathBuf,
    /// The lock's release in forked children, dropped (fields drop in
    /// order) before the file closes.
    _released_on_fork: ReleasedOnFork,
    /// The locked file; closing it releases the lock.
    _file: File,
}

impl StoreLock {
    /// Takes the lock of the store directory `dir` (which exists), waiting
    /// up to `busy_timeout` while another process holds it, and records
    /// this process's id in it for others' error messages.
    pub(crate) fn take(dir: &Path, busy_timeout: Duration) -> Result<StoreLock> {
        refuse_in_forked_child()?;
        let path = dir.join(LOCK_FILE);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        let leftover = lock_holder(&path) == Some(std::process::id()) && !is_held(&key);
        let timeout = if leftover {
            busy_timeout.max(LEFTOVER_GRACE)
        } else {
            busy_timeout
        };
        lock_within(&file, timeout).map_err(|e| match e {
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
        if let Err(e) = record_holder(&file) {
            tracing::warn!("the holder's pid could not be written to {LOCK_FILE}: {e}");
        }
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone());
        Ok(StoreLock {
            dir: key,
            _released_on_fork: ReleasedOnFork::register(file.as_raw_fd()),
            _file: file,
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

/// True when this process holds the store directory `key` open.
fn is_held(key: &Path) -> bool {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(key)
}

/// Why [`lock_within`] did not take the lock.
enum LockFailure {
    /// Another process still held it when the time ran out.
    Held,
    /// The lock call itself failed.
    Io(std::io::Error),
}

/// Takes `file`'s exclusive lock, polling for up to `timeout` while
/// another process holds it (at first every 5 ms, backing off to 100 ms).
/// A timeout too long to represent as an instant waits without end.
fn lock_within(file: &File, timeout: Duration) -> std::result::Result<(), LockFailure> {
    let deadline = Instant::now().checked_add(timeout);
    let mut pause = Duration::from_millis(5);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::Error(source)) => return Err(LockFailure::Io(source)),
            Err(TryLockError::WouldBlock) => {
                let now = Instant::now();
                let left =
                    deadline.map_or(pause, |deadline| deadline.saturating_duration_since(now));
                if left.is_zero() {
                    return Err(LockFailure::Held);
                }
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
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
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .unwrap();
        file.try_lock().unwrap();
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
        let started = Instant::now();
        let err = StoreLock::take(dir.path(), Duration::ZERO).unwrap_err();
        assert!(
            matches!(err, Error::Locked { holder: Some(pid), .. } if pid == std::process::id()),
            "{err}"
        );
        assert!(
            started.elapsed() < LEFTOVER_GRACE,
            "the open waited for a lock this process holds"
        );
        drop(held);
        StoreLock::take(dir.path(), Duration::ZERO).unwrap();
    }

    #[test]
    fn another_processs_lock_is_busy_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let copy = leftover_copy(dir.path());
        std::fs::write(dir.path().join(LOCK_FILE), "1\n").unwrap();
        let started = Instant::now();
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
        assert!(started.elapsed() < LEFTOVER_GRACE, "the open waited");
        drop(copy);
    }
}
