//! Lock files a forked child lets go of at once.
//!
//! An OS file lock (`flock`) belongs to the open file, and a child made by
//! `fork` holds a copy of every open file until it exits or runs a program.
//! A child forked while a store is open (a `multiprocessing` pool, a
//! pre-forking server) would otherwise keep the store locked after its
//! parent closed it, so the parent could not open it again until the child
//! ended. Each lock file's descriptor is registered here while it is held;
//! a handler run in every child right after `fork` points each registered
//! descriptor at `/dev/null`, which drops the child's copy of the lock and
//! keeps the descriptor's number taken (the child's handles still own it).
//! The child cannot use the store anyway: opening one there is refused
//! (`Error::Forked`).
//!
//! A child started by `posix_spawn` (how Rust's `Command` and Python's
//! `subprocess` usually start programs) runs no such handler, but holds
//! the copies only until its program starts, since they close on exec.

use std::os::fd::RawFd;
use std::sync::Once;
use std::sync::atomic::{AtomicI32, Ordering};

/// The most lock files registered at once; more stay held by a child.
const SLOTS: usize = 256;

/// The registered descriptors; -1 marks a free slot.
static REGISTERED: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

/// Installs [`release_in_child`] once per process.
static HANDLER: Once = Once::new();

/// A lock file's descriptor registered for release in forked children,
/// until dropped. Drop it before the file closes, so that no other file
/// that reuses the number is pointed at `/dev/null` in a child.
#[derive(Debug)]
pub struct ReleasedOnFork {
    slot: Option<usize>,
}

impl ReleasedOnFork {
    /// Registers `fd`, the descriptor of a file holding a lock. With every
    /// slot taken it is not registered, which costs only the release in
    /// children.
    pub fn register(fd: RawFd) -> ReleasedOnFork {
        HANDLER.call_once(|| {
            // SAFETY: the handler only loads atomics and calls `open`,
            // `dup2` and `close`, which are async-signal-safe, as a child
            // handler of a multi-threaded process must be.
            let installed = unsafe { libc::pthread_atfork(None, None, Some(release_in_child)) };
            if installed != 0 {
                tracing::warn!(
                    "forked children will keep copies of store locks (pthread_atfork failed: {installed})"
                );
            }
        });
        let slot = REGISTERED.iter().position(|slot| {
            slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        ReleasedOnFork { slot }
    }
}

impl Drop for ReleasedOnFork {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            REGISTERED[slot].store(-1, Ordering::SeqCst);
        }
    }
}

/// Run in the child after `fork`: points every registered descriptor at
/// `/dev/null`. Nothing is done if `/dev/null` cannot be opened (a
/// descriptor closed instead could be reused by the child for another
/// file that its handles would then close).
extern "C" fn release_in_child() {
    // SAFETY: async-signal-safe calls on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null < 0 {
            return;
        }
        for slot in &REGISTERED {
            let fd = slot.load(Ordering::SeqCst);
            if fd >= 0 && fd != null {
                libc::dup2(null, fd);
            }
        }
        libc::close(null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_registration_holds_a_slot_until_dropped() {
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        let held = ReleasedOnFork::register(fd);
        let slot = held.slot.expect("a free slot");
        assert_eq!(REGISTERED[slot].load(Ordering::SeqCst), fd);
        drop(held);
        assert_eq!(REGISTERED[slot].load(Ordering::SeqCst), -1);
    }
}
