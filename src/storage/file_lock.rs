//! Exclusive OS file locks (`flock`) as the store takes them: polled up to
//! a deadline, and let go of in forked children ([`ReleasedOnFork`]).
//!
//! Such a lock belongs to the open file, and a child process holds a copy
//! of every open file from the moment it is started until it runs its
//! program (close-on-exec drops them then). So a lock this process has just
//! released can still look held for that moment while another thread starts
//! a process: where only this process can hold a lock, a taker waits up to
//! [`LEFTOVER_GRACE`] for such a leftover copy to go.

use std::fs::{File, TryLockError};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::fork_release::ReleasedOnFork;

/// How long a lock that only a starting child process's copy of this
/// process's files can hold is waited for.
pub const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// A held exclusive lock on a file, released when dropped.
#[derive(Debug)]
pub struct HeldLock {
    /// The lock's release in forked children, dropped (fields drop in
    /// order) before the file closes.
    _released_on_fork: ReleasedOnFork,
    /// The locked file; closing it releases the lock.
    file: File,
}

impl HeldLock {
    /// The locked file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Why [`lock_within`] did not take the lock.
#[derive(Debug)]
pub enum LockFailure {
    /// Another holder still held it when the time ran out.
    Held,
    /// Opening the file or the lock call itself failed.
    Io(std::io::Error),
}

/// Opens (creating it when absent) the file at `path` and takes its
/// exclusive lock, polling for up to `timeout` while it is held elsewhere
/// (at first every 5 ms, backing off to 100 ms). `Duration::MAX` blocks
/// until the lock is free; another timeout too long to represent as an
/// instant polls without end. The descriptor is registered for release in
/// forked children before the lock is taken, so no child forked meanwhile
/// keeps it.
pub fn lock_within(path: &Path, timeout: Duration) -> Result<HeldLock, LockFailure> {
    let file = open_lock_file(path).map_err(LockFailure::Io)?;
    // Declared after the file, so dropped before it on every path.
    let released_on_fork = ReleasedOnFork::register(file.as_raw_fd());
    let held = |file| HeldLock {
        _released_on_fork: released_on_fork,
        file,
    };
    if timeout == Duration::MAX {
        file.lock().map_err(LockFailure::Io)?;
        return Ok(held(file));
    }
    let deadline = Instant::now().checked_add(timeout);
    let mut pause = Duration::from_millis(5);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(held(file)),
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

/// Locks `path` (creating it when absent) through a file of its own, as a
/// starting child's copy of this process's files would; the lock goes with
/// the file.
#[cfg(test)]
pub(crate) fn leftover_copy(path: &Path) -> File {
    let file = open_lock_file(path).unwrap();
    file.try_lock().unwrap();
    file
}

/// The lock file at `path`, opened for writing (an exclusive lock needs
/// it) and created when absent, its contents kept.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_released_within_the_timeout_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let copy = leftover_copy(&path);
        let (taking, taken) = std::sync::mpsc::channel();
        let taker_path = path.clone();
        let taker = std::thread::spawn(move || {
            taking.send(()).unwrap();
            lock_within(&taker_path, LEFTOVER_GRACE)
        });
        taken.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        drop(copy);
        taker.join().unwrap().expect("taken once the copy let go");
    }

    #[test]
    fn a_lock_held_past_the_timeout_is_refused_and_one_held_here_stays_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = lock_within(&path, Duration::ZERO).unwrap();
        assert!(matches!(
            lock_within(&path, Duration::from_millis(30)),
            Err(LockFailure::Held)
        ));
        drop(held);
        lock_within(&path, Duration::ZERO).unwrap();
    }
}
