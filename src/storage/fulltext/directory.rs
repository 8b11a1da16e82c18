//! The directory the full-text index lives in, as tantivy sees it.
//!
//! It is tantivy's `MmapDirectory` but for one file: `.managed.json`, the
//! list of files tantivy made, which its garbage collection deletes from
//! once no commit needs them. tantivy rewrites that list, with a temporary
//! file, a sync and a rename, before creating each file: six times for a
//! commit's new segment, more than half of a small write's syncs
//! (docs/benchmarks.md). Here the list is never written. Reading it lists
//! the directory instead: every file in it is tantivy's (nothing else
//! writes there), and all but `meta.json` and the dot files (its lock
//! files, an older store's list, left unread) are files garbage collection
//! may delete when no commit refers to them. That also covers what the written list misses:
//! the temporary files of an atomic write that a crash interrupted
//! (`.tmp…`), which are deleted too. A file created and not yet committed
//! stays safe, as before, because tantivy keeps the files of segments it is
//! writing among the living ones.
//!
//! Durability is unchanged: segment files are synced as tantivy closes
//! them, and `meta.json` (the commit) is written atomically after them.
//!
//! Its locks are the store's file locks ([`crate::storage::file_lock`]):
//! let go of in forked children, and the writer's lock, which only this
//! process can hold while it holds the store's, waited for while a child
//! it is starting still holds a copy.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tantivy::Directory;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};

use crate::storage::file_lock::{LEFTOVER_GRACE, LockFailure, lock_within};

/// tantivy's list of the files it made (`tantivy::core::MANAGED_FILEPATH`).
const MANAGED_LIST: &str = ".managed.json";
/// tantivy's commit (`tantivy::core::META_FILEPATH`).
const META: &str = "meta.json";
/// How the temporary files of tantivy's atomic writes begin (the
/// `tempfile` crate's default prefix).
const TEMPORARY_PREFIX: &str = ".tmp";

/// The full-text index's directory: an `MmapDirectory` whose list of
/// managed files is the directory's listing (see the module doc).
#[derive(Debug, Clone)]
pub struct IndexDirectory {
    inner: MmapDirectory,
    root: PathBuf,
}

impl IndexDirectory {
    /// The existing directory `root`.
    pub fn open(root: &Path) -> tantivy::Result<IndexDirectory> {
        Ok(IndexDirectory {
            inner: MmapDirectory::open(root)?,
            root: root.to_owned(),
        })
    }

    /// The files tantivy's garbage collection may delete when no commit
    /// needs them: every file but the commit, the lock files and the stale
    /// list of managed files, with the temporary files of interrupted
    /// atomic writes.
    fn collectable_files(&self) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.root)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let hidden = name.starts_with('.') && !name.starts_with(TEMPORARY_PREFIX);
            if name != META && !hidden {
                files.push(PathBuf::from(name));
            }
        }
        files.sort();
        Ok(files)
    }
}

/// Whether `path` is tantivy's list of managed files.
fn is_managed_list(path: &Path) -> bool {
    path == Path::new(MANAGED_LIST)
}

impl Directory for IndexDirectory {
    fn get_file_handle(
        &self,
        path: &Path,
    ) -> Result<std::sync::Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    /// The list of managed files is the directory's listing.
    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        if !is_managed_list(path) {
            return self.inner.atomic_read(path);
        }
        let listed = self
            .collectable_files()
            .map_err(|e| OpenReadError::wrap_io_error(e, self.root.clone()))?;
        let json = serde_json::to_vec(&listed)
            .map_err(|e| OpenReadError::wrap_io_error(io::Error::other(e), path.to_owned()))?;
        Ok(json)
    }

    /// The list of managed files is not written.
    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        if is_managed_list(path) {
            return Ok(());
        }
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    /// A blocking lock is waited for without end; a non-blocking one (the
    /// writer's) up to [`LEFTOVER_GRACE`], for a starting child's copy.
    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        let timeout = if lock.is_blocking {
            Duration::MAX
        } else {
            LEFTOVER_GRACE
        };
        match lock_within(&self.root.join(&lock.filepath), timeout) {
            Ok(held) => Ok(DirectoryLock::from(Box::new(held))),
            Err(LockFailure::Held) => Err(LockError::LockBusy),
            Err(LockFailure::Io(e)) => Err(LockError::wrap_io_error(e)),
        }
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}
