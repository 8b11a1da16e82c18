//! sled's own files in the store's directory, checked before sled opens
//! them: its configuration (`conf`), its snapshots (`snap.*`) and its
//! data log (`db`).
//!
//! sled 0.34 refuses to open over one damaged byte of its metadata,
//! although everything it holds can be rebuilt: a snapshot is a summary of
//! the log (without one, sled replays the whole log), and the
//! configuration holds only the values edudb always opens sled with. So a
//! snapshot whose checksum fails is moved aside (to `damaged-snap.*`, kept
//! for inspection) and a configuration whose checksum fails is rewritten,
//! each with a warning naming the file. Damage to the data log itself
//! cannot be repaired this way; its errors name the file.

use std::path::Path;

use crate::error::{Error, Result, catch_quietly, panic_message};

/// sled's configuration file.
const CONF_FILE: &str = "conf";
/// sled's data log.
pub(super) const LOG_FILE: &str = "db";
/// The prefix of sled's snapshot files.
const SNAPSHOT_PREFIX: &str = "snap.";
/// The prefix a damaged snapshot is renamed with: sled counts every file
/// starting with [`SNAPSHOT_PREFIX`] as a snapshot, this one not.
const DAMAGED_SNAPSHOT_PREFIX: &str = "damaged-snap.";

/// The bytes of each segment of sled's data log, as [`CONF_BODY`] says.
pub(super) const SEGMENT_SIZE: u64 = 524_288;

/// The configuration edudb opens sled with, as sled writes it in `conf`
/// before the checksum: sled's defaults, which [`open`] never changes.
const CONF_BODY: &str = "segment_size: 524288\nuse_compression: false\nversion: 0.34\n";

/// What [`check_and_repair`] changed, one line per file, for the warning.
type Repairs = Vec<String>;

/// Readies sled's files in `dir` to open: removes unfinished snapshots,
/// moves damaged ones aside and rewrites a damaged configuration. Returns
/// what it changed (nothing for a healthy store).
pub(super) fn check_and_repair(dir: &Path) -> Result<Repairs> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Repairs::new()),
        Err(e) => return Err(read_failed(dir, e)),
    };
    let mut repairs = Repairs::new();
    for entry in entries {
        let entry = entry.map_err(|e| read_failed(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let Some(rest) = name.strip_prefix(SNAPSHOT_PREFIX) else {
            continue;
        };
        if name.ends_with(".generating") {
            // sled writes a snapshot to `snap.N.generating` and renames it
            // once complete and synced, but 0.34 counts the unfinished file
            // among the snapshots; one left by a failed write (a full disk)
            // sorts last and would make every later open fail. It is never
            // a complete snapshot, so removing it loses nothing.
            std::fs::remove_file(&path).map_err(|e| write_failed(&path, e))?;
        } else if !snapshot_is_whole(&path)? {
            let aside = dir.join(format!("{DAMAGED_SNAPSHOT_PREFIX}{rest}"));
            std::fs::rename(&path, &aside).map_err(|e| write_failed(&path, e))?;
            repairs.push(format!(
                "{} was damaged (its checksum does not match): moved to {}; the store's engine rebuilds it from its log",
                path.display(),
                aside.display()
            ));
        }
    }
    let conf = dir.join(CONF_FILE);
    if conf_is_damaged(&conf)? {
        write_conf(&conf)?;
        repairs.push(format!(
            "{} was damaged (its checksum does not match): rewritten with the configuration edudb opens its stores with",
            conf.display()
        ));
    }
    Ok(repairs)
}

/// Opens sled in `dir`. sled 0.34 panics while recovering from some
/// damage to its files (it serialises a page it could not read into its
/// new snapshot); that panic becomes [`Error::Corrupt`] naming the data
/// log, so a damaged store is an error, never a crash of the program that
/// opened it.
pub(super) fn open(dir: &Path) -> Result<sled::Result<sled::Db>> {
    catch_quietly(|| sled::Config::new().path(dir).open()).map_err(|panic| Error::Corrupt {
        key: dir.join(LOG_FILE).display().to_string(),
        message: format!(
            "the store's engine could not recover its data log ({}); `edudb salvage NEW_DIR` reads what the log still holds, page by page, into a new store",
            panic_message(&*panic)
        ),
    })
}

/// The descriptors this process has open on the data log in `dir`, on
/// which sled holds its lock (none where `/proc/self/fd` does not list
/// them).
pub(super) fn log_descriptors(dir: &Path) -> Vec<std::os::fd::RawFd> {
    let Ok(log) = std::fs::canonicalize(dir.join(LOG_FILE)) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| std::fs::read_link(entry.path()).is_ok_and(|target| target == log))
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// The trailer of a sled snapshot: its length (8 bytes) and the CRC-32 of
/// the bytes before the trailer (4 bytes, little-endian).
const SNAPSHOT_TRAILER: usize = 12;

/// True when the snapshot at `path` is long enough to hold its trailer
/// and its checksum matches its bytes.
fn snapshot_is_whole(path: &Path) -> Result<bool> {
    let bytes = std::fs::read(path).map_err(|e| read_failed(path, e))?;
    let Some(body) = bytes.len().checked_sub(SNAPSHOT_TRAILER) else {
        return Ok(false);
    };
    Ok(body > 0 && checksum_matches(&bytes[..body], &bytes[bytes.len() - 4..]))
}

/// True when sled's configuration at `path` exists with a checksum that
/// does not match its bytes. (A file of 8 bytes or fewer sled itself
/// treats as absent and rewrites.)
fn conf_is_damaged(path: &Path) -> Result<bool> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(read_failed(path, e)),
    };
    if bytes.len() <= 8 {
        return Ok(false);
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    Ok(!checksum_matches(body, crc))
}

/// True when `crc` (4 bytes, little-endian) is the CRC-32 of `body`.
fn checksum_matches(body: &[u8], crc: &[u8]) -> bool {
    crc.try_into()
        .is_ok_and(|crc| crc32fast::hash(body) == u32::from_le_bytes(crc))
}

/// Writes sled's configuration file at `path` as sled writes it, through a
/// synced temporary file renamed over it.
fn write_conf(path: &Path) -> Result<()> {
    use std::io::Write;
    let mut bytes = CONF_BODY.as_bytes().to_vec();
    bytes.extend_from_slice(&crc32fast::hash(CONF_BODY.as_bytes()).to_le_bytes());
    let temporary = path.with_extension("rewriting");
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    };
    write().map_err(|e| write_failed(path, e))
}

fn read_failed(path: &Path, e: std::io::Error) -> Error {
    Error::Storage(format!("reading {}: {e}", path.display()))
}

fn write_failed(path: &Path, e: std::io::Error) -> Error {
    Error::Storage(format!("repairing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sled directory holding one key, closed, with its configuration
    /// and a snapshot written (sled writes one when it opens a log).
    fn sled_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path()).unwrap().unwrap();
        db.insert(b"key", b"value").unwrap();
        db.flush().unwrap();
        drop(db);
        drop(open(dir.path()).unwrap().unwrap());
        dir
    }

    fn reads_back(dir: &Path) {
        let db = open(dir).unwrap().unwrap();
        assert_eq!(db.get(b"key").unwrap().as_deref(), Some(&b"value"[..]));
    }

    fn snapshots(dir: &Path, prefix: &str) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(prefix))
            .collect()
    }

    #[test]
    fn the_configuration_edudb_writes_is_the_one_sled_writes() {
        let dir = sled_dir();
        let written = std::fs::read(dir.path().join(CONF_FILE)).unwrap();
        let rewritten = dir.path().join("rewritten");
        write_conf(&rewritten).unwrap();
        assert_eq!(std::fs::read(rewritten).unwrap(), written);
        assert!(check_and_repair(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn the_segment_size_is_the_configured_one() {
        assert!(CONF_BODY.contains(&format!("segment_size: {SEGMENT_SIZE}\n")));
    }

    #[test]
    fn a_damaged_snapshot_is_moved_aside_and_the_log_replayed() {
        let dir = sled_dir();
        let [snapshot] = &snapshots(dir.path(), SNAPSHOT_PREFIX)[..] else {
            panic!("one snapshot expected")
        };
        let path = dir.path().join(snapshot);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        assert!(open(dir.path()).unwrap().is_err(), "sled reads it as is");
        let repairs = check_and_repair(dir.path()).unwrap();
        assert_eq!(repairs.len(), 1, "{repairs:?}");
        assert!(repairs[0].contains(snapshot.as_str()), "{repairs:?}");
        assert_eq!(snapshots(dir.path(), DAMAGED_SNAPSHOT_PREFIX).len(), 1);
        reads_back(dir.path());
    }

    #[test]
    fn a_damaged_configuration_is_rewritten() {
        let dir = sled_dir();
        let path = dir.path().join(CONF_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[5] = 0xff;
        std::fs::write(&path, bytes).unwrap();
        assert!(open(dir.path()).unwrap().is_err(), "sled reads it as is");
        let repairs = check_and_repair(dir.path()).unwrap();
        assert!(
            repairs.len() == 1 && repairs[0].contains("conf"),
            "{repairs:?}"
        );
        reads_back(dir.path());
        assert!(check_and_repair(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn an_unfinished_snapshot_is_removed_silently() {
        let dir = sled_dir();
        std::fs::write(dir.path().join("snap.00000000000000FF.generating"), b"half").unwrap();
        assert!(check_and_repair(dir.path()).unwrap().is_empty());
        assert_eq!(snapshots(dir.path(), SNAPSHOT_PREFIX).len(), 1);
        reads_back(dir.path());
    }
}
