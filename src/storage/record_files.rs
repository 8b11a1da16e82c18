//! Large records kept in files of their own beside sled (value
//! separation): a record over [`super::store::PIECE_BYTES`] is written
//! once, to one file, and sled holds only its manifest ([`RecordFile`]).
//! sled 0.34 writes a large value about twice (a fragment, then the leaf
//! page that absorbs it) and never reclaims the fragment, so a large
//! document cost its records' size again in sled's blobs.
//!
//! The store's batch stays the commit point: a record's file is written
//! and synced before the batch that names it is applied, and a replaced or
//! removed record's file is deleted only once that batch is durable. A
//! crash in between leaves a file no manifest names, which the next open
//! deletes ([`RecordFiles::names`] and the store's sweep).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Characters in a file's name (hex digits).
const NAME_LEN: usize = 32;
/// The first byte of an encoded [`RecordFile`] manifest.
const TAG: u8 = b'F';

/// The manifest of a record kept in a file: its length, its CRC-32 and
/// the file's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFile {
    /// The record's length in bytes.
    pub len: u64,
    /// The CRC-32 of the whole record.
    pub crc: u32,
    /// The file's name in the records directory.
    pub name: String,
}

impl RecordFile {
    /// A name for a new file: the time and a counter of this process (a
    /// clash is refused by the create, never overwritten).
    pub fn new_name() -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let count = COUNTER.fetch_add(1, Ordering::Relaxed) ^ u64::from(std::process::id()) << 40;
        format!("{nanos:016x}{count:016x}")
    }

    /// The manifest as sled keeps it: a tag, the length, the CRC, the name.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(13 + NAME_LEN);
        bytes.push(TAG);
        bytes.extend_from_slice(&self.len.to_be_bytes());
        bytes.extend_from_slice(&self.crc.to_be_bytes());
        bytes.extend_from_slice(self.name.as_bytes());
        bytes
    }

    /// Decodes a manifest; `None` unless it is one, with a well-formed name
    /// (so a damaged manifest can never name a path outside the directory).
    pub fn decode(bytes: &[u8]) -> Option<RecordFile> {
        let (&tag, rest) = bytes.split_first()?;
        let (len, rest) = rest.split_first_chunk::<8>()?;
        let (crc, name) = rest.split_first_chunk::<4>()?;
        let name = std::str::from_utf8(name).ok()?;
        (tag == TAG && is_name(name)).then(|| RecordFile {
            len: u64::from_be_bytes(*len),
            crc: u32::from_be_bytes(*crc),
            name: name.to_owned(),
        })
    }
}

fn is_name(name: &str) -> bool {
    name.len() == NAME_LEN && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A writer that counts and checksums what passes through it.
struct Checksummed<W> {
    inner: W,
    len: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(bytes)?;
        self.len += n as u64;
        self.crc.update(&bytes[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The directory of a store's record files.
#[derive(Debug)]
pub struct RecordFiles {
    dir: PathBuf,
}

impl RecordFiles {
    /// The record files in `dir` (created on the first write).
    pub fn new(dir: PathBuf) -> RecordFiles {
        RecordFiles { dir }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Links every file into the directory `to` (created), copying each
    /// where the two are on different file systems: the files, for a
    /// store rebuilt beside this one. Nothing when the directory is absent.
    pub fn link_into(&self, to: &Path) -> std::io::Result<()> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        std::fs::create_dir_all(to)?;
        for entry in entries {
            let source = entry?.path();
            let target = to.join(source.file_name().unwrap_or_default());
            if std::fs::hard_link(&source, &target).is_err() {
                std::fs::copy(&source, &target)?;
            }
        }
        Ok(())
    }

    /// Writes a new file `name` with what `fill` writes (streamed, never
    /// held whole), syncs it and the directory, and returns its length and
    /// CRC-32. On failure the file is removed again.
    pub fn create(
        &self,
        name: &str,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<(u64, u32)> {
        if !self.dir.exists() {
            std::fs::create_dir_all(&self.dir)?;
            // The new directory's entry in its parent is made durable too.
            if let Some(parent) = self.dir.parent() {
                std::fs::File::open(parent)?.sync_all()?;
            }
        }
        let path = self.dir.join(name);
        let file = std::fs::File::create_new(&path)?;
        let written = (|| {
            let mut out = Checksummed {
                inner: std::io::BufWriter::with_capacity(1 << 20, file),
                len: 0,
                crc: crc32fast::Hasher::new(),
            };
            fill(&mut out)?;
            let file = out.inner.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            std::fs::File::open(&self.dir)?.sync_all()?;
            Ok((out.len, out.crc.finalize()))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        written
    }

    /// The record `file` describes; `Ok(None)` when its file is missing
    /// (a concurrent replacement deleted it, or damage), an
    /// [`std::io::ErrorKind::InvalidData`] error when its length or
    /// checksum does not match.
    pub fn read(&self, file: &RecordFile) -> std::io::Result<Option<Vec<u8>>> {
        let bytes = match std::fs::read(self.dir.join(&file.name)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if bytes.len() as u64 != file.len || crc32fast::hash(&bytes) != file.crc {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "record file {} holds {} bytes that do not match its manifest ({} bytes, CRC {:08x})",
                    file.name,
                    bytes.len(),
                    file.len,
                    file.crc
                ),
            ));
        }
        Ok(Some(bytes))
    }

    /// Deletes the named files, as far as it can: one left behind is
    /// deleted by the sweep at the next open.
    pub fn remove<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    /// The names of the record files present (none without a directory).
    pub fn names(&self) -> std::io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            if let Some(name) = name.to_str().filter(|n| is_name(n)) {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    /// Bytes the record files occupy.
    pub fn bytes(&self) -> std::io::Result<u64> {
        self.names()?.iter().try_fold(0, |sum, name| {
            Ok(sum + std::fs::metadata(self.dir.join(name))?.len())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_a_damaged_one_names_no_path() {
        let file = RecordFile {
            len: 11,
            crc: crc32fast::hash(b"some record"),
            name: RecordFile::new_name(),
        };
        assert_eq!(RecordFile::decode(&file.encode()), Some(file.clone()));
        let mut bad = file.encode();
        let at = bad.len() - 1;
        bad[at] = b'/';
        assert_eq!(RecordFile::decode(&bad), None);
        assert_eq!(RecordFile::decode(&file.encode()[..20]), None);
        assert_ne!(RecordFile::new_name(), RecordFile::new_name());
    }

    #[test]
    fn files_are_streamed_read_checked_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let files = RecordFiles::new(dir.path().join("records"));
        assert_eq!(files.names().unwrap(), Vec::<String>::new());
        let record = vec![7u8; 3 << 20];
        let name = RecordFile::new_name();
        let (len, crc) = files
            .create(&name, |out| {
                out.write_all(&record[..1000])?;
                out.write_all(&record[1000..])
            })
            .unwrap();
        assert_eq!((len, crc), (record.len() as u64, crc32fast::hash(&record)));
        let file = RecordFile { len, crc, name };
        assert_eq!(files.read(&file).unwrap(), Some(record.clone()));
        assert_eq!(files.names().unwrap(), std::slice::from_ref(&file.name));
        assert_eq!(files.bytes().unwrap(), record.len() as u64);
        // A name already taken is refused, never overwritten.
        assert!(files.create(&file.name, |out| out.write_all(&[1])).is_err());
        assert_eq!(files.read(&file).unwrap(), Some(record));
        let other = RecordFile {
            crc: 0,
            ..file.clone()
        };
        let err = files.read(&other).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        // A write that fails leaves no file.
        let failed = files.create(&RecordFile::new_name(), |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("cut short"))
        });
        assert!(failed.is_err());
        assert_eq!(files.names().unwrap(), std::slice::from_ref(&file.name));
        // Linked beside, every file reads the same there.
        let linked = RecordFiles::new(dir.path().join("linked"));
        files.link_into(linked.dir()).unwrap();
        assert_eq!(linked.read(&file).unwrap(), files.read(&file).unwrap());
        RecordFiles::new(dir.path().join("absent"))
            .link_into(&dir.path().join("none"))
            .unwrap();
        files.remove([file.name.as_str()]);
        assert_eq!(files.read(&file).unwrap(), None);
        assert!(linked.read(&file).unwrap().is_some());
    }
}
