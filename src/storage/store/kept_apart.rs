//! Records kept apart from the engine's pages: a record over
//! [`PIECE_BYTES`] lives in a file of its own ([`RecordFiles`](crate::storage::record_files::RecordFiles)) with a small
//! manifest in its place; stores of format 6 and older kept such records
//! as numbered pieces, which are still read and removed.

use super::handle::{Batch, Bytes, SPACE_RESERVE, Store, io_failed};
use super::records::{MANIFEST, key, manifest_key, piece_key};
use crate::error::{Error, Result};
use crate::storage::record_files::RecordFile;

/// Records larger than this are kept in files of their own (stores of
/// format 6 and older kept them as pieces of this size in sled).
pub const PIECE_BYTES: usize = 256 << 10;

/// Where a record kept apart lives.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kept {
    /// In a file of its own.
    File(RecordFile),
    /// In pieces in sled (format 6 and older).
    Pieces(Manifest),
}

/// A pieced record's manifest (format 6 and older): how many pieces, the
/// record's length, and the CRC-32 of the whole record (so a read that
/// raced a replacement of the record, or a damaged piece, is caught rather
/// than returned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Manifest {
    pub(super) pieces: u32,
    pub(super) len: u64,
    pub(super) crc: u32,
}

impl Manifest {
    /// Length of an encoded manifest.
    const LEN: usize = 16;

    #[cfg(test)]
    pub(super) fn of(bytes: &[u8]) -> Option<Manifest> {
        Some(Manifest {
            pieces: u32::try_from(bytes.len().div_ceil(PIECE_BYTES)).ok()?,
            len: bytes.len() as u64,
            crc: crc32fast::hash(bytes),
        })
    }

    #[cfg(test)]
    pub(super) fn encode(self) -> [u8; 16] {
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&self.pieces.to_be_bytes());
        bytes[4..12].copy_from_slice(&self.len.to_be_bytes());
        bytes[12..].copy_from_slice(&self.crc.to_be_bytes());
        bytes
    }

    /// Decodes a manifest, refusing one whose count and length disagree
    /// (so a damaged one can never ask for an absurd allocation).
    pub(super) fn decode(bytes: &[u8], kind: u8, id: &str) -> Result<Manifest> {
        let corrupt = |message: &str| Error::Corrupt {
            key: format!("{}{id}", kind as char),
            message: message.into(),
        };
        let not_16 = || corrupt("piece manifest is not 16 bytes");
        let (pieces, rest) = bytes.split_first_chunk::<4>().ok_or_else(not_16)?;
        let (len, crc) = rest.split_first_chunk::<8>().ok_or_else(not_16)?;
        let crc: [u8; 4] = crc.try_into().map_err(|_| not_16())?;
        let manifest = Manifest {
            pieces: u32::from_be_bytes(*pieces),
            len: u64::from_be_bytes(*len),
            crc: u32::from_be_bytes(crc),
        };
        let piece = PIECE_BYTES as u64;
        let consistent = manifest.pieces > 0
            && manifest.len > u64::from(manifest.pieces - 1) * piece
            && manifest.len <= u64::from(manifest.pieces) * piece;
        if !consistent {
            return Err(corrupt("piece manifest's count and length disagree"));
        }
        Ok(manifest)
    }
}

impl Store {
    /// Adds record `kind` of document `id` to `batch`: whole when it is at
    /// most [`PIECE_BYTES`], else in a file of its own with a manifest;
    /// whatever was stored for it before (whole, in a file or pieced) is
    /// replaced entirely.
    pub(super) fn insert_record<'a>(
        &'a self,
        batch: &mut Batch<'a>,
        kind: u8,
        id: &str,
        bytes: &[u8],
    ) -> Result<()> {
        if bytes.len() > PIECE_BYTES {
            return self.insert_streamed(batch, kind, id, bytes.len() as u64, |out| {
                out.write_all(bytes)
            });
        }
        self.remove_kept_apart(batch, kind, id)?;
        batch.insert(&key(kind, id), bytes);
        Ok(())
    }

    /// Adds record `kind` of document `id` to `batch` as a file of its own
    /// that `fill` writes (about `size` bytes, for the free-space check),
    /// replacing whatever was stored for it before.
    pub(super) fn insert_streamed<'a>(
        &'a self,
        batch: &mut Batch<'a>,
        kind: u8,
        id: &str,
        size: u64,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<()> {
        self.remove_kept_apart(batch, kind, id)?;
        self.ensure_space(SPACE_RESERVE + 2 * size, size)?;
        let name = RecordFile::new_name();
        let (len, crc) =
            (self.files.create(&name, fill)).map_err(|e| io_failed(self.files.dir(), e))?;
        batch.add_file(&self.files, name.clone());
        batch.remove(&key(kind, id));
        batch.insert(
            &manifest_key(kind, id),
            &RecordFile { len, crc, name }.encode(),
        );
        Ok(())
    }

    /// Adds to `batch` the removal of record `kind` of document `id` where
    /// it is kept apart: its manifest, and its file (deleted once the batch
    /// is durable) or its pieces. A damaged manifest does not stop it: the
    /// pieces are found by a scan, and a file is left to the sweep at open.
    pub(super) fn remove_kept_apart(
        &self,
        batch: &mut Batch<'_>,
        kind: u8,
        id: &str,
    ) -> Result<()> {
        match self.manifest(kind, id) {
            Ok(Some(Kept::File(file))) => batch.stale.push(file.name),
            Ok(Some(Kept::Pieces(manifest))) => {
                for index in 0..manifest.pieces {
                    batch.remove(&piece_key(kind, id, index));
                }
            }
            Ok(None) => {}
            Err(_) => {
                let start = piece_key(kind, id, 0);
                let end = piece_key(kind, id, u32::MAX);
                for (key, _) in self.scan_between(&start, &end)?.map_while(Result::ok) {
                    batch.remove(&key);
                }
            }
        }
        batch.remove(&manifest_key(kind, id));
        Ok(())
    }

    /// Where record `kind` of document `id` is kept, when it is kept apart.
    pub(super) fn manifest(&self, kind: u8, id: &str) -> Result<Option<Kept>> {
        let Some(bytes) = self.value(&manifest_key(kind, id))? else {
            return Ok(None);
        };
        if let Some(file) = RecordFile::decode(&bytes) {
            return Ok(Some(Kept::File(file)));
        }
        Manifest::decode(&bytes, kind, id).map(|m| Some(Kept::Pieces(m)))
    }

    /// Record `kind` of document `id`, whole or joined from its pieces.
    /// A pieced record is read in several steps that a concurrent writer
    /// replacing it can interleave with: a read whose pieces do not match
    /// the manifest's checksum is tried again, a few times, before it is
    /// reported as damage.
    pub(super) fn record(&self, kind: u8, id: &str) -> Result<Option<Bytes>> {
        const READS: usize = 3;
        let mut attempt = 0;
        loop {
            if let Some(whole) = self.value(&key(kind, id))? {
                return Ok(Some(whole));
            }
            let joined = match self.manifest(kind, id)? {
                None => return Ok(None),
                Some(Kept::Pieces(manifest)) => self.join_pieces(kind, id, manifest)?,
                Some(Kept::File(file)) => self.read_file(kind, id, &file)?,
            };
            match joined {
                Ok(joined) => return Ok(Some(joined.into())),
                Err(damage) if attempt + 1 == READS => return Err(damage),
                Err(_) => attempt += 1,
            }
        }
    }

    /// The record `file` holds; the inner error when it is missing or does
    /// not match its manifest (a replacement deleted it after this read its
    /// manifest, or damage).
    fn read_file(&self, kind: u8, id: &str, file: &RecordFile) -> Result<Result<Vec<u8>>> {
        let damage = |message: String| Error::Corrupt {
            key: format!("{}{id}", kind as char),
            message,
        };
        Ok(match self.files.read(file) {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(damage(format!("record file {} is missing", file.name))),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(damage(e.to_string())),
            Err(e) => return Err(io_failed(self.files.dir(), e)),
        })
    }

    /// The pieces `manifest` lists, joined; the inner error when they do
    /// not make the record it describes.
    fn join_pieces(&self, kind: u8, id: &str, manifest: Manifest) -> Result<Result<Vec<u8>>> {
        let len = usize::try_from(manifest.len).unwrap_or(usize::MAX);
        // Grown as pieces arrive past 64 MiB: a damaged length must not
        // turn into one absurd allocation.
        let mut joined = Vec::with_capacity(len.min(64 << 20));
        let mut pieces = 0;
        let (first, last) = (
            piece_key(kind, id, 0),
            piece_key(kind, id, manifest.pieces - 1),
        );
        for entry in self.scan_between(&first, &last)? {
            let (_, piece) = entry?;
            if joined.len() + piece.len() > len {
                break;
            }
            joined.extend_from_slice(&piece);
            pieces += 1;
        }
        let whole = pieces == manifest.pieces
            && joined.len() == len
            && crc32fast::hash(&joined) == manifest.crc;
        Ok(if whole {
            Ok(joined)
        } else {
            Err(Error::Corrupt {
                key: format!("{}{id}", kind as char),
                message: format!(
                    "{pieces} pieces of {} bytes do not make the record of {} pieces and {} bytes its manifest describes",
                    joined.len(),
                    manifest.pieces,
                    manifest.len
                ),
            })
        })
    }

    /// Deletes the record files no manifest names: those of a write a crash
    /// cut short, or of a replacement whose flush never came. Nothing is
    /// deleted while any manifest cannot be read, nor on a read-only file
    /// system, nor unless sled's file can be synced first.
    pub(super) fn sweep_record_files(&self) -> Result<()> {
        let present = self
            .files
            .names()
            .map_err(|e| io_failed(self.files.dir(), e))?;
        if present.is_empty() {
            return Ok(());
        }
        let mut named = std::collections::HashSet::new();
        for entry in self.scan(&[MANIFEST])? {
            let Ok((_, value)) = entry else {
                return Ok(());
            };
            if let Some(file) = RecordFile::decode(&value) {
                named.insert(file.name);
            } else if value.len() != Manifest::LEN {
                return Ok(());
            }
        }
        let unnamed: Vec<&str> = (present.iter().map(String::as_str))
            .filter(|n| !named.contains(*n))
            .collect();
        if unnamed.is_empty() {
            return Ok(());
        }
        // The manifests just read may have been recovered from a log a
        // crashed process wrote but never synced: sync the log first, so no
        // file goes while the manifests naming its replacement could still
        // be lost to a crash of the machine.
        if self.sync_log().is_ok() {
            self.files.remove(unnamed);
        }
        Ok(())
    }

    /// Stores record `kind` of `id` as stores of format 6 and older did:
    /// in pieces in sled, with a [`Manifest`].
    #[cfg(test)]
    pub(super) fn store_pieced(&self, kind: u8, id: &str, bytes: &[u8]) {
        let mut batch = Batch::default();
        self.remove_kept_apart(&mut batch, kind, id).unwrap();
        batch.remove(&key(kind, id));
        let manifest = Manifest::of(bytes).unwrap();
        batch.insert(&manifest_key(kind, id), &manifest.encode());
        for (index, piece) in (0..).zip(bytes.chunks(PIECE_BYTES)) {
            batch.insert(&piece_key(kind, id, index), piece);
        }
        self.apply(batch).unwrap();
        self.flush().unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::handle::RECORD_FILES_DIR;
    use crate::storage::store::test_support::*;

    /// A store holding document `big` whose text is pieced as format 6
    /// kept it.
    fn store_with_pieced_text() -> (tempfile::TempDir, Store, Document) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let big = large("big", 3 * PIECE_BYTES);
        put(&store, &big);
        store.store_pieced(TEXT, "big", big.text.as_bytes());
        (dir, store, big)
    }

    /// The record files the manifests name, sorted.
    fn files_named(store: &Store) -> Vec<String> {
        let mut names: Vec<String> = (store.scan(&[MANIFEST]).unwrap())
            .filter_map(|entry| RecordFile::decode(&entry.unwrap().1))
            .map(|f| f.name)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn large_records_are_kept_in_files_that_are_replaced_and_removed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (bytes, apart) in [
            (3 * PIECE_BYTES, true),
            (PIECE_BYTES + PIECE_BYTES / 2, true),
            (2_000, false),
            (2 * PIECE_BYTES, true),
        ] {
            let before = files_named(&store);
            let big = large("big", bytes);
            put(&store, &big);
            let stored = store.get("big").unwrap().unwrap();
            assert_eq!(stored.to_document().unwrap(), big);
            let manifest = store.manifest(TEXT, "big").unwrap();
            assert_eq!(manifest.is_some(), apart, "{bytes} bytes");
            assert_eq!(store.holds(&key(TEXT, "big")).unwrap(), !apart);
            if let Some(manifest) = manifest {
                let Kept::File(file) = manifest else {
                    panic!("a new record is kept in a file, not in pieces");
                };
                assert_eq!(file.len, big.text.len() as u64);
            }
            // The replaced record's files stay until the flush that makes
            // their replacement durable, then go.
            assert!(
                before
                    .iter()
                    .all(|name| files_present(&store).contains(name))
            );
            store.flush().unwrap();
            assert_eq!(files_present(&store), files_named(&store), "{bytes} bytes");
            // Nothing stale is left behind: check would name it.
            assert_eq!(store.check().unwrap(), 1, "{bytes} bytes");
            for entry in store.scan(&[]).unwrap() {
                let (k, v) = entry.unwrap();
                assert!(v.len() <= PIECE_BYTES, "{:?} holds {} bytes", k, v.len());
            }
        }
        remove_whole(&store, "big");
        assert_eq!(store.check().unwrap(), 0);
    }

    #[test]
    fn record_files_no_manifest_names_are_deleted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let big = large("big", 2 * PIECE_BYTES);
        let kept;
        {
            let store = Store::open(dir.path()).unwrap();
            put(&store, &big);
            store.flush().unwrap();
            kept = files_named(&store);
            // A write cut short before its batch: its file, no manifest.
            store
                .files
                .create(&RecordFile::new_name(), |out| {
                    out.write_all(b"never committed")
                })
                .unwrap();
            // A replacement whose flush never came: the old files stay.
            put(&store, &big);
            assert_eq!(files_present(&store).len(), 2 * kept.len() + 1);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(files_present(&store), files_named(&store));
        assert_eq!(
            store.get("big").unwrap().unwrap().to_document().unwrap(),
            big
        );
        assert_eq!(store.check().unwrap(), 1);
    }

    #[test]
    fn a_missing_or_altered_record_file_is_damage_and_still_removable() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &large("big", 3 * PIECE_BYTES));
        put(&store, &doc("small", "A small document beside it."));
        let Some(Kept::File(text)) = store.manifest(TEXT, "big").unwrap() else {
            panic!("the text is kept in a file");
        };
        let path = dir.path().join(RECORD_FILES_DIR).join(&text.name);
        // Same length, other bytes: only the checksum can tell.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = store.get("big").err().unwrap();
        assert!(err.to_string().contains("do not match"), "{err}");
        std::fs::remove_file(&path).unwrap();
        let err = store.get("big").err().unwrap();
        assert!(err.to_string().contains("is missing"), "{err}");
        let damaged: Vec<String> = (store.check_all(&Default::default()).unwrap().damaged)
            .into_iter()
            .map(|d| d.doc)
            .collect();
        assert_eq!(damaged, ["big"]);
        remove_whole(&store, "big");
        assert_eq!(store.check().unwrap(), 1);
    }

    #[test]
    fn pieced_records_of_format_6_are_read_then_rewritten_to_files() {
        let (_dir, store, big) = store_with_pieced_text();
        assert!(matches!(
            store.manifest(TEXT, "big").unwrap(),
            Some(Kept::Pieces(_))
        ));
        assert_eq!(
            store.get("big").unwrap().unwrap().to_document().unwrap(),
            big
        );
        assert_eq!(store.check().unwrap(), 1);
        put(&store, &big);
        assert!(matches!(
            store.manifest(TEXT, "big").unwrap(),
            Some(Kept::File(_))
        ));
        assert_eq!(store.scan(&[PIECE]).unwrap().count(), 0);
        assert_eq!(
            store.get("big").unwrap().unwrap().to_document().unwrap(),
            big
        );
        store.store_pieced(TEXT, "big", big.text.as_bytes());
        remove_whole(&store, "big");
    }

    #[test]
    fn a_missing_or_stray_piece_is_named_as_damage() {
        let (_dir, store, _) = store_with_pieced_text();
        put(&store, &doc("small", "A small document beside it."));
        store.remove_raw(piece_key(TEXT, "big", 1)).unwrap();
        let err = store.get("big").err().unwrap();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        store
            .put_raw(piece_key(TREE, "gone", 0), b"stray".as_slice())
            .unwrap();
        let damaged: Vec<String> = store
            .check_all(&Default::default())
            .unwrap()
            .damaged
            .into_iter()
            .map(|d| d.doc)
            .collect();
        assert_eq!(damaged, ["gone", "big"]);
        store.remove("big").unwrap();
        assert_eq!(stored_keys(&store, "big"), 0);
    }

    #[test]
    fn an_altered_piece_or_a_damaged_manifest_is_caught_and_still_removable() {
        let (_dir, store, _) = store_with_pieced_text();
        // Same length, other bytes: only the checksum can tell.
        let piece = piece_key(TEXT, "big", 1);
        let mut bytes = store.value(&piece).unwrap().unwrap().to_vec();
        bytes[10] ^= 1;
        store.put_raw(&piece, bytes).unwrap();
        let err = store.get("big").err().unwrap();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        // A manifest whose count and length disagree is refused, and the
        // document is still removed whole, pieces found by a scan.
        let manifest = Manifest {
            pieces: u32::MAX,
            len: 1,
            crc: 0,
        };
        store
            .put_raw(manifest_key(TEXT, "big"), manifest.encode())
            .unwrap();
        let err = store.get("big").err().unwrap();
        assert!(
            err.to_string().contains("count and length disagree"),
            "{err}"
        );
        store.remove("big").unwrap();
        assert_eq!(stored_keys(&store, "big"), 0);
        assert_eq!(store.check().unwrap(), 0);
    }
}
