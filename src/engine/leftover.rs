//! Store directories a stopped backup or vacuum leaves beside a store
//! (`DEST.partial`, `NAME.vacuum`, `NAME.vacuum.partial`): how they are
//! named, recognised and removed.
//!
//! A stop can come at any moment of making or removing one, so what it
//! leaves is any prefix of either: an empty directory, one holding only
//! the lock file (written first when a store is created), a storage engine
//! directory without a full-text one, any part of a whole store. Such a
//! directory is recognised as a store the way [`super::Engine::open`]
//! recognises one (its lock file or its storage engine's directory), or
//! else as empty; and it is removed with its lock file last, so that a
//! stop during the removal leaves one still recognised. Anything else at
//! such a path is refused, never removed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::io_error;
use crate::engine::lock::{LOCK_FILE, StoreLock};
use crate::error::{Error, Result};
use crate::storage::store::ENGINE_DIR;

/// `path` with `suffix` added to its name: where a backup to it is built
/// until it is whole (`.partial`), where a vacuum builds its copy.
pub(super) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Removes what a stopped backup or vacuum left at `path`, once it is
/// seen to be a store or what is left of one (see the module doc);
/// anything else there is refused, as is a store another process has open.
pub(super) fn remove_leftover(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let empty = || {
        std::fs::read_dir(path)
            .map(|mut entries| entries.next().is_none())
            .unwrap_or(false)
    };
    let a_store = path.join(ENGINE_DIR).is_dir() || path.join(LOCK_FILE).is_file();
    if !path.is_dir() || !(a_store || empty()) {
        return Err(Error::Usage(format!(
            "{} is in the way and is not a store a stopped backup or vacuum left: move it away",
            path.display()
        )));
    }
    remove_store(path)
}

/// Removes the store directory at `path`, which no engine here has open,
/// with its lock file last: a stop at any moment leaves a directory that
/// [`remove_leftover`] recognises. A store another process holds open is
/// refused ([`Error::Locked`]) and left as it is.
pub(super) fn remove_store(path: &Path) -> Result<()> {
    // Taking the lock makes the lock file when it is missing, so that it
    // is there to go last.
    let held = StoreLock::take(path, Duration::ZERO)?;
    for entry in std::fs::read_dir(path).map_err(io_error(path))? {
        let entry = entry.map_err(io_error(path))?;
        if entry.file_name() == LOCK_FILE {
            continue;
        }
        let at = entry.path();
        let removed = match entry.file_type().map_err(io_error(&at))?.is_dir() {
            true => std::fs::remove_dir_all(&at),
            false => std::fs::remove_file(&at),
        };
        removed.map_err(io_error(&at))?;
    }
    let lock = path.join(LOCK_FILE);
    std::fs::remove_file(&lock).map_err(io_error(&lock))?;
    drop(held);
    std::fs::remove_dir(path).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stop while making or removing a store can leave at a
    /// leftover's path.
    fn stopped_states(dir: &Path) -> Vec<PathBuf> {
        let engine = format!("{ENGINE_DIR}/");
        let engine_file = format!("{ENGINE_DIR}/db");
        let made = |name: &str, parts: &[&str]| {
            let at = dir.join(name);
            std::fs::create_dir(&at).unwrap();
            for part in parts {
                match part.strip_suffix('/') {
                    Some(sub) => std::fs::create_dir_all(at.join(sub)).unwrap(),
                    None => std::fs::write(at.join(part), b"x").unwrap(),
                }
            }
            at
        };
        vec![
            made("empty", &[]),
            made("lock-only", &[LOCK_FILE]),
            made("engine-no-index", &[LOCK_FILE, &engine, &engine_file]),
            made("engine-half-removed", &[&engine]),
        ]
    }

    #[test]
    fn every_state_a_stop_leaves_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        for at in stopped_states(dir.path()) {
            remove_leftover(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()));
            assert!(!at.exists(), "{} is left", at.display());
        }
        remove_leftover(&dir.path().join("never-made")).unwrap();
    }

    #[test]
    fn what_is_not_a_store_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), b"mine").unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"mine").unwrap();
        for at in [&theirs, &file] {
            let err = remove_leftover(at).unwrap_err().to_string();
            assert!(err.contains("is in the way"), "{err}");
        }
        assert_eq!(std::fs::read(theirs.join("notes.txt")).unwrap(), b"mine");
        assert_eq!(std::fs::read(&file).unwrap(), b"mine");
    }

    #[test]
    fn a_store_held_open_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("held.partial");
        std::fs::create_dir(&at).unwrap();
        let _held = StoreLock::take(&at, Duration::ZERO).unwrap();
        assert!(matches!(remove_leftover(&at), Err(Error::Locked { .. })));
        assert!(at.join(LOCK_FILE).is_file());
    }
}
