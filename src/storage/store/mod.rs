//! The storage seam: the only module that calls sled. Everything the store
//! persists goes through [`Store`], whose invariants are tested here.
//!
//! This file is the store and its batches: opening, the engine's handle
//! and its failures, and the few key-value calls (`Store::value`,
//! `Store::holds`, `Store::scan`, `Batch`) every other part uses; it,
//! `engine_files` (the engine's own files) and `log_pages` (its data
//! log, read without it) are the only files that name sled. One file per
//! concept beside it: `records` (keys and encodings), `documents`,
//! `sessions`, `kept_apart` (large records in files), `change_log`,
//! `losses`, `legacy` (older layouts and their upgrade) and `check`.
//!
//! Invariants:
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
//!   ([`RecordFiles`](crate::storage::record_files::RecordFiles), value
//!   separation), with a small manifest in its place. sled reads a leaf
//!   page (4–16 neighbouring keys) whole, so a large value beside a
//!   document's metadata would make listing cost that document's size,
//!   and sled writes a large value twice and keeps both.
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
//! - a write is refused with [`Error::DiskFull`](crate::Error::DiskFull) before anything reaches
//!   sled unless the file system has twice the write's bytes free plus a
//!   reserve ([`SPACE_RESERVE`], or the smaller [`REMOVAL_RESERVE`] for a
//!   write that removes records, so space can still be reclaimed, using
//!   the space a `ballast` file holds for it when the disk is full): sled
//!   0.34 can hang in `flush` once the disk fills under it, so edudb keeps
//!   its own writes from filling it;
//! - a failure in the file system abandons the handle (`Store::failure`):
//!   sled 0.34 can hang in any later flush, so later calls fail at once
//!   and dropping the store does not flush;
//! - sled's own metadata is checked before sled opens the directory
//!   (`engine_files`): a half-written snapshot is removed, a damaged one
//!   moved aside (sled replays its log instead) and a damaged
//!   configuration rewritten, so one bad byte there never bricks a store;
//!   where sled cannot open its data log at all, `log_pages` reads what
//!   the log still holds page by page into a new database, for salvage.
//!
//! Swapping the engine means rewriting this file, `engine_files` and
//! `log_pages` only.

mod ballast;
mod change_log;
mod check;
mod documents;
mod engine_files;
mod handle;
mod kept_apart;
mod legacy;
mod log_pages;
mod lookups;
mod losses;
mod metadata;
mod records;
mod sessions;
#[cfg(test)]
mod test_support;

pub use check::{Damage, StoreCheck};
pub use documents::{StoredDag, StoredDoc, StoredVectors};
pub use handle::{ENGINE_DIR, REMOVAL_RESERVE, SPACE_RESERVE, Store};
pub use kept_apart::PIECE_BYTES;
pub use log_pages::{LogContents, LogRecovery};
pub use losses::Loss;
pub use records::FORMAT_VERSION;
