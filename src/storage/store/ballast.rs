//! Room kept for removals on a full disk: a file of [`BALLAST_BYTES`]
//! (`ballast`, in the store's directory) that holds disk space for the
//! store and gives it back when a removal finds the disk full.
//!
//! Removing is how space is reclaimed, yet it writes (a log entry, sled's
//! tombstones, the full-text index's deletions) before anything is freed,
//! so on a disk filled by other programs it would fail like any write.
//! Databases keep room to delete; this file is that room. It is written
//! when the store opens or after a removal, whenever the disk has room for
//! it and for a removal's reserve ([`super::REMOVAL_RESERVE`]) besides:
//! room to remove comes before room to add, so a disk nearly full refuses
//! ingests the ballast's size sooner.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The space the ballast file holds: room for a removal's own reserve
/// ([`super::REMOVAL_RESERVE`]) and the writes of the removal itself.
const BALLAST_BYTES: u64 = 2 << 20;

/// The ballast file's name in the store's directory.
const BALLAST_FILE: &str = "ballast";

/// The ballast file of one store directory.
#[derive(Debug)]
pub(super) struct Ballast {
    path: PathBuf,
}

impl Ballast {
    /// The ballast of the store directory `dir` (not written yet).
    pub(super) fn new(dir: &Path) -> Ballast {
        Ballast {
            path: dir.join(BALLAST_FILE),
        }
    }

    /// Writes the ballast file unless it is there, when the file system
    /// has room for it and `keep_free` bytes besides. Best effort (a
    /// read-only store has none): a store without it works as before, only
    /// without room for removals on a full disk; a failure leaves no
    /// partial file behind.
    pub(super) fn restore(&self, keep_free: u64) {
        if self.path.exists() {
            return;
        }
        let dir = self.path.parent().unwrap_or(&self.path);
        let room = fs4::available_space(dir).is_ok_and(|free| free >= BALLAST_BYTES + keep_free);
        if !room {
            return;
        }
        // Written, not merely sized: a sparse file would hold no blocks.
        let temporary = self.path.with_extension("writing");
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&temporary)?;
            let zeros = vec![0u8; 64 << 10];
            for _ in 0..BALLAST_BYTES / zeros.len() as u64 {
                file.write_all(&zeros)?;
            }
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&temporary);
            // A read-only store, say: debug, not a warning at every open.
            tracing::debug!(
                "the room kept for removals ({}) could not be written: {e}",
                self.path.display()
            );
        }
    }

    /// Deletes the ballast file, giving its space back to the file system
    /// (with a warning: the disk is full); false when there was none to
    /// delete.
    pub(super) fn release(&self) -> bool {
        let released = std::fs::remove_file(&self.path).is_ok();
        if released {
            tracing::warn!(
                "the disk holding {} is full: the room kept for removals was used; it is kept again once the disk has room",
                self.path.parent().unwrap_or(&self.path).display()
            );
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ballast_holds_its_bytes_until_released_and_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let ballast = Ballast::new(dir.path());
        assert!(!ballast.release(), "nothing to release yet");
        ballast.restore(0);
        let written = std::fs::metadata(dir.path().join(BALLAST_FILE)).unwrap();
        assert_eq!(written.len(), BALLAST_BYTES);
        assert!(ballast.release());
        assert!(!dir.path().join(BALLAST_FILE).exists());
        // Never written where it would leave less than asked for free.
        ballast.restore(u64::MAX - BALLAST_BYTES);
        assert!(!dir.path().join(BALLAST_FILE).exists());
        ballast.restore(0);
        assert!(dir.path().join(BALLAST_FILE).exists());
    }
}
