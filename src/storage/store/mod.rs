//! The storage seam: the only module that calls sled. Everything the store
//! persists goes through [`Store`], whose invariants are tested here:
//!
//! - a document is six records (meta, text, EDUs, tree, vectors, DAG) written
//!   with one change-log entry in one atomic batch, so after a crash it is
//!   entirely present or entirely absent;
//! - the store records which embedder made its vectors;
//! - every change gets a sequence number in the log, which derived indexes
//!   replay to catch up;
//! - records are rkyv archives, validated on access and read in place
//!   (rkyv's `unaligned` layout, so sled's unaligned buffers need no copy);
//! - a record over [`PIECE_BYTES`] is kept in a file of its own
//!   ([`RecordFiles`], value separation), with a small manifest in its
//!   place. sled reads a leaf page (4–16 neighbouring keys) whole, so a
//!   large value beside a document's metadata would make listing cost that
//!   document's size, and sled writes a large value twice and keeps both.
//!   The file is synced before the batch naming it is applied and deleted
//!   only after the batch replacing it is flushed ([`Store::flush`]);
//!   files no manifest names (a crash in between) are deleted at open.
//!   Stores of format 6 and older kept such records as numbered pieces in
//!   sled, which are read and removed as before;
//!
//! - a session's turn is written with its dialogue record (the session's
//!   tree, key prefix `S`) in the same batch as the turn's document, and a
//!   session is removed with all its turns in one batch, so a crash never
//!   leaves a dialogue naming a missing turn or a turn its dialogue lacks.
//!
//! - a write is refused with [`Error::DiskFull`] before anything reaches
//!   sled unless the file system has twice the write's bytes free plus a
//!   reserve ([`SPACE_RESERVE`], or the smaller [`REMOVAL_RESERVE`] for a
//!   write that removes records, so space can still be reclaimed, using
//!   the space a [`ballast`] file holds for it when the disk is full): sled
//!   0.34 can hang in `flush` once the disk fills under it, so edudb keeps
//!   its own writes from filling it;
//! - a failure in the file system abandons the handle ([`Store::failure`]):
//!   sled 0.34 can hang in any later flush, so later calls fail at once
//!   and dropping the store does not flush;
//! - sled's own metadata is checked before sled opens the directory
//!   ([`engine_files`]): a half-written snapshot is removed, a damaged one
//!   moved aside (sled replays its log instead) and a damaged
//!   configuration rewritten, so one bad byte there never bricks a store;
//!   where sled cannot open its data log at all, [`log_pages`] reads what
//!   the log still holds page by page into a new database, for salvage.
//!
//! Swapping the engine means rewriting this module only.

use std::path::{Path, PathBuf};

use rkyv::rancor::BoxedError;
use rkyv::vec::ArchivedVec;

use crate::compute::quantize::pack;
use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::model::dag::{ArchivedDag, Dag};
use crate::model::dialogue::{ArchivedDialogue, Dialogue};
use crate::model::document::{
    ArchivedDocMeta, ArchivedDocVectors, ArchivedFormat, ArchivedPackedVectors, DocMeta,
    DocVectors, Document, PackedVectors,
};
use crate::model::edu::{ArchivedEdu, Edu};
use crate::model::ids::SESSION_PREFIX;
use crate::model::pages::{ArchivedPageLayout, PageLayout};
use crate::model::rank::Target;
use crate::model::tree::{ArchivedTree, Tree};
use crate::storage::fork_release::ReleasedOnFork;
use crate::storage::record_files::{RecordFile, RecordFiles};
use crate::storage::vector_record::VectorRecord;
use ballast::Ballast;

mod ballast;
mod engine_files;
mod log_pages;

pub use log_pages::{LogContents, LogRecovery};

/// Version of the on-disk layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 10;

/// Older layouts this one upgrades at open, in one batch with the new
/// [`FORMAT_VERSION`] record: version 3 had no large records apart, and its
/// whole records are read as before (a later write of a document stores it
/// pieced); versions 3 and 4 stored turns without a time, and versions 3
/// to 7 kept a vector sum in every branch of a dialogue, so every
/// dialogue record is rewritten ([`crate::model::dialogue::v4`],
/// [`crate::model::dialogue::v7`]);
/// versions 3 to 5 stored information points without written text, so
/// their DAG records are rewritten ([`crate::model::dag::v5`]); versions 3
/// to 6 stored vectors as `f32` rows, which are read as they are (a lazy
/// upgrade: a document's next write stores them in 8 bits), so opening
/// such a store rewrites none of them; versions 4 to 6 kept large records
/// as pieces in sled, which are read and removed as they are. Version 8
/// had no PDF documents (their format and page records) and version 9 no
/// forgotten turns, so they need nothing rewritten (a binary of version 9
/// refuses a store that may hold them, rather than call it corrupt).
const UPGRADABLE_VERSIONS: [u32; 7] = [3, 4, 5, 6, 7, 8, 9];

/// The versions whose dialogue records are upgraded at open (versions 8
/// and 9 have this layout's dialogues).
const OLD_DIALOGUE_VERSIONS: [u32; 5] = [3, 4, 5, 6, 7];

/// The versions whose DAG records are upgraded at open.
const TEXTLESS_POINT_VERSIONS: [u32; 3] = [3, 4, 5];

/// The versions whose dialogue records are in the layout of
/// [`crate::model::dialogue::v4`] (the later ones: of
/// [`crate::model::dialogue::v7`]).
const TIMELESS_TURN_VERSIONS: [u32; 2] = [3, 4];

/// Records larger than this are kept in files of their own (stores of
/// format 6 and older kept them as pieces of this size in sled).
pub const PIECE_BYTES: usize = 256 << 10;

/// How long [`Store::open`] waits for a previous in-process `Store` on the
/// same path to release sled's file lock.
const SLED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Documents a damaged change log lost: sled recovers its log only up to
/// the first damage, dropping every change after it, which the full-text
/// index (committed after the store) shows by having applied more.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loss {
    /// The change the store recovered to.
    pub store_change: u64,
    /// The change the full-text index had applied: the store had reached it.
    pub index_change: u64,
    /// When the loss was found, in seconds since the Unix epoch.
    pub found_at: i64,
    /// The documents the index held that the store no longer has
    /// (session turns left out: they go with their session).
    pub ids: Vec<String>,
    /// The sessions whose turns the index held and whose dialogue the
    /// store no longer has.
    #[serde(default)]
    pub sessions: Vec<String>,
}

/// Takes `ids` and `sessions` off `losses`, dropping losses left empty;
/// false when none of them was on it.
fn forget_in(losses: &mut Vec<Loss>, ids: &[&str], sessions: &[&str]) -> bool {
    let listed = |losses: &Vec<Loss>| -> usize {
        losses.iter().map(|l| l.ids.len() + l.sessions.len()).sum()
    };
    let before = listed(losses);
    for loss in losses.iter_mut() {
        loss.ids.retain(|id| !ids.contains(&id.as_str()));
        loss.sessions.retain(|id| !sessions.contains(&id.as_str()));
    }
    losses.retain(|loss| !loss.ids.is_empty() || !loss.sessions.is_empty());
    listed(losses) != before
}

/// Writes `losses` (none: the record removed) to `batch`.
fn put_losses(batch: &mut Batch<'_>, losses: &[Loss]) -> Result<()> {
    if losses.is_empty() {
        batch.remove(LOST_KEY);
        return Ok(());
    }
    let json = serde_json::to_vec(losses).map_err(|e| Error::Storage(e.to_string()))?;
    batch.insert(LOST_KEY, &json);
    Ok(())
}

/// Free space a write that adds data leaves on the store's file system,
/// beyond twice its own bytes: room for sled's log segments, its snapshot
/// at the next open, and the full-text index's commit. (Saving the vector
/// graph is not covered: it is upkeep, and a failed save only costs a
/// replay next time.)
pub const SPACE_RESERVE: u64 = 8 << 20;

/// Free space a removal needs: removing must stay possible on a disk the
/// reserve has stopped ingest on, since it is how space is reclaimed.
pub const REMOVAL_RESERVE: u64 = 1 << 20;

const VERSION_KEY: &[u8] = b"\0version";
const SEQ_KEY: &[u8] = b"\0seq";
const TRIMMED_KEY: &[u8] = b"\0trimmed";
const EMBEDDER_KEY: &[u8] = b"\0embedder";
/// The documents found lost to a damaged change log ([`Loss`], JSON).
const LOST_KEY: &[u8] = b"\0lost";
const META: u8 = b'M';
const TEXT: u8 = b'T';
const EDUS: u8 = b'E';
const TREE: u8 = b'N';
/// `f32` vectors ([`DocVectors`]), as stores of format 6 and older wrote
/// them: read, never written.
const VECTORS: u8 = b'V';
/// 8-bit vectors ([`PackedVectors`]), written since format 7.
const PACKED_VECTORS: u8 = b'Q';
const DAG: u8 = b'G';
const LOG: u8 = b'L';
/// A session's dialogue record (added without a format bump: a new record
/// kind under a new prefix, which older stores simply do not have).
const SESSION: u8 = b'S';
/// What the language-model steps cost to build a document (JSON
/// [`LlmCost`]), kept only for documents built with a model; added without
/// a format bump, like sessions: a new kind under a new prefix.
const COST: u8 = b'C';
/// Where a PDF document's text lies on its pages ([`PageLayout`]), kept
/// only for documents read from a PDF (since format 9).
const PAGES: u8 = b'B';
/// The manifest of a record kept apart: `H`, the record's kind, the id;
/// the value is a [`RecordFile`], or, in stores of format 6 and older, a
/// [`Manifest`] of pieces.
const MANIFEST: u8 = b'H';
/// A piece of a record (format 6 and older): `P`, the record's kind, the
/// id, a 0 byte, the piece's index (u32, big-endian, so pieces sort in
/// order).
const PIECE: u8 = b'P';
/// The directory of the record files, inside the store's directory (sled
/// leaves other names there alone).
const RECORD_FILES_DIR: &str = "records";
/// The bytes of keys and values [`Store::rebuild_from_log`] writes per
/// batch, to bound its memory.
const REBUILD_BATCH_BYTES: usize = 64 << 20;
const RECORDS: [u8; 8] = [META, TEXT, EDUS, TREE, VECTORS, PACKED_VECTORS, DAG, PAGES];
/// The records that may be kept apart (metadata is always small).
const PIECEABLE: [u8; 7] = [TEXT, EDUS, TREE, VECTORS, PACKED_VECTORS, DAG, PAGES];

/// The persistent document store.
#[derive(Debug)]
pub struct Store {
    /// Dropped with the store unless it was abandoned (see [`Store::failure`]).
    db: std::mem::ManuallyDrop<sled::Db>,
    dir: PathBuf,
    /// The files of records kept apart.
    files: RecordFiles,
    /// Files of replaced or removed records, deleted at the next flush
    /// (once the batches that dropped them are durable).
    stale_files: std::sync::Mutex<Vec<String>>,
    /// Disk space held for removals on a full disk.
    ballast: Ballast,
    /// Why the handle was abandoned: the first file-system failure sled
    /// reported through it.
    abandoned: std::sync::OnceLock<String>,
    /// The release, in forked children, of sled's lock on its data log.
    released_on_fork: Vec<ReleasedOnFork>,
    /// Makes the next flush fail, for tests of what stands above the seam.
    #[cfg(test)]
    fail_next_flush: std::sync::atomic::AtomicBool,
}

/// The directories of stores this process abandoned (see
/// [`Store::failure`]): their sled handles stay open, holding sled's lock.
static ABANDONED: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());

/// `dir` as the file system resolves it (so two spellings of one store
/// compare equal), or as given when it cannot be resolved.
fn resolved(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_owned())
}

/// Why this process abandoned the store in `dir`, if it did.
fn abandoned_here(dir: &Path) -> Option<String> {
    let abandoned = ABANDONED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = resolved(dir);
    abandoned
        .iter()
        .find(|(path, _)| *path == dir)
        .map(|(_, cause)| cause.clone())
}

impl Drop for Store {
    /// Closes sled, which flushes it, unless the handle was abandoned:
    /// then the handle is left open for the rest of the process, since
    /// sled's flush would wait forever.
    fn drop(&mut self) {
        let released_on_fork = std::mem::take(&mut self.released_on_fork);
        if self.abandoned.get().is_none() {
            // Given up before sled closes the file, whose number another
            // file may take next.
            drop(released_on_fork);
            // SAFETY: `db` is not used again; this is the store's drop.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.db) }
        } else {
            // The file stays open for the rest of the process, and so does
            // its release in children.
            std::mem::forget(released_on_fork);
        }
    }
}

/// A sled batch that counts the bytes it adds and knows whether it is a
/// removal (which reclaims space), for the free-space check.
#[derive(Default)]
struct Batch<'a> {
    writes: sled::Batch,
    bytes: u64,
    reclaims: bool,
    /// Record files written for the batch (each as its record was added,
    /// so no large archive waits in memory for the others), removed again
    /// unless the batch is applied.
    written: Option<(&'a RecordFiles, Vec<String>)>,
    /// Record files the batch drops, deleted once it is durable.
    stale: Vec<String>,
}

impl Drop for Batch<'_> {
    /// Removes the files of a batch that was never applied.
    fn drop(&mut self) {
        if let Some((files, names)) = &self.written {
            files.remove(names.iter().map(String::as_str));
        }
    }
}

impl<'a> Batch<'a> {
    /// A batch that removes documents or log entries.
    fn reclaiming() -> Batch<'a> {
        let mut batch = Batch::default();
        batch.reclaims = true;
        batch
    }

    fn insert(&mut self, key: &[u8], value: &[u8]) {
        self.bytes += (key.len() + value.len()) as u64;
        self.writes.insert(key, value);
    }

    fn remove(&mut self, key: &[u8]) {
        self.writes.remove(key);
    }

    /// Notes a record file written for this batch.
    fn add_file(&mut self, files: &'a RecordFiles, name: String) {
        self.written
            .get_or_insert_with(|| (files, Vec::new()))
            .1
            .push(name);
    }
}

/// `bytes` for a reader: KiB below a mebibyte, MiB above.
fn size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

/// One document's weighted DAG, read in place from the store's buffer.
#[derive(Debug, Clone)]
pub struct StoredDag(sled::IVec);

/// One document's vectors, read in place from the store's buffer, in
/// whichever layout it was written ([`VectorRecord`]).
#[derive(Debug, Clone)]
pub struct StoredVectors {
    bytes: sled::IVec,
    packed: bool,
}

/// One stored document, read in place from the store's buffers.
#[derive(Debug, Clone)]
pub struct StoredDoc {
    meta: sled::IVec,
    text: sled::IVec,
    edus: sled::IVec,
    tree: sled::IVec,
    /// A PDF's page geometry (none for other formats).
    pages: Option<sled::IVec>,
}

/// A failed sled call on the store in `dir` as an error: damage sled
/// detected as [`Error::Corrupt`] naming the data log and the next step,
/// anything else as a storage error. (A failure in the file system goes
/// through [`Store::failure`] instead.)
fn storage(dir: &Path, err: sled::Error) -> Error {
    match err {
        sled::Error::Corruption { at, .. } => Error::Corrupt {
            key: format!(
                "{} (the data log){}",
                dir.join(engine_files::LOG_FILE).display(),
                at.map(|at| format!(", page at {at:?}")).unwrap_or_default()
            ),
            message: "its checksum does not match: the file was damaged; `edudb check` names the documents this affects, and `edudb salvage NEW_DIR` copies every one that still reads".into(),
        },
        other => Error::Storage(other.to_string()),
    }
}

/// [`storage`] for a failed open: damage to the data log stops the engine
/// from opening the store at all, so the next step is a copy.
fn unopenable(dir: &Path, err: sled::Error) -> Error {
    match storage(dir, err) {
        Error::Corrupt { key, .. } => Error::Corrupt {
            key,
            message: "its checksum does not match, and the store's engine cannot open the store without it; `edudb salvage NEW_DIR` reads what the log still holds, page by page, into a new store".into(),
        },
        other => other,
    }
}

/// A file-system failure in `dir` as an error: the file system's refusal
/// for lack of space as [`Error::DiskFull`], anything else as a storage
/// error.
fn io_failed(dir: &Path, err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::StorageFull {
        Error::DiskFull {
            path: dir.to_owned(),
            detail: format!(
                "{err} (the store's engine writes even while it reads, rewriting pages); a change in progress is whole or absent when the store is next opened, as are the changes this call made before it, and every earlier change is kept"
            ),
        }
    } else {
        Error::Storage(format!("{}: {err}", dir.display()))
    }
}

fn key(kind: u8, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 1);
    key.push(kind);
    key.extend_from_slice(id.as_bytes());
    key
}

/// Document `id`'s build cost record, decoded; damage when it does not.
fn decode_cost(id: &str, value: &[u8]) -> Result<LlmCost> {
    serde_json::from_slice(value).map_err(|e| Error::Corrupt {
        key: format!("cost of {id}"),
        message: e.to_string(),
    })
}

/// The key of the manifest of record `kind` of document `id`.
fn manifest_key(kind: u8, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 2);
    key.extend_from_slice(&[MANIFEST, kind]);
    key.extend_from_slice(id.as_bytes());
    key
}

/// The key of piece `index` of record `kind` of document `id`.
fn piece_key(kind: u8, id: &str, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 7);
    key.extend_from_slice(&[PIECE, kind]);
    key.extend_from_slice(id.as_bytes());
    key.push(0);
    key.extend_from_slice(&index.to_be_bytes());
    key
}

/// Where a record kept apart lives.
#[derive(Debug, Clone, PartialEq)]
enum Kept {
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
struct Manifest {
    pieces: u32,
    len: u64,
    crc: u32,
}

impl Manifest {
    /// Length of an encoded manifest.
    const LEN: usize = 16;

    #[cfg(test)]
    fn of(bytes: &[u8]) -> Option<Manifest> {
        Some(Manifest {
            pieces: u32::try_from(bytes.len().div_ceil(PIECE_BYTES)).ok()?,
            len: bytes.len() as u64,
            crc: crc32fast::hash(bytes),
        })
    }

    #[cfg(test)]
    fn encode(self) -> [u8; 16] {
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&self.pieces.to_be_bytes());
        bytes[4..12].copy_from_slice(&self.len.to_be_bytes());
        bytes[12..].copy_from_slice(&self.crc.to_be_bytes());
        bytes
    }

    /// Decodes a manifest, refusing one whose count and length disagree
    /// (so a damaged one can never ask for an absurd allocation).
    fn decode(bytes: &[u8], kind: u8, id: &str) -> Result<Manifest> {
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

fn log_key(seq: u64) -> [u8; 9] {
    let mut key = [LOG; 9];
    key[1..].copy_from_slice(&seq.to_be_bytes());
    key
}

fn read_u64(value: Option<sled::IVec>, name: &str) -> Result<u64> {
    match value {
        None => Ok(0),
        Some(v) => <[u8; 8]>::try_from(v.as_ref())
            .map(u64::from_be_bytes)
            .map_err(|_| Error::Corrupt {
                key: name.into(),
                message: "expected 8 bytes".into(),
            }),
    }
}

fn archive<T>(value: &T) -> Result<rkyv::util::AlignedVec>
where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                BoxedError,
            >,
        >,
{
    rkyv::to_bytes::<BoxedError>(value).map_err(|e| Error::Storage(format!("archiving: {e}")))
}

fn access<'a, T>(bytes: &'a [u8], what: &str) -> Result<&'a T>
where
    T: rkyv::Portable
        + for<'b> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'b, BoxedError>>,
{
    rkyv::access::<T, BoxedError>(bytes).map_err(|e| Error::Corrupt {
        key: what.into(),
        message: e.to_string(),
    })
}

/// A metadata record (`key` names it in errors), once it names the
/// document its key does ([`same_id`]).
fn decode_meta(key: &[u8], value: &[u8]) -> Result<DocMeta> {
    let name = String::from_utf8_lossy(key).into_owned();
    let archived = access::<ArchivedDocMeta>(value, &name)?;
    same_id(&String::from_utf8_lossy(&key[1..]), &archived.id, || {
        name.clone()
    })?;
    rkyv::deserialize::<DocMeta, BoxedError>(archived).map_err(|e| Error::Corrupt {
        key: name,
        message: e.to_string(),
    })
}

/// A record kept under one id that names another is damaged (a write that
/// trusted it would put its content under the other id): `Corrupt`, with
/// `record()` naming it.
fn same_id(key_id: &str, named: &str, record: impl FnOnce() -> String) -> Result<()> {
    if key_id == named {
        return Ok(());
    }
    Err(Error::Corrupt {
        key: record(),
        message: format!("kept under {key_id:?} but names {named:?}"),
    })
}

/// Decodes session `id`'s dialogue record, once it names that session
/// ([`same_id`]), and checks its tree ([`Dialogue::check_tree`]), so every
/// dialogue read from the store is safe to walk.
fn decode_dialogue(value: &[u8], id: &str) -> Result<Dialogue> {
    let name = format!("session {id}");
    let archived = access::<ArchivedDialogue>(value, &name)?;
    same_id(id, &archived.id, || name.clone())?;
    let dialogue =
        rkyv::deserialize::<Dialogue, BoxedError>(archived).map_err(|e| Error::Corrupt {
            key: name.clone(),
            message: e.to_string(),
        })?;
    dialogue
        .check_tree()
        .map_err(|message| Error::Corrupt { key: name, message })?;
    Ok(dialogue)
}

impl Store {
    /// Whether an earlier failure in the file system abandoned the handle
    /// (see [`Store::failure`]): every later call fails.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.get().is_some()
    }

    /// Abandons the handle as a full disk under sled would, for tests of
    /// what stands above the seam.
    #[cfg(test)]
    pub(crate) fn abandon(&self) {
        let _ = self.failure(sled::Error::Io(std::io::ErrorKind::StorageFull.into()));
    }

    /// Makes the next [`Store::flush`] fail (with nothing else changed),
    /// for tests of what stands above the seam.
    #[cfg(test)]
    pub(crate) fn fail_next_flush(&self) {
        self.fail_next_flush
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The sled handle, unless an earlier failure abandoned it.
    fn sled(&self) -> Result<&sled::Db> {
        match self.abandoned.get() {
            Some(cause) => Err(Error::Abandoned {
                path: self.dir.clone(),
                cause: cause.clone(),
            }),
            None => Ok(&self.db),
        }
    }

    /// A failed sled call as an error. A failure in the file system (a full
    /// disk, an I/O error) also abandons the handle: sled 0.34 can leave
    /// its log waiting forever for a write that failed (a large page whose
    /// separate file could not be written still counts as a writer of its
    /// log buffer), so any later flush, its close included, would hang.
    /// Every change was flushed before its call returned, so leaving the
    /// handle open loses nothing a call reported done (the changes of the
    /// failing call, unflushed, may be lost, each whole); later calls
    /// through it fail with [`Error::Abandoned`].
    fn failure(&self, err: sled::Error) -> Error {
        let sled::Error::Io(err) = err else {
            return storage(&self.dir, err);
        };
        if self.abandoned.set(err.to_string()).is_ok() {
            ABANDONED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((resolved(&self.dir), err.to_string()));
        }
        io_failed(&self.dir, err)
    }

    /// The next entry of a scan over the records of `kind`, or `None` at
    /// its end or at a page sled cannot read: that is recorded as damage
    /// (naming the last key read before it) and the scan ends, since sled
    /// would fail on the same page again. A failure in the file system is
    /// not damage: it fails the scan.
    fn next_or_damage<T>(
        &self,
        scan: &mut impl Iterator<Item = sled::Result<T>>,
        kind: u8,
        damaged: &mut Vec<Damage>,
    ) -> Result<Option<T>> {
        match scan.next() {
            None => Ok(None),
            Some(Ok(entry)) => Ok(Some(entry)),
            Some(Err(err @ sled::Error::Io(_))) => Err(self.failure(err)),
            Some(Err(err)) => {
                let what = format!("the {} records", kind as char);
                damaged.push(Damage {
                    doc: what.clone(),
                    error: Error::Corrupt {
                        key: what,
                        message: format!(
                            "sled cannot read a page of them, and the scan stopped there: {err}"
                        ),
                    },
                });
                Ok(None)
            }
        }
    }

    /// Opens (creating if needed) the sled database in `dir` and checks its format version.
    ///
    /// The caller holds the store directory's process lock, so sled's own
    /// file lock can only be held by this process's previous `Store` on the
    /// same path, whose background flusher may still be shutting down; that
    /// case is retried for up to [`SLED_LOCK_WAIT`].
    pub fn open(dir: &Path) -> Result<Store> {
        if let Some(cause) = abandoned_here(dir) {
            return Err(Error::Abandoned {
                path: dir.to_owned(),
                cause,
            });
        }
        for repair in engine_files::check_and_repair(dir)? {
            tracing::warn!("{repair}");
        }
        // sled writes a snapshot whenever it opens: on a full disk, the
        // room kept for removals lets it, and a removal after it.
        let ballast = Ballast::new(dir);
        if fs4::available_space(dir).is_ok_and(|free| free < REMOVAL_RESERVE) {
            ballast.release();
        }
        let started = std::time::Instant::now();
        let db = loop {
            match engine_files::open(dir)? {
                Err(sled::Error::Io(e))
                    // sled reports its lock conflict as `Other` with this text.
                    if e.to_string().starts_with("could not acquire lock")
                        && started.elapsed() < SLED_LOCK_WAIT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(sled::Error::Io(e)) => return Err(io_failed(dir, e)),
                other => break other.map_err(|e| unopenable(dir, e))?,
            }
        };
        let released_on_fork = (engine_files::log_descriptors(dir).into_iter())
            .map(ReleasedOnFork::register)
            .collect();
        let store = Store {
            db: std::mem::ManuallyDrop::new(db),
            released_on_fork,
            dir: dir.to_owned(),
            files: RecordFiles::new(dir.join(RECORD_FILES_DIR)),
            stale_files: std::sync::Mutex::default(),
            ballast,
            abandoned: std::sync::OnceLock::new(),
            #[cfg(test)]
            fail_next_flush: Default::default(),
        };
        let version = |v: u32| v.to_string().into_bytes();
        // The version record to write: none for a current store; for an
        // older one the record and its rewritten dialogues and DAGs, held
        // to the small reserve. Dialogues hold no text (though one of a
        // thousand turns in the layout of versions 5 to 7 is about 0.7 MB);
        // DAGs are about a tenth of their documents' text, so an old store
        // of version 5 or older on a disk without room for them fails to
        // open with `DiskFull` until some space is freed, and is then
        // upgraded whole.
        let db = store.sled()?;
        let found = db.get(VERSION_KEY).map_err(|e| store.failure(e))?;
        let upgradable = (found.as_ref())
            .and_then(|found| UPGRADABLE_VERSIONS.iter().find(|&&v| found == &version(v)));
        let record = match found {
            Some(found) if found.as_ref() == version(FORMAT_VERSION) => None,
            Some(_) if upgradable.is_some() => Some((Batch::reclaiming(), upgradable.copied())),
            Some(found) => {
                return Err(Error::FormatVersion {
                    path: dir.to_owned(),
                    found: String::from_utf8_lossy(&found).into_owned(),
                    expected: FORMAT_VERSION,
                });
            }
            None if db.is_empty() => Some((Batch::default(), None)),
            None => return Err(Error::NotAStore(dir.to_owned())),
        };
        if let Some((mut batch, old)) = record {
            if let Some(old) = old.filter(|old| OLD_DIALOGUE_VERSIONS.contains(old)) {
                store.upgrade_dialogues(&mut batch, TIMELESS_TURN_VERSIONS.contains(&old))?;
                if TEXTLESS_POINT_VERSIONS.contains(&old) {
                    store.upgrade_dags(&mut batch)?;
                }
            }
            batch.insert(VERSION_KEY, &version(FORMAT_VERSION));
            store.apply(batch)?;
            store.flush()?;
        }
        store.sweep_record_files()?;
        store.ballast.restore(REMOVAL_RESERVE);
        Ok(store)
    }

    /// Reads the data log of the store in sled directory `dir` page by
    /// page, without the engine (`dir` is only read): what it still holds,
    /// and how much of it did not read. None when `dir` holds no log.
    pub fn read_log(dir: &Path) -> Result<Option<LogContents>> {
        log_pages::read(dir)
    }

    /// Writes `contents`, read from the data log of the store in sled
    /// directory `damaged` ([`Store::read_log`]), into a new engine
    /// database in `into`, beside links to (or, across file systems,
    /// copies of) `damaged`'s record files: a store to salvage from when
    /// the engine cannot open `damaged`, or would cut its log short.
    /// `damaged` is only read. Returns how the reading went.
    pub fn rebuild_from_log(
        contents: LogContents,
        damaged: &Path,
        into: &Path,
    ) -> Result<LogRecovery> {
        let records = contents.records();
        if !records.contains_key(VERSION_KEY) {
            return Err(Error::Corrupt {
                key: format!("{} (the data log)", damaged.join(engine_files::LOG_FILE).display()),
                message: "not even the store's format record reads in it, so nothing in it can be read as a store's".into(),
            });
        }
        let db = engine_files::open(into)?.map_err(|e| storage(into, e))?;
        let mut batch = sled::Batch::default();
        let mut bytes = 0;
        for (key, value) in records {
            batch.insert(key.as_slice(), value.as_slice());
            bytes += key.len() + value.len();
            if bytes > REBUILD_BATCH_BYTES {
                db.apply_batch(std::mem::take(&mut batch))
                    .map_err(|e| storage(into, e))?;
                bytes = 0;
            }
        }
        db.apply_batch(batch).map_err(|e| storage(into, e))?;
        db.flush().map_err(|e| storage(into, e))?;
        drop(db);
        let files = into.join(RECORD_FILES_DIR);
        (RecordFiles::new(damaged.join(RECORD_FILES_DIR)).link_into(&files)).map_err(|source| {
            Error::Io {
                path: files,
                source,
            }
        })?;
        Ok(contents.recovery())
    }

    /// Deletes the record files no manifest names: those of a write a crash
    /// cut short, or of a replacement whose flush never came. Nothing is
    /// deleted while any manifest cannot be read, nor on a read-only file
    /// system, nor unless sled's file can be synced first.
    fn sweep_record_files(&self) -> Result<()> {
        let present = self
            .files
            .names()
            .map_err(|e| io_failed(self.files.dir(), e))?;
        if present.is_empty() {
            return Ok(());
        }
        let mut named = std::collections::HashSet::new();
        for entry in self.sled()?.scan_prefix([MANIFEST]) {
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
        // crashed process wrote but never synced: sync sled's file first,
        // so no file goes while the manifests naming its replacement could
        // still be lost to a crash of the machine.
        let synced = std::fs::File::open(self.dir.join("db")).and_then(|db| db.sync_all());
        if synced.is_ok() {
            self.files.remove(unnamed);
        }
        Ok(())
    }

    /// Adds to `batch` every dialogue record rewritten to this layout from
    /// that of versions 3 and 4 ([`crate::model::dialogue::v4`], when
    /// `timeless`) or of versions 5 to 7 ([`crate::model::dialogue::v7`]).
    fn upgrade_dialogues(&self, batch: &mut Batch<'_>, timeless: bool) -> Result<()> {
        use crate::model::dialogue::{v4, v7};
        // A record that does not decode in the old layout is left as it is:
        // read in the new one it is damage, which `check` names. A page
        // sled cannot read fails the open instead: recording the new
        // version past it would leave the dialogues behind it unreadable.
        for entry in self.sled()?.scan_prefix([SESSION]) {
            let (key, value) = entry.map_err(|e| self.failure(e))?;
            let upgraded = if timeless {
                rkyv::access::<v4::ArchivedDialogue, BoxedError>(&value)
                    .and_then(rkyv::deserialize::<v4::Dialogue, BoxedError>)
                    .map(Dialogue::from)
            } else {
                rkyv::access::<v7::ArchivedDialogue, BoxedError>(&value)
                    .and_then(rkyv::deserialize::<v7::Dialogue, BoxedError>)
                    .map(Dialogue::from)
            };
            if let Ok(dialogue) = upgraded {
                batch.insert(&key, &archive(&dialogue)?);
            }
        }
        Ok(())
    }

    /// Adds to `batch` every DAG record rewritten from the layout of
    /// versions 3 to 5 ([`crate::model::dag::v5`]) to this one, whole or
    /// pieced as its size asks. A record that does not decode in the old
    /// layout (or whose pieces do not make it) is left as it is, for
    /// `check` to name. A page sled cannot read fails the open instead:
    /// recording the new version past it would leave that DAG unreadable.
    fn upgrade_dags<'a>(&'a self, batch: &mut Batch<'a>) -> Result<()> {
        use crate::model::dag::v5;
        for id in self.ids()? {
            let value = match self.record(DAG, &id) {
                Ok(Some(value)) => value,
                Ok(None) | Err(Error::Corrupt { .. }) => continue,
                Err(failure) => return Err(failure),
            };
            let old = rkyv::access::<v5::ArchivedDag, BoxedError>(&value)
                .and_then(rkyv::deserialize::<v5::Dag, BoxedError>);
            if let Ok(old) = old {
                self.insert_record(batch, DAG, &id, &archive(&Dag::from(old))?)?;
            }
        }
        Ok(())
    }

    /// The sequence number of the latest change (0 for a new store).
    pub fn last_seq(&self) -> Result<u64> {
        read_u64(
            self.sled()?.get(SEQ_KEY).map_err(|e| self.failure(e))?,
            "seq",
        )
    }

    /// The highest sequence number already dropped from the change log.
    pub fn trimmed_seq(&self) -> Result<u64> {
        read_u64(
            self.sled()?.get(TRIMMED_KEY).map_err(|e| self.failure(e))?,
            "trimmed",
        )
    }

    /// The embedder configuration recorded for this store, if any.
    pub fn embedder_config(&self) -> Result<Option<String>> {
        Ok(self
            .sled()?
            .get(EMBEDDER_KEY)
            .map_err(|e| self.failure(e))?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Every loss recorded ([`Store::record_loss`]), oldest first.
    pub fn losses(&self) -> Result<Vec<Loss>> {
        let Some(json) = self.sled()?.get(LOST_KEY).map_err(|e| self.failure(e))? else {
            return Ok(Vec::new());
        };
        serde_json::from_slice(&json).map_err(|e| Error::Corrupt {
            key: "the record of lost documents".into(),
            message: e.to_string(),
        })
    }

    /// Records (durably) that a damaged change log lost `loss`'s
    /// documents and sessions (those recorded already are not repeated),
    /// so that every later check names them until each is stored again or
    /// removed ([`Store::forget_lost`]).
    pub fn record_loss(&self, mut loss: Loss) -> Result<()> {
        let mut losses = self.losses()?;
        for earlier in &losses {
            loss.ids.retain(|id| !earlier.ids.contains(id));
            loss.sessions.retain(|id| !earlier.sessions.contains(id));
        }
        if loss.ids.is_empty() && loss.sessions.is_empty() {
            return Ok(());
        }
        losses.push(loss);
        let mut batch = Batch::default();
        put_losses(&mut batch, &losses)?;
        self.apply(batch)?;
        self.flush()
    }

    /// Takes document `id` (or, with `session`, session `id`) off the
    /// record of losses, its loss acknowledged; false when it was not on
    /// it, or the record cannot be read (a check names that).
    pub fn forget_lost(&self, id: &str, session: bool) -> Result<bool> {
        let Ok(mut losses) = self.losses() else {
            return Ok(false);
        };
        let (ids, sessions) = if session {
            (&[][..], &[id][..])
        } else {
            (&[id][..], &[][..])
        };
        if !forget_in(&mut losses, ids, sessions) {
            return Ok(false);
        }
        let mut batch = Batch::reclaiming();
        put_losses(&mut batch, &losses)?;
        self.apply(batch)?;
        self.flush()?;
        Ok(true)
    }

    /// Records the store's embedder configuration (durably).
    pub fn set_embedder_config(&self, config: &str) -> Result<()> {
        let mut batch = Batch::default();
        batch.insert(EMBEDDER_KEY, config.as_bytes());
        self.apply(batch)?;
        self.flush()
    }

    /// Writes `doc`, its vectors, its DAG and what a language model cost
    /// to build it (replacing any document with its id, and its cost) in one
    /// atomic batch; returns the change's sequence number.
    pub fn put(
        &self,
        doc: &Document,
        vectors: &PackedVectors,
        dag: &Dag,
        cost: &LlmCost,
    ) -> Result<u64> {
        let mut batch = Batch::default();
        self.insert_document(&mut batch, doc, vectors, dag)?;
        let cost_key = key(COST, &doc.meta.id);
        if cost.is_zero() {
            batch.remove(&cost_key);
        } else {
            let json = serde_json::to_vec(cost)
                .map_err(|e| Error::Storage(format!("encoding a build cost: {e}")))?;
            batch.insert(&cost_key, &json);
        }
        self.apply_logged(batch, &[&doc.meta.id])
    }

    /// What a language model cost to build each document that was built
    /// with one, in id order. A record that does not decode is damage.
    pub fn costs(&self) -> Result<Vec<(String, LlmCost)>> {
        let mut costs = Vec::new();
        for entry in self.sled()?.scan_prefix([COST]) {
            let (key, value) = entry.map_err(|e| self.failure(e))?;
            let id = String::from_utf8_lossy(&key[1..]).into_owned();
            let cost = decode_cost(&id, &value)?;
            costs.push((id, cost));
        }
        Ok(costs)
    }

    /// Appends a change-log entry for each of `ids`, numbered after the last
    /// change, to `batch` and applies it atomically; returns the last
    /// sequence number. The caller holds the only writer.
    fn apply_logged(&self, mut batch: Batch<'_>, ids: &[&str]) -> Result<u64> {
        let mut seq = self.last_seq()?;
        for id in ids {
            seq += 1;
            batch.insert(&log_key(seq), id.as_bytes());
        }
        batch.insert(SEQ_KEY, &seq.to_be_bytes());
        // Documents (and sessions, through their turns) written or removed
        // are no longer lost: their losses are forgotten with the change.
        // An unreadable record is left for the check to name.
        if let Ok(mut losses) = self.losses() {
            let sessions: Vec<&str> = (ids.iter())
                .filter_map(|id| crate::model::ids::parse_turn_id(id).map(|(session, _)| session))
                .collect();
            if forget_in(&mut losses, ids, &sessions) {
                put_losses(&mut batch, &losses)?;
            }
        }
        self.apply(batch)?;
        Ok(seq)
    }

    /// Applies `batch` atomically once the file system has room for it
    /// (see [`Store::ensure_space`]).
    fn apply(&self, mut batch: Batch<'_>) -> Result<()> {
        let reserve = if batch.reclaims {
            REMOVAL_RESERVE
        } else {
            SPACE_RESERVE
        };
        let needed = reserve + 2 * batch.bytes;
        if let Err(full) = self.ensure_space(needed, batch.bytes) {
            // A removal on a full disk uses the room kept for it.
            if !(batch.reclaims && self.ballast.release()) {
                return Err(full);
            }
            self.ensure_space(needed, batch.bytes)?;
        }
        let writes = std::mem::take(&mut batch.writes);
        let applied = self.sled()?.apply_batch(writes);
        // Applied, the batch's files are named by it. A failed apply may
        // still reach sled's log, so its files are left for the sweep at
        // the next open to judge, not removed here.
        batch.written = None;
        applied.map_err(|e| self.failure(e))?;
        self.stale_files().append(&mut batch.stale);
        if batch.reclaims {
            self.ballast.restore(REMOVAL_RESERVE);
        }
        Ok(())
    }

    /// Refuses a write of `bytes` with [`Error::DiskFull`] unless the
    /// store's file system has `needed` bytes free.
    fn ensure_space(&self, needed: u64, bytes: u64) -> Result<()> {
        let available = fs4::available_space(&self.dir)
            .map_err(|e| Error::Storage(format!("free space of {}: {e}", self.dir.display())))?;
        if available < needed {
            return Err(Error::DiskFull {
                path: self.dir.clone(),
                detail: format!(
                    "this write needs {} free (its {} plus the store's reserve) and {} are available; nothing of it was stored and every earlier change is kept",
                    size(needed),
                    size(bytes),
                    size(available)
                ),
            });
        }
        Ok(())
    }

    /// Replaces the DAG of existing document `id` (with a change-log entry,
    /// in one atomic batch); returns the change's sequence number, or
    /// `None` when no such document exists.
    pub fn put_dag(&self, id: &str, dag: &Dag) -> Result<Option<u64>> {
        if !self
            .sled()?
            .contains_key(key(META, id))
            .map_err(|e| self.failure(e))?
        {
            return Ok(None);
        }
        let mut batch = Batch::default();
        self.insert_record(&mut batch, DAG, id, &archive(dag)?)?;
        self.apply_logged(batch, &[id]).map(Some)
    }

    /// Whether document `id` is listed.
    pub fn contains(&self, id: &str) -> Result<bool> {
        self.sled()?
            .contains_key(key(META, id))
            .map_err(|e| self.failure(e))
    }

    /// Deletes a document entirely in one atomic batch; returns the change's
    /// sequence number, or `None` when no such document exists.
    pub fn remove(&self, id: &str) -> Result<Option<u64>> {
        if !self
            .sled()?
            .contains_key(key(META, id))
            .map_err(|e| self.failure(e))?
        {
            return Ok(None);
        }
        let mut batch = Batch::reclaiming();
        self.remove_document(&mut batch, id)?;
        self.apply_logged(batch, &[id]).map(Some)
    }

    /// Writes new turns of a session: each turn's document, vectors and DAG
    /// (as [`Store::put`]) and the session's updated `dialogue`, whose
    /// latest turns not forgotten must be those documents in order, in one
    /// atomic batch with a change-log entry per turn; returns the last
    /// one's sequence number. A dialogue that does not end with them is
    /// refused and nothing is written.
    pub fn put_turns(
        &self,
        turns: &[(Document, PackedVectors, Dag)],
        dialogue: &Dialogue,
    ) -> Result<u64> {
        let ids: Vec<&str> = turns.iter().map(|(doc, ..)| doc.meta.id.as_str()).collect();
        let said: Vec<&crate::model::dialogue::Turn> = (dialogue.turns.iter())
            .filter(|t| !t.is_forgotten())
            .collect();
        let latest = said.len().checked_sub(ids.len()).map(|from| &said[from..]);
        let names_docs = latest.is_some_and(|latest| {
            latest.iter().zip(&ids).all(|(turn, id)| {
                turn.doc == *id
                    && crate::model::ids::parse_turn_id(id).is_some_and(|(s, _)| s == dialogue.id)
            })
        });
        // No documents only for a dialogue whose every turn is forgotten
        // (a salvage copies such a session whole).
        if !names_docs || (ids.is_empty() && !said.is_empty()) {
            return Err(Error::Invariant {
                doc: ids
                    .first()
                    .map_or_else(|| format!("session {}", dialogue.id), |id| (*id).to_owned()),
                message: format!(
                    "turn documents must be the latest turns of their session's dialogue ({:?})",
                    dialogue.id
                ),
            });
        }
        let mut batch = Batch::default();
        for (doc, vectors, dag) in turns {
            self.insert_document(&mut batch, doc, vectors, dag)?;
        }
        batch.insert(&key(SESSION, &dialogue.id), &archive(dialogue)?);
        self.apply_logged(batch, &ids)
    }

    /// Removes the document of a turn its session's `dialogue` now records
    /// as forgotten and stores that dialogue, in one batch.
    pub fn forget_turn(&self, doc: &str, dialogue: &Dialogue) -> Result<u64> {
        let forgotten = (dialogue.turns.iter()).any(|t| t.doc == doc && t.is_forgotten());
        if !forgotten {
            return Err(Error::Invariant {
                doc: doc.to_owned(),
                message: format!(
                    "session {:?} does not record it as a forgotten turn",
                    dialogue.id
                ),
            });
        }
        let mut batch = Batch::reclaiming();
        self.remove_document(&mut batch, doc)?;
        batch.insert(&key(SESSION, &dialogue.id), &archive(dialogue)?);
        self.apply_logged(batch, &[doc])
    }

    /// The dialogue record of session `id`, if it exists.
    pub fn dialogue(&self, id: &str) -> Result<Option<Dialogue>> {
        self.sled()?
            .get(key(SESSION, id))
            .map_err(|e| self.failure(e))?
            .map(|value| decode_dialogue(&value, id))
            .transpose()
    }

    /// Every session's id, in order, without decoding its dialogue (so one
    /// damaged dialogue does not hide the others).
    pub fn session_ids(&self) -> Result<Vec<String>> {
        self.ids_under(&[SESSION])
    }

    /// Every session's dialogue record, in id order.
    pub fn dialogues(&self) -> Result<Vec<Dialogue>> {
        self.sled()?
            .scan_prefix([SESSION])
            .map(|entry| {
                let (key, value) = entry.map_err(|e| self.failure(e))?;
                decode_dialogue(&value, &String::from_utf8_lossy(&key[1..]))
            })
            .collect()
    }

    /// The ids of every turn document of session `id` the store holds a
    /// record of, in id order, found by their ids alone (without its
    /// dialogue), a turn that lost some of its records included.
    pub fn session_turn_ids(&self, id: &str) -> Result<Vec<String>> {
        // Session ids hold no '/', so this prefix names this session's turns only.
        let prefix = format!("{SESSION_PREFIX}{id}/");
        let mut ids = std::collections::BTreeSet::new();
        for kind in RECORDS {
            ids.extend(self.ids_under(&key(kind, &prefix))?);
        }
        Ok(ids.into_iter().collect())
    }

    /// Deletes session `id`: its dialogue record and every turn document
    /// under the session's turn ids ([`Store::session_turn_ids`]: found
    /// without reading the dialogue, so a session whose dialogue is damaged
    /// is still removed, with its own turns only), in one atomic batch with
    /// a change-log entry per turn document. Returns the documents removed,
    /// in id order, or `None` when the store holds neither the record nor
    /// a turn of the session.
    pub fn remove_session(&self, id: &str) -> Result<Option<Vec<String>>> {
        let recorded = self
            .sled()?
            .contains_key(key(SESSION, id))
            .map_err(|e| self.failure(e))?;
        // A readable dialogue names no other turns: its turn documents'
        // ids are checked against its session's ([`Dialogue::check_tree`]).
        let docs = self.session_turn_ids(id)?;
        if !recorded && docs.is_empty() {
            return Ok(None);
        }
        let mut batch = Batch::reclaiming();
        for doc in &docs {
            self.remove_document(&mut batch, doc)?;
        }
        batch.remove(&key(SESSION, id));
        let ids: Vec<&str> = docs.iter().map(String::as_str).collect();
        self.apply_logged(batch, &ids)?;
        Ok(Some(docs))
    }

    /// Adds the records of `doc`, its vectors and its DAG to `batch`,
    /// replacing any stored under its id.
    fn insert_document<'a>(
        &'a self,
        batch: &mut Batch<'a>,
        doc: &Document,
        vectors: &PackedVectors,
        dag: &Dag,
    ) -> Result<()> {
        let id = &doc.meta.id;
        batch.insert(&key(META, id), &archive(&doc.meta)?);
        self.insert_record(batch, TEXT, id, doc.text.as_bytes())?;
        self.insert_record(batch, EDUS, id, &archive(&doc.edus)?)?;
        self.insert_record(batch, TREE, id, &archive(&doc.tree)?)?;
        match &doc.pages {
            Some(pages) => self.insert_record(batch, PAGES, id, &archive(pages)?)?,
            None => {
                batch.remove(&key(PAGES, id));
                self.remove_kept_apart(batch, PAGES, id)?;
            }
        }
        // Vectors are most of a document's bytes: a large set is archived
        // straight into its file, never held whole a second time.
        let size = (vectors.nodes.codes.len() + vectors.edus.codes.len())
            + 4 * (vectors.nodes.scales.len() + vectors.edus.scales.len());
        if size > PIECE_BYTES {
            self.insert_streamed(batch, PACKED_VECTORS, id, size as u64, |out| {
                rkyv::api::high::to_bytes_in::<_, BoxedError>(
                    vectors,
                    rkyv::ser::writer::IoWriter::new(out),
                )
                .map(drop)
                .map_err(std::io::Error::other)
            })?;
        } else {
            self.insert_record(batch, PACKED_VECTORS, id, &archive(vectors)?)?;
        }
        // The document's `f32` vectors from before format 7, if any.
        batch.remove(&key(VECTORS, id));
        self.remove_kept_apart(batch, VECTORS, id)?;
        self.insert_record(batch, DAG, id, &archive(dag)?)
    }

    /// Adds record `kind` of document `id` to `batch`: whole when it is at
    /// most [`PIECE_BYTES`], else in a file of its own with a manifest;
    /// whatever was stored for it before (whole, in a file or pieced) is
    /// replaced entirely.
    fn insert_record<'a>(
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
    fn insert_streamed<'a>(
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
    fn remove_kept_apart(&self, batch: &mut Batch<'_>, kind: u8, id: &str) -> Result<()> {
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
                for key in self.sled()?.range(start..=end).keys().map_while(|k| k.ok()) {
                    batch.remove(&key);
                }
            }
        }
        batch.remove(&manifest_key(kind, id));
        Ok(())
    }

    /// Adds the removal of every record of document `id`, whole or pieced,
    /// to `batch`. A damaged manifest does not stop it: removal is how
    /// damage is cleared.
    fn remove_document(&self, batch: &mut Batch<'_>, id: &str) -> Result<()> {
        for kind in RECORDS {
            batch.remove(&key(kind, id));
        }
        batch.remove(&key(COST, id));
        for kind in PIECEABLE {
            self.remove_kept_apart(batch, kind, id)?;
        }
        Ok(())
    }

    /// Where record `kind` of document `id` is kept, when it is kept apart.
    fn manifest(&self, kind: u8, id: &str) -> Result<Option<Kept>> {
        let Some(bytes) = self
            .sled()?
            .get(manifest_key(kind, id))
            .map_err(|e| self.failure(e))?
        else {
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
    fn record(&self, kind: u8, id: &str) -> Result<Option<sled::IVec>> {
        const READS: usize = 3;
        let mut attempt = 0;
        loop {
            if let Some(whole) = self
                .sled()?
                .get(key(kind, id))
                .map_err(|e| self.failure(e))?
            {
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
        let range = piece_key(kind, id, 0)..piece_key(kind, id, manifest.pieces);
        for entry in self.sled()?.range(range) {
            let (_, piece) = entry.map_err(|e| self.failure(e))?;
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

    /// The stored document with this id, if any; `Corrupt` when its
    /// metadata names another id ([`same_id`]).
    pub fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        let mut records = Vec::with_capacity(4);
        for kind in [META, TEXT, EDUS, TREE] {
            match self.record(kind, id)? {
                Some(value) => records.push(value),
                None if kind == META => return Ok(None),
                None => {
                    return Err(Error::Corrupt {
                        key: format!("{}{id}", kind as char),
                        message: "record missing".into(),
                    });
                }
            }
        }
        let [meta, text, edus, tree]: [sled::IVec; 4] = records
            .try_into()
            .map_err(|_| Error::Storage("record count".into()))?;
        let mut doc = StoredDoc {
            meta,
            text,
            edus,
            tree,
            pages: None,
        };
        same_id(id, &doc.meta()?.id, || format!("{}{id}", META as char))?;
        if doc.meta()?.format == ArchivedFormat::Pdf {
            let pages = self.record(PAGES, id)?.ok_or_else(|| Error::Corrupt {
                key: format!("{}{id}", PAGES as char),
                message: "record missing".into(),
            })?;
            doc.pages = Some(pages);
        }
        Ok(Some(doc))
    }

    /// The vectors of the document with this id, if it exists.
    pub fn vectors(&self, id: &str) -> Result<Option<StoredVectors>> {
        let vectors = match self.record(PACKED_VECTORS, id)? {
            Some(bytes) => StoredVectors {
                bytes,
                packed: true,
            },
            None => match self.record(VECTORS, id)? {
                Some(bytes) => StoredVectors {
                    bytes,
                    packed: false,
                },
                None => return Ok(None),
            },
        };
        vectors.get()?;
        Ok(Some(vectors))
    }

    /// The DAG of the document with this id, if it exists.
    pub fn dag(&self, id: &str) -> Result<Option<StoredDag>> {
        let Some(value) = self.record(DAG, id)? else {
            return Ok(None);
        };
        let dag = StoredDag(value);
        dag.get()?;
        Ok(Some(dag))
    }

    /// Every listed document's id, in order, without decoding anything (a
    /// damaged record does not hide the others).
    pub fn ids(&self) -> Result<Vec<String>> {
        self.ids_under(&[META])
    }

    /// The ids of the records whose keys start with `prefix` (a record
    /// kind and the start of an id), in key order.
    fn ids_under(&self, prefix: &[u8]) -> Result<Vec<String>> {
        self.sled()?
            .scan_prefix(prefix)
            .keys()
            .map(|k| {
                Ok(String::from_utf8_lossy(&k.map_err(|e| self.failure(e))?[1..]).into_owned())
            })
            .collect()
    }

    /// Overwrites document `id`'s tree record (its metadata record when
    /// `meta`) with bytes that are no archive, as a damaged disk would: for
    /// salvage tests above the seam.
    #[cfg(test)]
    pub(crate) fn damage(&self, id: &str, meta: bool) {
        let kind = if meta { META } else { TREE };
        self.db
            .insert(key(kind, id), b"damaged".as_slice())
            .unwrap();
    }

    /// Drops document `id`'s records without a change-log entry, as
    /// sled's recovery of a log damaged before them does: for tests of
    /// loss detection above the seam.
    #[cfg(test)]
    pub(crate) fn lose(&self, id: &str) {
        let mut batch = Batch::reclaiming();
        self.remove_document(&mut batch, id).unwrap();
        self.db
            .apply_batch(std::mem::take(&mut batch.writes))
            .unwrap();
    }

    /// Metadata of every document, in id order. A damaged metadata record
    /// is left out with a warning, so one damaged document does not hide
    /// the others ([`Store::check_all`] names it).
    pub fn metas(&self) -> Result<Vec<DocMeta>> {
        let mut metas = Vec::new();
        for entry in self.sled()?.scan_prefix([META]) {
            let (key, value) = entry.map_err(|e| self.failure(e))?;
            match decode_meta(&key, &value) {
                Ok(meta) => metas.push(meta),
                Err(err) => tracing::warn!("left out of the listing: {err}"),
            }
        }
        Ok(metas)
    }

    /// Ids changed after `seq`, with the latest sequence number of each, in log order.
    pub fn changes_after(&self, seq: u64) -> Result<Vec<(u64, String)>> {
        let start = log_key(seq.saturating_add(1));
        let end = log_key(u64::MAX);
        self.sled()?
            .range(start..=end)
            .map(|entry| {
                let (key, value) = entry.map_err(|e| self.failure(e))?;
                let seq = u64::from_be_bytes(key[1..9].try_into().unwrap_or_default());
                Ok((seq, String::from_utf8_lossy(&value).into_owned()))
            })
            .collect()
    }

    /// Drops change-log entries up to and including `seq`, once every
    /// derived index has applied them.
    pub fn trim_log(&self, seq: u64) -> Result<()> {
        let mut batch = Batch::reclaiming();
        for entry in self.sled()?.range(log_key(0)..=log_key(seq)) {
            let (key, _) = entry.map_err(|e| self.failure(e))?;
            batch.remove(&key);
        }
        batch.insert(TRIMMED_KEY, &seq.max(self.trimmed_seq()?).to_be_bytes());
        self.apply(batch)
    }

    /// The files of records replaced or removed by applied batches, deleted
    /// once a flush has made those batches durable.
    fn stale_files(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        (self.stale_files.lock()).unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes every applied change durable.
    pub fn flush(&self) -> Result<()> {
        // Taken before the flush: a batch applied meanwhile, whose stale
        // files join the list, may not be durable after it.
        #[cfg(test)]
        if self
            .fail_next_flush
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(Error::Storage("the flush failed (a test's fault)".into()));
        }
        let stale = std::mem::take(&mut *self.stale_files());
        let flushed = self.sled()?.flush().map_err(|e| self.failure(e));
        if flushed.is_err() {
            // Not durable: back on the list (or left to the sweep at open).
            self.stale_files().extend(stale);
            return flushed.map(drop);
        }
        // The batches that dropped these files are durable now.
        self.files.remove(stale.iter().map(String::as_str));
        Ok(())
    }

    /// Bytes the store occupies on disk: sled's files and the record files.
    pub fn size_on_disk(&self) -> Result<u64> {
        let sled = self.sled()?.size_on_disk().map_err(|e| self.failure(e))?;
        let files = (self.files.bytes()).map_err(|e| io_failed(self.files.dir(), e))?;
        Ok(sled + files)
    }

    /// Validates every record: no orphan records, every listed document
    /// readable with matching vectors and DAG, every session's dialogue
    /// consistent with its turns. Returns the documents checked, or the
    /// first damage found ([`Store::check_all`] lists them all).
    pub fn check(&self) -> Result<usize> {
        let report = self.check_all(&Default::default())?;
        match report.damaged.into_iter().next() {
            Some(damage) => Err(damage.error),
            None => Ok(report.documents),
        }
    }

    /// Like [`Store::check`], going on past damage: every damaged document
    /// (or orphan record, or session) with what is wrong with it, so all
    /// of them can be named and salvaged. `known` are ids other sources
    /// (the full-text index) hold: one whose metadata the listing could not
    /// reach (sled failed to read its page) is still looked up, and named
    /// if it cannot be read. Fails only when the store cannot be read at
    /// all.
    pub fn check_all(&self, known: &std::collections::BTreeSet<String>) -> Result<StoreCheck> {
        let mut damaged = Vec::new();
        for kind in PIECEABLE {
            let mut scan = self.sled()?.scan_prefix([kind]).keys();
            while let Some(record) = self.next_or_damage(&mut scan, kind, &mut damaged)? {
                let id = String::from_utf8_lossy(&record[1..]).into_owned();
                if let Some(error) = self.unlisted(&id, || format!("{} record", kind as char))? {
                    damaged.push(Damage { doc: id, error });
                }
            }
        }
        // Build costs: each must decode and belong to a listed document.
        for entry in self.sled()?.scan_prefix([COST]) {
            let Ok((key, value)) = entry else {
                // An unreadable page: named by the scans above and below.
                break;
            };
            let id = String::from_utf8_lossy(&key[1..]).into_owned();
            if let Err(error) = decode_cost(&id, &value) {
                damaged.push(Damage { doc: id, error });
            } else if let Some(error) = self.unlisted(&id, || "cost record".into())? {
                damaged.push(Damage { doc: id, error });
            }
        }
        self.check_pieces(&mut damaged)?;
        let (mut documents, mut metas) = (0, Vec::new());
        let (mut listed, mut absent) = (std::collections::BTreeSet::new(), Vec::new());
        let mut scan = self.sled()?.scan_prefix([META]);
        while let Some((record, value)) = self.next_or_damage(&mut scan, META, &mut damaged)? {
            let id = String::from_utf8_lossy(&record[1..]).into_owned();
            documents += 1;
            listed.insert(id.clone());
            match self.checked_meta(&record, &value) {
                Ok(meta) => metas.push(meta),
                Err(error) => damaged.push(Damage { doc: id, error }),
            }
        }
        for id in known.difference(&listed) {
            let record = key(META, id);
            let checked = (self.sled()?.get(&record).map_err(|e| self.failure(e)))
                .and_then(|value| value.map(|v| self.checked_meta(&record, &v)).transpose());
            match checked {
                Ok(None) => absent.push(id.clone()),
                Ok(Some(meta)) => {
                    documents += 1;
                    metas.push(meta);
                }
                Err(error) => {
                    documents += 1;
                    damaged.push(Damage {
                        doc: id.clone(),
                        error,
                    });
                }
            }
        }
        let sessions = self.check_sessions(&metas, &mut damaged)?;
        Ok(StoreCheck {
            documents,
            sessions,
            absent,
            nodes: metas.iter().map(|m| m.nodes as usize).sum(),
            edus: metas.iter().map(|m| m.edus as usize).sum(),
            damaged,
        })
    }

    /// Finds manifests of unlisted documents and pieces no manifest counts.
    fn check_pieces(&self, damaged: &mut Vec<Damage>) -> Result<()> {
        // (id, kind) → what is wrong: one entry per record, however many
        // of its pieces are stray.
        let mut found: std::collections::BTreeMap<(String, u8), Error> = Default::default();
        let mut scan = self.sled()?.scan_prefix([MANIFEST]).keys();
        while let Some(record) = self.next_or_damage(&mut scan, MANIFEST, damaged)? {
            let (Some(&kind), Some(id)) = (record.get(1), record.get(2..)) else {
                continue;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            let what = || format!("manifest of a pieced {} record", kind as char);
            if let Some(error) = self.unlisted(&id, what)? {
                found.insert((id, kind), error);
            }
        }
        let mut scan = self.sled()?.scan_prefix([PIECE]).keys();
        while let Some(record) = self.next_or_damage(&mut scan, PIECE, damaged)? {
            // P, kind, id, 0, index (4 bytes).
            let Some((&kind, rest)) = record.get(1..).and_then(<[u8]>::split_first) else {
                continue;
            };
            let split = rest.len().saturating_sub(5);
            let id = String::from_utf8_lossy(&rest[..split]).into_owned();
            let index = rest[split..]
                .get(1..)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes);
            let counted = match (index, self.manifest(kind, &id)) {
                (Some(index), Ok(Some(Kept::Pieces(manifest)))) => index < manifest.pieces,
                _ => false,
            };
            if !counted {
                let error = Error::Invariant {
                    doc: id.clone(),
                    message: format!("orphan piece of a {} record", kind as char),
                };
                found.entry((id, kind)).or_insert(error);
            }
        }
        for ((id, _), error) in found {
            damaged.push(Damage { doc: id, error });
        }
        Ok(())
    }

    /// Why a record of document `id` (`what`, for the message) is damage:
    /// no document `id` is listed, or the listing cannot be read; `None`
    /// when the document is listed. Fails on a failure in the file system.
    fn unlisted(&self, id: &str, what: impl FnOnce() -> String) -> Result<Option<Error>> {
        match self.sled()?.contains_key(key(META, id)) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(Error::Invariant {
                doc: id.to_owned(),
                message: format!("orphan {}", what()),
            })),
            Err(err @ sled::Error::Io(_)) => Err(self.failure(err)),
            Err(err) => Ok(Some(storage(&self.dir, err))),
        }
    }

    /// A metadata record, decoded, once its document passes
    /// [`Store::check_document`].
    fn checked_meta(&self, record: &[u8], value: &[u8]) -> Result<DocMeta> {
        let meta = decode_meta(record, value)?;
        self.check_document(&meta)?;
        Ok(meta)
    }

    /// One listed document's records: readable, valid, with vectors and a
    /// DAG of its shape.
    fn check_document(&self, meta: &DocMeta) -> Result<()> {
        self.checked_records(&meta.id)?
            .map(drop)
            .ok_or_else(|| Error::Invariant {
                doc: meta.id.clone(),
                message: "listed but not readable".into(),
            })
    }

    /// Document `id`'s records, once they pass the checks `check` makes of
    /// each document: the document valid ([`StoredDoc::validate`]), its
    /// vectors and its DAG of its shape; `None` when the store does not
    /// hold it. Each record is decoded once.
    pub fn checked_records(&self, id: &str) -> Result<Option<(Document, StoredVectors, Dag)>> {
        let Some(stored) = self.get(id)? else {
            return Ok(None);
        };
        let doc = stored.to_valid_document()?;
        let meta = &doc.meta;
        let vectors = self.vectors(id)?.ok_or_else(|| Error::Invariant {
            doc: id.to_owned(),
            message: "vectors record missing".into(),
        })?;
        let v = vectors.get()?;
        let dimension = v.dimension();
        let (nodes, edus) = (v.rows(Target::Nodes), v.rows(Target::Edus));
        if !nodes.holds(meta.nodes as usize) || !edus.holds(meta.edus as usize) {
            return Err(Error::Invariant {
                doc: id.to_owned(),
                message: format!(
                    "{} node and {} EDU vector values of dimension {dimension} for {} nodes and {} EDUs",
                    nodes.values_len(),
                    edus.values_len(),
                    meta.nodes,
                    meta.edus
                ),
            });
        }
        let dag = self.dag(id)?.ok_or_else(|| Error::Invariant {
            doc: id.to_owned(),
            message: "DAG record missing".into(),
        })?;
        let dag = dag.to_dag()?;
        dag.validate(meta.edus)
            .map_err(|message| Error::Invariant {
                doc: id.to_owned(),
                message,
            })?;
        Ok(Some((doc, vectors, dag)))
    }

    /// Checks every dialogue record ([`Dialogue::validate`] against the
    /// stored documents) and that every turn document belongs to its
    /// session's dialogue; what is wrong goes into `damaged`.
    fn check_sessions(&self, metas: &[DocMeta], damaged: &mut Vec<Damage>) -> Result<usize> {
        let edus: std::collections::HashMap<&str, u32> =
            metas.iter().map(|m| (m.id.as_str(), m.edus)).collect();
        let mut turn_docs = std::collections::HashSet::new();
        let mut sessions = 0;
        let mut unreadable = Vec::new();
        let mut scan = self.sled()?.scan_prefix([SESSION]);
        while let Some((record, value)) =
            self.next_or_damage(&mut scan, SESSION, &mut unreadable)?
        {
            sessions += 1;
            let session = String::from_utf8_lossy(&record[1..]).into_owned();
            let dialogue = decode_dialogue(&value, &session).and_then(|dialogue| {
                dialogue
                    .validate(&|doc| edus.get(doc).copied())
                    .map(|()| dialogue)
                    .map_err(|message| Error::Invariant {
                        doc: format!("session {session}"),
                        message,
                    })
            });
            match dialogue {
                Ok(dialogue) => turn_docs.extend(dialogue.turns.into_iter().map(|t| t.doc)),
                Err(error) => damaged.push(Damage {
                    doc: format!("session {session}"),
                    error,
                }),
            }
        }
        // With dialogues unread, a turn no dialogue read lists proves nothing.
        if !unreadable.is_empty() {
            damaged.extend(unreadable);
            return Ok(sessions);
        }
        for orphan in metas
            .iter()
            .filter(|m| crate::model::ids::is_turn_id(&m.id) && !turn_docs.contains(&m.id))
        {
            let error = Error::Invariant {
                doc: orphan.id.clone(),
                message: "a turn document that no session's dialogue lists".into(),
            };
            damaged.push(Damage {
                doc: orphan.id.clone(),
                error,
            });
        }
        Ok(sessions)
    }
}

/// What [`Store::check_all`] found.
#[derive(Debug)]
pub struct StoreCheck {
    /// Listed documents checked (damaged ones included).
    pub documents: usize,
    /// Session records read.
    pub sessions: usize,
    /// Ids among those the caller knew that the store does not hold.
    pub absent: Vec<String>,
    /// Nodes and EDUs of the undamaged documents (one vector each).
    pub nodes: usize,
    /// See `nodes`.
    pub edus: usize,
    /// Every damaged document, orphan record or session, in store order.
    pub damaged: Vec<Damage>,
}

/// One damaged document, orphan record or session.
#[derive(Debug)]
pub struct Damage {
    /// The document id (`session ID` for a session's dialogue).
    pub doc: String,
    /// What is wrong.
    pub error: Error,
}

impl StoredDag {
    /// The DAG, in place (its CSR arrays are read without parsing).
    pub fn get(&self) -> Result<&ArchivedDag> {
        access::<ArchivedDag>(&self.0, "dag")
    }

    /// An owned copy.
    pub fn to_dag(&self) -> Result<Dag> {
        rkyv::deserialize::<Dag, BoxedError>(self.get()?).map_err(|e| Error::Corrupt {
            key: "dag".into(),
            message: e.to_string(),
        })
    }
}

impl StoredVectors {
    /// An owned copy, in 8 bits (`f32` rows of format 6 or older are
    /// quantised).
    pub fn to_packed(&self) -> Result<PackedVectors> {
        let corrupt = |e: BoxedError| Error::Corrupt {
            key: "vectors".into(),
            message: e.to_string(),
        };
        Ok(match self.get()? {
            VectorRecord::Full(v) => {
                pack(&rkyv::deserialize::<DocVectors, BoxedError>(v).map_err(corrupt)?)
            }
            VectorRecord::Packed(v) => {
                rkyv::deserialize::<PackedVectors, BoxedError>(v).map_err(corrupt)?
            }
        })
    }

    /// The vectors, in place.
    pub fn get(&self) -> Result<VectorRecord<'_>> {
        Ok(if self.packed {
            VectorRecord::Packed(access::<ArchivedPackedVectors>(&self.bytes, "vectors")?)
        } else {
            VectorRecord::Full(access::<ArchivedDocVectors>(&self.bytes, "vectors")?)
        })
    }
}

impl StoredDoc {
    /// The document's metadata, in place.
    pub fn meta(&self) -> Result<&ArchivedDocMeta> {
        access::<ArchivedDocMeta>(&self.meta, "meta")
    }

    /// The stored text every coordinate points into.
    pub fn text(&self) -> Result<&str> {
        std::str::from_utf8(&self.text).map_err(|e| Error::Corrupt {
            key: "text".into(),
            message: e.to_string(),
        })
    }

    /// The EDUs, in place.
    pub fn edus(&self) -> Result<&ArchivedVec<ArchivedEdu>> {
        access::<ArchivedVec<ArchivedEdu>>(&self.edus, "edus")
    }

    /// The structural tree, in place.
    pub fn tree(&self) -> Result<&ArchivedTree> {
        access::<ArchivedTree>(&self.tree, "tree")
    }

    /// Where a PDF's text lies on its pages (`None` for other formats).
    pub fn pages(&self) -> Result<Option<PageLayout>> {
        let Some(bytes) = self.pages.as_ref() else {
            return Ok(None);
        };
        let archived = access::<ArchivedPageLayout>(bytes, "pages")?;
        rkyv::deserialize::<PageLayout, BoxedError>(archived)
            .map(Some)
            .map_err(|e| Error::Corrupt {
                key: "pages".into(),
                message: e.to_string(),
            })
    }

    /// An owned copy of the whole document.
    pub fn to_document(&self) -> Result<Document> {
        let corrupt = |e: BoxedError| Error::Corrupt {
            key: "document".into(),
            message: e.to_string(),
        };
        Ok(Document {
            meta: rkyv::deserialize::<DocMeta, BoxedError>(self.meta()?).map_err(corrupt)?,
            text: self.text()?.to_owned(),
            edus: rkyv::deserialize::<Vec<Edu>, BoxedError>(self.edus()?).map_err(corrupt)?,
            tree: rkyv::deserialize::<Tree, BoxedError>(self.tree()?).map_err(corrupt)?,
            pages: self.pages()?,
        })
    }

    /// Checks that the records agree: EDUs are dense, ordered, non-overlapping
    /// and slice the text on char boundaries; the tree passes
    /// [`Tree::validate`]; a PDF's pages pass [`PageLayout::validate`]; the
    /// counts in the metadata match.
    pub fn validate(&self) -> Result<()> {
        self.to_valid_document().map(drop)
    }

    /// An owned copy, once it passes [`StoredDoc::validate`] (decoded once
    /// for both).
    fn to_valid_document(&self) -> Result<Document> {
        let doc = self.to_document()?;
        let fail = |message: String| Error::Invariant {
            doc: doc.meta.id.clone(),
            message,
        };
        let mut previous_end = 0u32;
        for (index, edu) in doc.edus.iter().enumerate() {
            let ok = edu.id as usize == index
                && edu.start < edu.end
                && edu.start >= previous_end
                && (edu.end as usize) <= doc.text.len()
                && doc.text.is_char_boundary(edu.start as usize)
                && doc.text.is_char_boundary(edu.end as usize);
            if !ok {
                return Err(fail(format!(
                    "EDU {index} has bad coordinates {}..{}",
                    edu.start, edu.end
                )));
            }
            previous_end = edu.end;
        }
        doc.tree.validate(doc.edus.len() as u32).map_err(fail)?;
        if let Some(pages) = &doc.pages {
            (pages.validate(doc.text.len() as u32)).map_err(|m| fail(format!("pages: {m}")))?;
        }
        let counts_match = doc.meta.edus as usize == doc.edus.len()
            && doc.meta.nodes as usize == doc.tree.nodes.len()
            && doc.meta.bytes as usize == doc.text.len();
        if !counts_match {
            return Err(fail("metadata counts disagree with the records".into()));
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pipeline::analyze;
    use crate::model::document::Format;
    use crate::model::ids::turn_doc_id;

    fn doc(id: &str, text: &str) -> Document {
        analyze(id, text.to_owned(), Format::Markdown).unwrap()
    }

    /// Vectors of the right shape for `doc` (dimension 2).
    fn vectors(doc: &Document) -> PackedVectors {
        pack(&DocVectors {
            dimension: 2,
            nodes: vec![0.5; doc.tree.nodes.len() * 2],
            edus: vec![0.25; doc.edus.len() * 2],
        })
    }

    /// A one-chunk DAG for `doc`.
    fn dag(doc: &Document) -> Dag {
        Dag::from_edges(
            vec![crate::model::dag::DagNode {
                level: 1,
                span: crate::model::edu::Span::new(0, doc.edus.len() as u32 - 1),
                points: Vec::new(),
                window: None,
                text: None,
            }],
            Vec::new(),
        )
    }

    fn put(store: &Store, doc: &Document) -> u64 {
        store
            .put(doc, &vectors(doc), &dag(doc), &LlmCost::default())
            .unwrap()
    }

    fn keys_of(store: &Store, id: &str) -> usize {
        RECORDS
            .iter()
            .filter(|&&kind| store.db.contains_key(key(kind, id)).unwrap())
            .count()
    }

    #[test]
    fn build_costs_go_with_their_document() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = doc("a", "# A\n\nOne sentence.\n");
        let b = doc("b", "# B\n\nTwo sentences. Here.\n");
        let cost = LlmCost {
            calls: 3,
            prompt_tokens: 400,
            completion_tokens: 90,
            millis: 1200,
            fallbacks: 1,
            dropped_points: 2,
        };
        store.put(&a, &vectors(&a), &dag(&a), &cost).unwrap();
        put(&store, &b);
        assert_eq!(store.costs().unwrap(), vec![("a".to_owned(), cost)]);
        // Rebuilt without a model: its old cost goes.
        put(&store, &a);
        assert!(store.costs().unwrap().is_empty());
        store.put(&a, &vectors(&a), &dag(&a), &cost).unwrap();
        store.remove("a").unwrap();
        assert!(store.costs().unwrap().is_empty());
        // A damaged cost record is damage, named.
        store.db.insert(key(COST, "b"), &b"{not json"[..]).unwrap();
        let err = store.costs().unwrap_err();
        assert!(
            err.is_damage() && err.to_string().contains("cost of b"),
            "{err}"
        );
    }

    #[test]
    fn put_get_roundtrip_reads_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let original = doc("a", "# Title\n\nOne sentence here. Another one there.\n");
        assert_eq!(put(&store, &original), 1);
        let stored = store.get("a").unwrap().unwrap();
        assert_eq!(stored.to_document().unwrap(), original);
        assert_eq!(stored.meta().unwrap().id.as_str(), "a");
        let edu = &stored.edus().unwrap()[1];
        let text = stored.text().unwrap();
        assert_eq!(
            &text[edu.start.to_native() as usize..edu.end.to_native() as usize],
            "One sentence here."
        );
        stored.validate().unwrap();
        assert!(store.get("missing").unwrap().is_none());
        let stored_vectors = store.vectors("a").unwrap().unwrap();
        let v = stored_vectors.get().unwrap();
        assert!(matches!(v, VectorRecord::Packed(_)));
        assert_eq!(v.dimension(), 2);
        assert!(v.rows(Target::Edus).holds(original.edus.len()));
        assert_eq!(stored_vectors.to_packed().unwrap(), vectors(&original));
        assert_eq!(v.rows(Target::Nodes).values()[..2], [0.5, 0.5]);
        assert!(store.vectors("missing").unwrap().is_none());
    }

    #[test]
    fn losses_are_recorded_durably_and_forgotten_one_document_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let loss = |ids: &[&str], sessions: &[&str], at: i64| Loss {
            store_change: 3,
            index_change: 5,
            found_at: at,
            ids: ids.iter().map(|id| id.to_string()).collect(),
            sessions: sessions.iter().map(|id| id.to_string()).collect(),
        };
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.losses().unwrap(), []);
            store.record_loss(loss(&["a", "b"], &["s"], 1)).unwrap();
            // Found again (a rebuild that did not finish): not repeated.
            store.record_loss(loss(&["b", "c"], &["s"], 2)).unwrap();
            store.record_loss(loss(&["c"], &[], 3)).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.losses().unwrap(),
            [loss(&["a", "b"], &["s"], 1), loss(&["c"], &[], 2)]
        );
        assert!(store.forget_lost("c", false).unwrap());
        assert!(!store.forget_lost("c", false).unwrap(), "forgotten once");
        assert!(!store.forget_lost("z", false).unwrap());
        assert!(!store.forget_lost("a", true).unwrap(), "a is no session");
        assert_eq!(store.losses().unwrap(), [loss(&["a", "b"], &["s"], 1)]);
        // Storing a document, or a session's turn, forgets its loss in the
        // same batch.
        put(&store, &doc("a", "Back again."));
        let t0 = turn("s", 0);
        store
            .put_turns(&[written(&t0)], &dialogue("s", &t0))
            .unwrap();
        assert_eq!(store.losses().unwrap(), [loss(&["b"], &[], 1)]);
        assert!(store.forget_lost("b", false).unwrap());
        assert_eq!(store.losses().unwrap(), []);
        assert_eq!(store.sled().unwrap().get(LOST_KEY).unwrap(), None);
        store.db.insert(LOST_KEY, b"not json".as_slice()).unwrap();
        assert!(matches!(store.losses(), Err(Error::Corrupt { .. })));
        assert!(
            !store.forget_lost("a", false).unwrap(),
            "unreadable: not on it"
        );
    }

    #[test]
    fn embedder_config_is_recorded_and_vectors_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.embedder_config().unwrap(), None);
        store.set_embedder_config("{\"kind\":\"hashed\"}").unwrap();
        assert_eq!(
            store.embedder_config().unwrap().as_deref(),
            Some("{\"kind\":\"hashed\"}")
        );
        let a = doc("a", "Some text. More text.");
        let mut short = vectors(&a);
        short.edus.scales.pop();
        short.edus.codes.truncate(short.edus.scales.len() * 2);
        store
            .put(&a, &short, &dag(&a), &LlmCost::default())
            .unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "a" && message.contains("EDU vector"))
        );
        put(&store, &a);
        assert_eq!(store.check().unwrap(), 1);
        store.db.remove(key(PACKED_VECTORS, "a")).unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { .. })));
    }

    #[test]
    fn dags_are_stored_replaced_alone_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = doc(
            "a",
            "# T\n\nOne sentence here. Another one there. A third.\n",
        );
        put(&store, &a);
        assert_eq!(store.dag("a").unwrap().unwrap().to_dag().unwrap(), dag(&a));
        assert!(store.dag("missing").unwrap().is_none());
        // Two chunks and a written point over both: a valid two-level DAG.
        let chunk = |first, last| crate::model::dag::DagNode {
            level: 1,
            span: crate::model::edu::Span::new(first, last),
            points: Vec::new(),
            window: None,
            text: None,
        };
        let last = a.edus.len() as u32 - 1;
        let point = crate::model::dag::DagNode {
            level: 2,
            span: crate::model::edu::Span::new(0, last),
            points: vec![1],
            window: Some([0, 1]),
            text: Some("Three sentences are stored.".into()),
        };
        let nodes = vec![chunk(0, 1), chunk(2, last), point];
        let good = Dag::from_edges(
            nodes.clone(),
            vec![vec![], vec![], vec![(0, 0.25), (1, 0.75)]],
        );
        let seq = store.last_seq().unwrap();
        assert_eq!(store.put_dag("a", &good).unwrap(), Some(seq + 1));
        assert_eq!(
            store.changes_after(seq).unwrap(),
            [(seq + 1, "a".to_owned())]
        );
        assert_eq!(store.dag("a").unwrap().unwrap().to_dag().unwrap(), good);
        assert_eq!(store.get("a").unwrap().unwrap().to_document().unwrap(), a);
        assert_eq!(store.check().unwrap(), 1);
        assert_eq!(store.put_dag("missing", &good).unwrap(), None);
        // Out-weights that do not sum to 1, or an edge to itself's level.
        for edges in [vec![(0, 0.25), (1, 0.5)], vec![(0, 0.5), (2, 0.5)]] {
            let bad = Dag::from_edges(nodes.clone(), vec![vec![], vec![], edges]);
            store.put_dag("a", &bad).unwrap();
            assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == "a"));
        }
        // Written text on a chunk, or a blank written point.
        let mut chunk_text = nodes.clone();
        chunk_text[0].text = Some("A chunk's text is the document's.".into());
        let mut blank = nodes.clone();
        blank[2].text = Some(" ".into());
        for bad in [chunk_text, blank] {
            let bad = Dag::from_edges(bad, vec![vec![], vec![], vec![(0, 0.25), (1, 0.75)]]);
            store.put_dag("a", &bad).unwrap();
            assert!(
                matches!(store.check(), Err(Error::Invariant { message, .. }) if message.contains("written text"))
            );
        }
        store.db.remove(key(DAG, "a")).unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { message, .. }) if message.contains("DAG record missing"))
        );
    }

    #[test]
    fn replace_and_remove_leave_no_stale_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "First version of the text."));
        put(&store, &doc("a", "# New\n\nSecond version. It is longer."));
        assert_eq!(
            store.get("a").unwrap().unwrap().to_document().unwrap().text,
            "# New\n\nSecond version. It is longer."
        );
        assert_eq!(store.metas().unwrap().len(), 1);
        assert_eq!(store.remove("a").unwrap(), Some(3));
        assert_eq!(keys_of(&store, "a"), 0);
        assert_eq!(store.remove("a").unwrap(), None);
        assert_eq!(store.check().unwrap(), 0);
    }

    #[test]
    fn change_log_replays_and_trims() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Alpha text."));
        put(&store, &doc("b", "Beta text."));
        store.remove("a").unwrap();
        assert_eq!(store.last_seq().unwrap(), 3);
        assert_eq!(
            store.changes_after(1).unwrap(),
            [(2, "b".to_owned()), (3, "a".to_owned())]
        );
        store.trim_log(2).unwrap();
        assert_eq!(store.trimmed_seq().unwrap(), 2);
        assert_eq!(store.changes_after(0).unwrap(), [(3, "a".to_owned())]);
    }

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            put(&store, &doc("a", "Persisted text."));
            store.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.metas().unwrap()[0].id, "a");
        assert_eq!(store.last_seq().unwrap(), 1);
    }

    #[test]
    fn a_failure_in_the_file_system_abandons_the_handle_for_the_rest_of_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Persisted text."));
        store.flush().unwrap();
        // A failure that is not the file system's leaves the handle usable.
        let other = store.failure(sled::Error::Unsupported("a test".into()));
        assert!(matches!(other, Error::Storage(_)), "{other:?}");
        assert_eq!(store.metas().unwrap().len(), 1);
        // A full disk is named as such, and the handle is abandoned: every
        // later call fails at once, flushing included.
        let full = store.failure(sled::Error::Io(std::io::ErrorKind::StorageFull.into()));
        assert!(matches!(full, Error::DiskFull { .. }), "{full:?}");
        let abandoned = |result: Result<()>| matches!(result, Err(Error::Abandoned { .. }));
        assert!(abandoned(store.metas().map(drop)));
        assert!(abandoned(store.flush()));
        assert!(abandoned(store.check().map(drop)));
        assert!(abandoned(store.last_seq().map(drop)));
        // Dropping it does not flush (which could hang); the handle stays
        // open, so opening the store again in this process is refused at
        // once, naming the cause, rather than waiting for sled's lock.
        drop(store);
        let started = std::time::Instant::now();
        let again = Store::open(dir.path());
        assert!(matches!(again, Err(Error::Abandoned { .. })), "{again:?}");
        // So is another spelling of the same directory.
        let name = dir.path().file_name().unwrap();
        let spelled = dir.path().join("..").join(name);
        let again = Store::open(&spelled);
        assert!(matches!(again, Err(Error::Abandoned { .. })), "{again:?}");
        assert!(started.elapsed() < SLED_LOCK_WAIT);
    }

    #[test]
    fn a_snapshot_left_half_written_by_a_full_disk_does_not_stop_the_store_opening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            put(&store, &doc("a", "Persisted text."));
            store.flush().unwrap();
        }
        // What sled leaves when the disk fills while it writes a snapshot:
        // an empty file that sorts after every complete snapshot.
        let leftover = dir.path().join("snap.FFFFFFFFFFFFFFFF.generating");
        std::fs::write(&leftover, b"").unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.metas().unwrap()[0].id, "a");
        assert!(!leftover.exists());
    }

    #[test]
    fn other_format_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            db.insert(VERSION_KEY, b"99").unwrap();
            db.flush().unwrap();
        }
        let err = Store::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, Error::FormatVersion { found, expected: FORMAT_VERSION, .. } if found == "99"),
            "{err}"
        );
    }

    #[test]
    fn older_stores_are_read_and_upgraded_with_their_dialogues_and_dags() {
        use crate::model::dag::v5;
        use crate::model::dialogue::{v4, v7};
        for old_version in UPGRADABLE_VERSIONS {
            let dir = tempfile::tempdir().unwrap();
            let t0 = turn("s", 0);
            let d = dialogue("s", &t0);
            // One chunk per EDU: a DAG record stored in pieces.
            let big = large("big", 600_000);
            let big_dag = Dag::from_edges(
                (0..big.edus.len() as u32)
                    .map(|e| crate::model::dag::DagNode {
                        level: 1,
                        span: crate::model::edu::Span::new(e, e),
                        points: Vec::new(),
                        window: None,
                        text: None,
                    })
                    .collect(),
                Vec::new(),
            );
            {
                let store = Store::open(dir.path()).unwrap();
                put(&store, &doc("a", "Text stored by an older version."));
                store
                    .put(&big, &vectors(&big), &big_dag, &LlmCost::default())
                    .unwrap();
                assert!(store.manifest(DAG, "big").unwrap().is_some());
                store.put_turns(&[written(&t0)], &d).unwrap();
                // The dialogue as versions 3 to 7 stored it: branches with
                // vector sums, and before version 5 turns without times.
                let branches: Vec<v7::Branch> = (d.branches.iter())
                    .map(|b| v7::Branch {
                        id: b.id,
                        topic: b.topic,
                        fork: b.fork,
                        turns: b.turns.clone(),
                        summary: b.summary.clone(),
                        vector_sum: vec![1.0, 0.0],
                    })
                    .collect();
                let timeless = v4::Dialogue {
                    id: d.id.clone(),
                    turns: d
                        .turns
                        .iter()
                        .map(|t| v4::Turn {
                            number: t.number,
                            role: t.role,
                            doc: t.doc.clone(),
                            parent: t.parent,
                            topic: t.topic,
                            branch: t.branch,
                            summary: t.summary,
                            edus: t.edus,
                            bytes: t.bytes,
                            tokens: t.tokens,
                        })
                        .collect(),
                    topics: d.topics.clone(),
                    branches: branches.clone(),
                    current: d.current,
                };
                let old = match TIMELESS_TURN_VERSIONS.contains(&old_version) {
                    true => archive(&timeless).unwrap(),
                    false => archive(&v7::Dialogue {
                        id: d.id.clone(),
                        turns: d.turns.clone(),
                        topics: d.topics.clone(),
                        branches,
                        current: d.current,
                    })
                    .unwrap(),
                };
                // Version 8 stored dialogues as now (and must not have
                // them read in an older layout).
                if OLD_DIALOGUE_VERSIONS.contains(&old_version) {
                    store.db.insert(key(SESSION, "s"), old.as_slice()).unwrap();
                }
                // The DAGs as versions 3 to 5 stored them: points without
                // text; one large enough to be stored in pieces. (Version
                // 6 stored them as now.)
                if TEXTLESS_POINT_VERSIONS.contains(&old_version) {
                    for (id, dag) in [
                        ("a", dag(&doc("a", "Text stored by an older version."))),
                        ("big", big_dag.clone()),
                    ] {
                        let old = v5::Dag {
                            nodes: (dag.nodes.iter())
                                .map(|n| v5::DagNode {
                                    level: n.level,
                                    span: n.span,
                                    points: n.points.clone(),
                                    window: n.window,
                                })
                                .collect(),
                            offsets: dag.offsets.clone(),
                            targets: dag.targets.clone(),
                            weights: dag.weights.clone(),
                        };
                        let mut batch = Batch::default();
                        store
                            .insert_record(&mut batch, DAG, id, &archive(&old).unwrap())
                            .unwrap();
                        store.apply(batch).unwrap();
                    }
                    assert!(
                        store.dag("a").is_err(),
                        "the old DAG layout does not read as the new"
                    );
                }
                // A damaged record is left as it was, for `check` to name.
                store
                    .db
                    .insert(key(SESSION, "bad"), b"not an archive".as_slice())
                    .unwrap();
                store
                    .db
                    .insert(VERSION_KEY, old_version.to_string().as_bytes())
                    .unwrap();
                store.flush().unwrap();
                // (A one-branch record of versions 5 to 7 happens to read
                // as the new layout; the bytes below show it rewritten.)
                if TIMELESS_TURN_VERSIONS.contains(&old_version) {
                    assert!(
                        store.dialogue("s").is_err(),
                        "the old layout does not read as the new"
                    );
                }
            }
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(
                store.db.get(VERSION_KEY).unwrap().unwrap().as_ref(),
                FORMAT_VERSION.to_string().as_bytes()
            );
            assert_eq!(
                store.db.get(key(SESSION, "s")).unwrap().unwrap().as_ref(),
                archive(&d).unwrap().as_slice(),
                "the dialogue is rewritten in the new layout"
            );
            assert_eq!(store.dialogue("s").unwrap(), Some(d));
            assert_eq!(
                store.dag("a").unwrap().unwrap().to_dag().unwrap(),
                dag(&doc("a", "Text stored by an older version."))
            );
            assert_eq!(
                store.dag("big").unwrap().unwrap().to_dag().unwrap(),
                big_dag
            );
            assert_eq!(
                store.db.get(key(SESSION, "bad")).unwrap().unwrap().as_ref(),
                b"not an archive"
            );
            assert!(matches!(store.dialogue("bad"), Err(Error::Corrupt { .. })));
            store.db.remove(key(SESSION, "bad")).unwrap();
            assert_eq!(store.check().unwrap(), 3);
        }
    }

    #[test]
    fn vectors_of_format_6_are_read_in_place_and_rewritten_in_8_bits() {
        let dir = tempfile::tempdir().unwrap();
        let a = doc("a", "# A\n\nOne sentence. And another one.\n");
        let big = large("big", 600_000);
        // Rows that 8 bits cannot hold exactly, as format 6 kept them;
        // `big`'s record is large enough to be stored in pieces.
        let full = |doc: &Document, dimension: usize| DocVectors {
            dimension: dimension as u32,
            nodes: (0..doc.tree.nodes.len() * dimension)
                .map(|i| (i as f32 * 0.37).sin())
                .collect(),
            edus: (0..doc.edus.len() * dimension)
                .map(|i| (i as f32 * 0.11).cos())
                .collect(),
        };
        let (old_a, old_big) = (full(&a, 3), full(&big, 64));
        {
            let store = Store::open(dir.path()).unwrap();
            for (doc, old) in [(&a, &old_a), (&big, &old_big)] {
                store
                    .put(doc, &pack(old), &dag(doc), &LlmCost::default())
                    .unwrap();
                let id = doc.meta.id.as_str();
                let mut batch = Batch::default();
                batch.remove(&key(PACKED_VECTORS, id));
                store
                    .remove_kept_apart(&mut batch, PACKED_VECTORS, id)
                    .unwrap();
                store.apply(batch).unwrap();
                let old = archive(old).unwrap();
                if old.len() > PIECE_BYTES {
                    store_pieced(&store, VECTORS, id, &old);
                } else {
                    store.db.insert(key(VECTORS, id), old.as_slice()).unwrap();
                }
            }
            assert!(matches!(
                store.manifest(VECTORS, "big").unwrap(),
                Some(Kept::Pieces(_))
            ));
            store.db.insert(VERSION_KEY, b"6".as_slice()).unwrap();
            store.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.db.get(VERSION_KEY).unwrap().unwrap().as_ref(),
            FORMAT_VERSION.to_string().as_bytes()
        );
        // Read as they are: no rewrite at open.
        for (id, old) in [("a", &old_a), ("big", &old_big)] {
            let stored = store.vectors(id).unwrap().unwrap();
            let record = stored.get().unwrap();
            assert!(matches!(record, VectorRecord::Full(_)));
            assert_eq!(record.rows(Target::Nodes).values(), old.nodes);
            assert_eq!(record.rows(Target::Edus).values(), old.edus);
            assert_eq!(stored.to_packed().unwrap(), pack(old));
        }
        assert_eq!(store.check().unwrap(), 2);
        // The next write stores them in 8 bits and leaves no f32 record.
        store
            .put(&a, &pack(&old_a), &dag(&a), &LlmCost::default())
            .unwrap();
        let stored = store.vectors("a").unwrap().unwrap();
        assert!(matches!(stored.get().unwrap(), VectorRecord::Packed(_)));
        assert!(!store.db.contains_key(key(VECTORS, "a")).unwrap());
        assert_eq!(stored.to_packed().unwrap(), pack(&old_a));
        assert_eq!(store.check().unwrap(), 2);
        // Removal takes the old layout's pieces too.
        remove_whole(&store, "big");
    }

    /// How many keys name document `id`: whole records, manifests, pieces.
    fn stored_keys(store: &Store, id: &str) -> usize {
        store
            .db
            .iter()
            .keys()
            .filter(|k| {
                let k = k.as_ref().unwrap();
                k.windows(id.len()).any(|w| w == id.as_bytes())
            })
            .count()
    }

    /// A Markdown document of about `bytes` bytes of prose.
    fn large(id: &str, bytes: usize) -> Document {
        let paragraph = "Pieces keep every sled page small, whatever the size of a document. \
                         Listing reads metadata pages only, never a record's megabytes.\n\n";
        doc(id, &paragraph.repeat(bytes / paragraph.len() + 1))
    }

    /// Stores record `kind` of `id` as stores of format 6 and older did:
    /// in pieces in sled, with a [`Manifest`].
    fn store_pieced(store: &Store, kind: u8, id: &str, bytes: &[u8]) {
        let mut batch = Batch::default();
        store.remove_kept_apart(&mut batch, kind, id).unwrap();
        batch.remove(&key(kind, id));
        let manifest = Manifest::of(bytes).unwrap();
        batch.insert(&manifest_key(kind, id), &manifest.encode());
        for (index, piece) in (0..).zip(bytes.chunks(PIECE_BYTES)) {
            batch.insert(&piece_key(kind, id, index), piece);
        }
        store.apply(batch).unwrap();
        store.flush().unwrap();
    }

    /// A store holding document `big` whose text is pieced as format 6
    /// kept it.
    fn store_with_pieced_text() -> (tempfile::TempDir, Store, Document) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let big = large("big", 3 * PIECE_BYTES);
        put(&store, &big);
        store_pieced(&store, TEXT, "big", big.text.as_bytes());
        (dir, store, big)
    }

    /// The record files present, sorted.
    fn files_present(store: &Store) -> Vec<String> {
        let mut names = store.files.names().unwrap();
        names.sort();
        names
    }

    /// The record files the manifests name, sorted.
    fn files_named(store: &Store) -> Vec<String> {
        let mut names: Vec<String> = (store.db.scan_prefix([MANIFEST]).values())
            .filter_map(|v| RecordFile::decode(&v.unwrap()))
            .map(|f| f.name)
            .collect();
        names.sort();
        names
    }

    /// Removes document `id` and checks nothing of it is left: no key, and
    /// (once the removal is flushed) no record file.
    fn remove_whole(store: &Store, id: &str) {
        store.remove(id).unwrap();
        store.flush().unwrap();
        assert_eq!(stored_keys(store, id), 0);
        assert_eq!(files_present(store), Vec::<String>::new());
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
            assert_eq!(store.db.contains_key(key(TEXT, "big")).unwrap(), !apart);
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
            for entry in store.db.iter() {
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
        assert_eq!(store.db.scan_prefix([PIECE]).count(), 0);
        assert_eq!(
            store.get("big").unwrap().unwrap().to_document().unwrap(),
            big
        );
        store_pieced(&store, TEXT, "big", big.text.as_bytes());
        remove_whole(&store, "big");
    }

    #[test]
    fn a_missing_or_stray_piece_is_named_as_damage() {
        let (_dir, store, _) = store_with_pieced_text();
        put(&store, &doc("small", "A small document beside it."));
        store.db.remove(piece_key(TEXT, "big", 1)).unwrap();
        let err = store.get("big").err().unwrap();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        store
            .db
            .insert(piece_key(TREE, "gone", 0), b"stray".as_slice())
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
        let mut bytes = store.db.get(&piece).unwrap().unwrap().to_vec();
        bytes[10] ^= 1;
        store.db.insert(&piece, bytes).unwrap();
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
            .db
            .insert(manifest_key(TEXT, "big"), &manifest.encode())
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

    #[test]
    fn foreign_sled_database_is_not_a_store() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            db.insert(b"someone else", b"data").unwrap();
            db.flush().unwrap();
        }
        assert!(matches!(Store::open(dir.path()), Err(Error::NotAStore(_))));
    }

    /// A one-turn dialogue for session `session` naming `doc`.
    fn dialogue(session: &str, doc: &Document) -> Dialogue {
        use crate::model::dialogue::{Branch, Role, SummaryPick, Topic, Turn};
        let pick = SummaryPick {
            turn: 0,
            edus: crate::model::edu::Span::new(0, 0),
            bytes: [doc.edus[0].start, doc.edus[0].end],
            tokens: doc.edus[0].tokens,
        };
        Dialogue {
            id: session.to_owned(),
            turns: vec![Turn {
                number: 0,
                role: Role::User,
                doc: doc.meta.id.clone(),
                parent: None,
                topic: 0,
                branch: 0,
                summary: pick,
                edus: doc.meta.edus,
                bytes: [doc.edus[0].start, doc.edus[doc.edus.len() - 1].end],
                tokens: doc.meta.tokens,
                at: None,
            }],
            topics: vec![Topic {
                id: 0,
                branches: vec![0],
                last_turn: 0,
                turns: 1,
                summary: vec![pick],
                vector_sum: vec![1.0, 0.0],
            }],
            branches: vec![Branch {
                id: 0,
                topic: 0,
                fork: None,
                turns: vec![0],
                summary: vec![pick],
            }],
            current: 0,
        }
    }

    /// What [`Store::put_turns`] writes for one turn document.
    fn written(doc: &Document) -> (Document, PackedVectors, Dag) {
        (doc.clone(), vectors(doc), dag(doc))
    }

    fn turn(session: &str, number: u32) -> Document {
        let id = crate::model::ids::turn_doc_id(session, number);
        analyze(
            &id,
            "Plan a winter trip. Pack warm clothes.".into(),
            Format::Text,
        )
        .unwrap()
    }

    #[test]
    fn a_turn_and_its_dialogue_are_written_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let t0 = turn("s", 0);
        let d = dialogue("s", &t0);
        assert!(store.dialogues().unwrap().is_empty());
        let seq = store.put_turns(&[written(&t0)], &d).unwrap();
        // Both records, one log entry naming the turn document.
        assert_eq!(store.dialogue("s").unwrap(), Some(d.clone()));
        assert_eq!(
            store
                .get(&t0.meta.id)
                .unwrap()
                .unwrap()
                .to_document()
                .unwrap(),
            t0
        );
        assert_eq!(
            store.changes_after(seq - 1).unwrap(),
            [(seq, t0.meta.id.clone())]
        );
        assert_eq!(store.dialogues().unwrap(), std::slice::from_ref(&d));
        assert_eq!(store.check().unwrap(), 1);
        // A dialogue that does not end with the document is refused whole:
        // neither the document nor the dialogue is written.
        let t1 = turn("s", 1);
        let other = turn("x", 0);
        for (doc, record) in [(&t1, &d), (&other, &d), (&t0, &dialogue("x", &t0))] {
            let err = store.put_turns(&[written(doc)], record).unwrap_err();
            assert!(matches!(err, Error::Invariant { .. }), "{err}");
            assert_eq!(store.last_seq().unwrap(), seq);
        }
        assert!(store.get(&t1.meta.id).unwrap().is_none());
        assert!(store.dialogue("x").unwrap().is_none());
        assert_eq!(store.dialogues().unwrap(), [d]);
    }

    #[test]
    fn check_refuses_a_dialogue_without_its_turn_or_a_turn_without_its_dialogue() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let t0 = turn("s", 0);
        let d = dialogue("s", &t0);
        store.put_turns(&[written(&t0)], &d).unwrap();
        // What a torn write would leave: the dialogue without the document…
        for kind in RECORDS {
            store.db.remove(key(kind, &t0.meta.id)).unwrap();
        }
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "session s" && message.contains("missing"))
        );
        // …or the document without the dialogue.
        store
            .put(&t0, &vectors(&t0), &dag(&t0), &LlmCost::default())
            .unwrap();
        store.check().unwrap();
        store.db.remove(key(SESSION, "s")).unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == t0.meta.id));
        // A parent that does not precede its child is caught (when the
        // record is read: a corrupt record).
        let mut bad = d.clone();
        bad.turns[0].parent = Some(0);
        store
            .db
            .insert(key(SESSION, "s"), archive(&bad).unwrap().as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
        // A summary span outside its turn is caught.
        let mut bad = d;
        bad.topics[0].summary[0].edus = crate::model::edu::Span::new(0, 99);
        store
            .db
            .insert(key(SESSION, "s"), archive(&bad).unwrap().as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn a_session_whose_dialogue_is_damaged_is_removed_with_its_own_turns_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for session in ["s", "u", "s:1", "s.x"] {
            let t0 = turn(session, 0);
            store
                .put_turns(&[written(&t0)], &dialogue(session, &t0))
                .unwrap();
        }
        // s's dialogue is unreadable; t holds a copy of u's (a damaged key).
        store
            .db
            .insert(key(SESSION, "s"), b"not an archive".as_slice())
            .unwrap();
        let record = store.db.get(key(SESSION, "u")).unwrap().unwrap();
        store.db.insert(key(SESSION, "t"), record).unwrap();
        assert!(store.dialogue("s").is_err() && store.dialogue("t").is_err());

        // A later turn of s that lost its metadata record, past turn 999,999.
        let late = turn_doc_id("s", 1_000_000);
        store
            .db
            .insert(key(TEXT, &late), b"text".as_slice())
            .unwrap();
        put(&store, &doc("s", "Not a turn of s."));

        let s0 = turn_doc_id("s", 0);
        assert_eq!(
            store.remove_session("s").unwrap(),
            Some(vec![s0.clone(), late.clone()])
        );
        assert_eq!(keys_of(&store, &s0) + keys_of(&store, &late), 0);
        // Sessions whose ids begin with s's, and a document named s, are
        // untouched.
        for other in ["s:1", "s.x"] {
            assert_eq!(
                store.session_turn_ids(other).unwrap(),
                [turn_doc_id(other, 0)]
            );
            assert!(store.dialogue(other).unwrap().is_some());
        }
        assert!(store.get("s").unwrap().is_some());
        assert!(!store.db.contains_key(key(SESSION, "s")).unwrap());
        // t's record goes, and nothing of u's with it.
        assert_eq!(store.remove_session("t").unwrap(), Some(Vec::new()));
        assert!(!store.db.contains_key(key(SESSION, "t")).unwrap());
        let u0 = turn_doc_id("u", 0);
        assert_eq!(store.dialogue("u").unwrap().unwrap().turns[0].doc, u0);
        assert!(store.get(&u0).unwrap().is_some());
        // A turn left without its dialogue is removed with the session.
        store.db.remove(key(SESSION, "u")).unwrap();
        assert_eq!(store.remove_session("u").unwrap(), Some(vec![u0.clone()]));
        assert_eq!(keys_of(&store, &u0), 0);
        assert_eq!(store.remove_session("u").unwrap(), None);
        // Two sessions and the document remain, sound.
        assert_eq!(store.check().unwrap(), 3);
    }

    #[test]
    fn remove_session_removes_every_turn_and_the_dialogue_in_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let t0 = turn("s", 0);
        let d = dialogue("s", &t0);
        let seq = store.put_turns(&[written(&t0)], &d).unwrap();
        put(&store, &doc("keep", "Another document."));
        assert_eq!(store.remove_session("missing").unwrap(), None);
        let removed = store.remove_session("s").unwrap().unwrap();
        assert_eq!(removed, std::slice::from_ref(&t0.meta.id));
        let last = store.last_seq().unwrap();
        assert_eq!(last, seq + 2);
        assert_eq!(keys_of(&store, &t0.meta.id), 0);
        assert!(store.dialogue("s").unwrap().is_none());
        assert_eq!(
            store.changes_after(seq + 1).unwrap(),
            [(last, t0.meta.id.clone())]
        );
        assert_eq!(store.check().unwrap(), 1);
    }

    #[test]
    fn check_all_names_every_damaged_document_and_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (id, text) in [
            ("a", "First text."),
            ("b", "Second text."),
            ("c", "Third text."),
        ] {
            put(&store, &doc(id, text));
        }
        let clean = store.check_all(&Default::default()).unwrap();
        assert_eq!((clean.documents, clean.damaged.len()), (3, 0));
        store
            .db
            .insert(key(TREE, "a"), b"not an archive".as_slice())
            .unwrap();
        store
            .db
            .insert(key(EDUS, "c"), b"garbage".as_slice())
            .unwrap();
        store
            .db
            .insert(key(DAG, "ghost"), b"orphan".as_slice())
            .unwrap();
        let report = store.check_all(&Default::default()).unwrap();
        let named: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(named, ["ghost", "a", "c"]);
        assert_eq!(report.documents, 3);
        // Only the sound document's vectors are counted.
        assert_eq!(report.edus, clean.edus / 3);
        // check() still stops at the first.
        assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == "ghost"));
    }

    #[test]
    fn a_record_kept_under_another_id_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Some text."));
        let t0 = turn("s", 0);
        store
            .put_turns(&[written(&t0)], &dialogue("s", &t0))
            .unwrap();
        // Document a's records and session s's dialogue, copied as they are
        // under the ids b and t (what a damaged key would leave).
        for kind in RECORDS {
            if let Some(value) = store.db.get(key(kind, "a")).unwrap() {
                store.db.insert(key(kind, "b"), value).unwrap();
            }
        }
        let record = store.db.get(key(SESSION, "s")).unwrap().unwrap();
        store.db.insert(key(SESSION, "t"), record).unwrap();

        let named = |err: Error| match err {
            Error::Corrupt { key, message } => format!("{key}: {message}"),
            other => panic!("not damage: {other}"),
        };
        let Err(err) = store.get("b") else {
            panic!("b names a, yet it reads")
        };
        assert_eq!(named(err), "Mb: kept under \"b\" but names \"a\"");
        let err = store.dialogue("t").unwrap_err();
        assert_eq!(named(err), "session t: kept under \"t\" but names \"s\"");
        assert!(store.dialogues().is_err());
        // The listing leaves b out; the sound records still read.
        let mut listed: Vec<String> = store.metas().unwrap().into_iter().map(|m| m.id).collect();
        listed.sort();
        let mut sound = vec!["a".to_owned(), t0.meta.id.clone()];
        sound.sort();
        assert_eq!(listed, sound);
        assert_eq!(store.get("a").unwrap().unwrap().meta().unwrap().id, "a");
        assert_eq!(store.dialogue("s").unwrap().unwrap().id, "s");
        // check names both, and goes on past them.
        let report = store.check_all(&Default::default()).unwrap();
        let damaged: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(damaged, ["b", "session t"]);
        assert_eq!(report.documents, 3); // a, the turn and b
    }

    #[test]
    fn check_finds_orphans_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Some text."));
        store
            .db
            .insert(key(TEXT, "ghost"), b"orphan".as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == "ghost"));
        store.db.remove(key(TEXT, "ghost")).unwrap();
        store
            .db
            .insert(key(TREE, "a"), b"not an archive".as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
        store.db.remove(key(EDUS, "a")).unwrap();
        assert!(matches!(store.get("a"), Err(Error::Corrupt { .. })));
    }
}
