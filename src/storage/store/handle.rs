//! The store's handle on its engine: opening, the engine's failures,
//! batches, flushing, and the few key-value calls every other part of the
//! store uses. With `engine_files` and `log_pages`, the only files that
//! name sled.

use std::path::{Path, PathBuf};

use super::ballast::Ballast;
use super::engine_files;
use super::log_pages::{self, LogContents, LogRecovery};
use super::records::{
    EMBEDDER_KEY, FORMAT_VERSION, HAS_METADATA_KEY, META, METADATA, VERSION_KEY, decode_meta,
};
use crate::error::{Error, Result};
use crate::storage::fork_release::ReleasedOnFork;
use crate::storage::record_files::RecordFiles;

/// The directory, inside a store's directory, that holds the engine's
/// files: what [`Store::open`] is given. Named for the engine, as every
/// store made so far has it.
pub const ENGINE_DIR: &str = "sled";

/// How long [`Store::open`] waits for a previous in-process `Store` on the
/// same path to release sled's file lock.
const SLED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Free space a write that adds data leaves on the store's file system,
/// beyond twice its own bytes: room for sled's log segments, its snapshot
/// at the next open, and the full-text index's commit. (Saving the vector
/// graph is not covered: it is upkeep, and a failed save only costs a
/// replay next time.)
pub const SPACE_RESERVE: u64 = 8 << 20;

/// Free space a removal needs: removing must stay possible on a disk the
/// reserve has stopped ingest on, since it is how space is reclaimed.
pub const REMOVAL_RESERVE: u64 = 1 << 20;

/// The directory of the record files, inside the store's directory (sled
/// leaves other names there alone).
pub(super) const RECORD_FILES_DIR: &str = "records";

/// The bytes of keys and values [`Store::rebuild_from_log`] writes per
/// batch, to bound its memory.
const REBUILD_BATCH_BYTES: usize = 64 << 20;

/// The persistent document store.
#[derive(Debug)]
pub struct Store {
    /// Dropped with the store unless it was abandoned (see [`Store::failure`]).
    db: std::mem::ManuallyDrop<sled::Db>,
    /// The store's directory (the engine's files and `records/`).
    pub(super) dir: PathBuf,
    /// The files of records kept apart.
    pub(super) files: RecordFiles,
    /// Files of replaced or removed records, deleted at the next flush
    /// (once the batches that dropped them are durable).
    stale_files: std::sync::Mutex<Vec<String>>,
    /// Disk space held for removals on a full disk.
    ballast: Ballast,
    /// Whether any document was ever given metadata (`HAS_METADATA_KEY`).
    pub(super) has_metadata: std::sync::atomic::AtomicBool,
    /// Batches applied through this handle (or tried: a failed apply may
    /// still have reached sled), so that what was read before one can be
    /// known to be stale.
    pub(super) batches: std::sync::atomic::AtomicU64,
    /// The latest lookups of the metadata index.
    pub(super) lookups: super::lookups::Lookups,
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
pub(super) struct Batch<'a> {
    writes: sled::Batch,
    bytes: u64,
    pub(super) reclaims: bool,
    /// Record files written for the batch (each as its record was added,
    /// so no large archive waits in memory for the others), removed again
    /// unless the batch is applied.
    written: Option<(&'a RecordFiles, Vec<String>)>,
    /// Record files the batch drops, deleted once it is durable.
    pub(super) stale: Vec<String>,
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
    pub(super) fn reclaiming() -> Batch<'a> {
        let mut batch = Batch::default();
        batch.reclaims = true;
        batch
    }

    pub(super) fn insert(&mut self, key: &[u8], value: &[u8]) {
        self.bytes += (key.len() + value.len()) as u64;
        self.writes.insert(key, value);
    }

    pub(super) fn remove(&mut self, key: &[u8]) {
        self.writes.remove(key);
    }

    /// Notes a record file written for this batch.
    pub(super) fn add_file(&mut self, files: &'a RecordFiles, name: String) {
        self.written
            .get_or_insert_with(|| (files, Vec::new()))
            .1
            .push(name);
    }
}

/// A value as the engine hands it out, read in place from its buffer.
pub(super) type Bytes = sled::IVec;

/// The entries of a range of keys, in key order ([`Store::scan`]); a
/// failed read ends in an error (a failure in the file system abandons the
/// handle, as every failed call does).
pub(super) struct Scan<'a> {
    store: &'a Store,
    entries: sled::Iter,
}

impl Iterator for Scan<'_> {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.entries.next()?.map_err(|e| self.store.failure(e)))
    }
}

impl Scan<'_> {
    /// The next entry; `Some(Err(why))` at a page the engine cannot read
    /// (a scan should end there: the engine would fail on the same page
    /// again); `None` at the end. A failure in the file system is not an
    /// unreadable page: it fails.
    pub(super) fn next_or_unreadable(
        &mut self,
    ) -> Result<Option<std::result::Result<(Bytes, Bytes), String>>> {
        match self.entries.next() {
            None => Ok(None),
            Some(Ok(entry)) => Ok(Some(Ok(entry))),
            Some(Err(err @ sled::Error::Io(_))) => Err(self.store.failure(err)),
            Some(Err(err)) => Ok(Some(Err(format!("sled cannot read a page of them: {err}")))),
        }
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
pub(super) fn io_failed(dir: &Path, err: std::io::Error) -> Error {
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
    pub(super) fn failure(&self, err: sled::Error) -> Error {
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

    /// The value kept under `key`, if any.
    pub(super) fn value(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.sled()?.get(key).map_err(|e| self.failure(e))
    }

    /// Whether a value is kept under `key`.
    pub(super) fn holds(&self, key: &[u8]) -> Result<bool> {
        self.sled()?.contains_key(key).map_err(|e| self.failure(e))
    }

    /// Syncs the engine's data log to disk, so that what was read from it
    /// is durable even if the process that wrote it never synced it.
    pub(super) fn sync_log(&self) -> std::io::Result<()> {
        std::fs::File::open(self.dir.join(engine_files::LOG_FILE)).and_then(|log| log.sync_all())
    }

    /// Whether the engine holds no key at all (a new store).
    pub(super) fn is_empty(&self) -> Result<bool> {
        Ok(self.sled()?.is_empty())
    }

    /// The entries whose keys start with `prefix`, in key order.
    pub(super) fn scan(&self, prefix: &[u8]) -> Result<Scan<'_>> {
        Ok(Scan {
            store: self,
            entries: self.sled()?.scan_prefix(prefix),
        })
    }

    /// The entries whose keys lie in `first..=last`, in key order.
    pub(super) fn scan_between(&self, first: &[u8], last: &[u8]) -> Result<Scan<'_>> {
        Ok(Scan {
            store: self,
            entries: self.sled()?.range(first..=last),
        })
    }

    /// Opens (creating if needed) the sled database in `dir` and checks its format version.
    ///
    /// The caller holds the store directory's process lock, so sled's own
    /// file lock can only be held by this process's previous `Store` on the
    /// same path, whose background flusher may still be shutting down; that
    /// case is retried for up to [`SLED_LOCK_WAIT`].
    ///
    /// sled writes a snapshot whenever it opens, so on a disk too full for
    /// it this fails with [`Error::DiskFull`]; the room kept for removals
    /// is left for a removal (see [`Store::open_to_remove`]).
    pub fn open(dir: &Path) -> Result<Store> {
        Store::open_spending(dir, false)
    }

    /// [`Store::open`] for a removal: on a disk too full for sled's writes
    /// at open, the room kept for removals is spent on them, leaving the
    /// rest of it to the removal.
    pub fn open_to_remove(dir: &Path) -> Result<Store> {
        Store::open_spending(dir, true)
    }

    /// [`Store::open`], spending the room kept for removals at open when
    /// `kept_room` is set and the disk is full.
    fn open_spending(dir: &Path, kept_room: bool) -> Result<Store> {
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
        // room kept for removals lets it, and the removal after it.
        let ballast = Ballast::new(dir);
        if kept_room && fs4::available_space(dir).is_ok_and(|free| free < REMOVAL_RESERVE) {
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
            has_metadata: Default::default(),
            batches: Default::default(),
            lookups: Default::default(),
            abandoned: std::sync::OnceLock::new(),
            #[cfg(test)]
            fail_next_flush: Default::default(),
        };
        let has_metadata = store.holds(HAS_METADATA_KEY)?;
        (store.has_metadata).store(has_metadata, std::sync::atomic::Ordering::Relaxed);
        store.settle_format()?;
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
    ///
    /// The store's own records share the log's first keys, so damage
    /// there may take them while documents still read: a lost format
    /// record is taken as this binary's format once a document's metadata
    /// record decodes in it, a lost mark of metadata is set again where
    /// metadata records read, and a lost embedder record needs
    /// `embedder_named` (the caller names the embedder, which the rebuilt
    /// store then records): without it the rebuild is refused, since
    /// vectors copied under another embedder would answer wrongly.
    pub fn rebuild_from_log(
        contents: LogContents,
        damaged: &Path,
        into: &Path,
        embedder_named: bool,
    ) -> Result<LogRecovery> {
        let records = contents.records();
        let mut recovery = contents.recovery();
        let lost = |message: &str| Error::Corrupt {
            key: format!(
                "{} (the data log)",
                damaged.join(engine_files::LOG_FILE).display()
            ),
            message: message.into(),
        };
        let mut settings: Vec<(&[u8], Vec<u8>)> = Vec::new();
        if !records.contains_key(VERSION_KEY) {
            let a_document = (records.range(vec![META]..vec![META + 1]))
                .any(|(key, value)| decode_meta(key, value).is_ok());
            if !a_document {
                return Err(lost(
                    "neither the store's format record nor any document's record reads in it, so nothing in it can be read as a store's",
                ));
            }
            settings.push((VERSION_KEY, FORMAT_VERSION.to_string().into_bytes()));
            recovery.format_assumed = true;
        }
        if !records.contains_key(EMBEDDER_KEY) {
            if !embedder_named {
                return Err(lost(
                    "the record of the store's embedder does not read in it; salvage it again naming the embedder it was built with (--embedder), so that its vectors are kept under the right one",
                ));
            }
            recovery.embedder_named = true;
        }
        let has_metadata = (records.range(vec![METADATA]..vec![METADATA + 1]))
            .next()
            .is_some();
        if has_metadata && !records.contains_key(HAS_METADATA_KEY) {
            settings.push((HAS_METADATA_KEY, b"1".to_vec()));
        }
        let db = engine_files::open(into)?.map_err(|e| storage(into, e))?;
        let mut batch = sled::Batch::default();
        let mut bytes = 0;
        let written = records.iter().map(|(key, value)| (key.as_slice(), value));
        for (key, value) in written.chain(settings.iter().map(|(key, value)| (*key, value))) {
            batch.insert(key, value.as_slice());
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
        Ok(recovery)
    }

    /// The embedder configuration recorded for this store, if any.
    pub fn embedder_config(&self) -> Result<Option<String>> {
        Ok(self
            .value(EMBEDDER_KEY)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Records the store's embedder configuration (durably).
    pub fn set_embedder_config(&self, config: &str) -> Result<()> {
        let mut batch = Batch::default();
        batch.insert(EMBEDDER_KEY, config.as_bytes());
        self.apply(batch)?;
        self.flush()
    }

    /// Applies `batch` atomically once the file system has room for it
    /// (see [`Store::ensure_space`]).
    pub(super) fn apply(&self, mut batch: Batch<'_>) -> Result<()> {
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
        (self.batches).fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
    pub(super) fn ensure_space(&self, needed: u64, bytes: u64) -> Result<()> {
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

    /// Puts `value` under `key` directly, outside any batch, as damage or
    /// an older layout would leave it: for the store's own tests.
    #[cfg(test)]
    pub(super) fn put_raw(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.db
            .insert(key.as_ref(), value.as_ref())
            .map(drop)
            .map_err(|e| self.failure(e))
    }

    /// Removes `key` directly, outside any batch: for the store's own tests.
    #[cfg(test)]
    pub(super) fn remove_raw(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.db
            .remove(key.as_ref())
            .map(drop)
            .map_err(|e| self.failure(e))
    }

    /// Overwrites document `id`'s tree record (its metadata record when
    /// `meta`) with bytes that are no archive, as a damaged disk would: for
    /// salvage tests above the seam.
    #[cfg(test)]
    pub(crate) fn damage(&self, id: &str, meta: bool) {
        let kind = if meta {
            super::records::META
        } else {
            super::records::TREE
        };
        self.put_raw(super::records::key(kind, id), b"damaged")
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_in_the_file_system_abandons_the_handle_for_the_rest_of_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set_embedder_config("hashed").unwrap();
        // A failure that is not the file system's leaves the handle usable.
        let other = store.failure(sled::Error::Unsupported("a test".into()));
        assert!(matches!(other, Error::Storage(_)), "{other:?}");
        assert_eq!(store.embedder_config().unwrap().as_deref(), Some("hashed"));
        // A full disk is named as such, and the handle is abandoned: every
        // later call fails at once, flushing included.
        let full = store.failure(sled::Error::Io(std::io::ErrorKind::StorageFull.into()));
        assert!(matches!(full, Error::DiskFull { .. }), "{full:?}");
        let abandoned = |result: Result<()>| matches!(result, Err(Error::Abandoned { .. }));
        assert!(abandoned(store.embedder_config().map(drop)));
        assert!(abandoned(store.metas().map(drop)));
        assert!(abandoned(store.flush()));
        assert!(abandoned(store.check().map(drop)));
        assert!(abandoned(store.last_seq().map(drop)));
        // Dropping it does not flush (which could hang); the handle stays
        // open, so opening the store again in this process is refused at
        // once, naming the cause, rather than waiting for sled's lock.
        drop(store);
        // (Refused as abandoned, it never reached the wait for sled's lock,
        // which ends in a storage error: the error's kind shows it.)
        let again = Store::open(dir.path());
        assert!(matches!(again, Err(Error::Abandoned { .. })), "{again:?}");
        // So is another spelling of the same directory.
        let name = dir.path().file_name().unwrap();
        let spelled = dir.path().join("..").join(name);
        let again = Store::open(&spelled);
        assert!(matches!(again, Err(Error::Abandoned { .. })), "{again:?}");
    }

    #[test]
    fn a_snapshot_left_half_written_by_a_full_disk_does_not_stop_the_store_opening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.set_embedder_config("hashed").unwrap();
        }
        // What sled leaves when the disk fills while it writes a snapshot:
        // an empty file that sorts after every complete snapshot.
        let leftover = dir.path().join("snap.FFFFFFFFFFFFFFFF.generating");
        std::fs::write(&leftover, b"").unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.embedder_config().unwrap().as_deref(), Some("hashed"));
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
    fn foreign_sled_database_is_not_a_store() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = sled::open(dir.path()).unwrap();
            db.insert(b"someone else", b"data").unwrap();
            db.flush().unwrap();
        }
        assert!(matches!(Store::open(dir.path()), Err(Error::NotAStore(_))));
    }
}
