//! sled's data log read page by page without sled, for salvage when sled
//! cannot open a store at all (damage to its log's first pages, or to the
//! file of a large page that sled reads while it recovers).
//!
//! The log (`db`) is a run of segments of [`SEGMENT_SIZE`] bytes, each a
//! 20-byte header and then messages. A message is a header (CRC-32, kind,
//! length, segment number and page id, in sled's varints) and a body: a
//! whole page (a node: its key range and, for a leaf, its keys and
//! values), or one change to a page (set or delete a key, a merge step,
//! the page freed). A large body is kept in a file of its own under
//! `blobs/`, named by its log sequence number, which the message holds.
//! Every message and every such file carries a checksum, so a damaged one
//! is left out, and the scan finds the next message by its checksum.
//!
//! A batch of changes, which sled applies atomically, starts with a
//! manifest naming the log position its last change reaches; the key
//! changes of a batch the log does not hold readable up to there (damage
//! inside it, or a write cut short at the log's end) are left out.
//!
//! A page reads as its latest node with the later changes applied. Where
//! damage leaves two pages claiming the same keys, the one whose node is
//! newer wins. What comes out is what the log last held that still reads,
//! so a key whose latest write was lost reads as an earlier value, or
//! (where the node that dropped it was lost) as a value since deleted:
//! callers check what they copy.
//!
//! The layout is sled 0.34's (`pagecache/logger.rs`, `serialization.rs`
//! and `node.rs` in its source); a test writes a store with sled and reads
//! it back with this module.

use std::collections::BTreeMap;
use std::ops::Bound::{Included, Unbounded};
use std::path::Path;

use serde::Serialize;

use super::engine_files::{LOG_FILE, SEGMENT_SIZE};
use crate::error::{Error, Result};

/// The bytes of a segment's header.
const SEGMENT_HEADER: usize = 20;
/// The most bytes a message header takes; no message starts closer than
/// this to its segment's end.
const MAX_MESSAGE_HEADER: usize = 32;
/// The largest body sled keeps in the log itself: larger ones go to
/// `blobs/` (a quarter of a segment).
const MAX_INLINE_BODY: u64 = SEGMENT_SIZE / 4;
/// The directory of bodies kept in files of their own.
const BLOBS_DIR: &str = "blobs";

/// Message kinds, as sled numbers them.
const CANCELED: u8 = 1;
const CAP: u8 = 2;
const BATCH_MANIFEST: u8 = 3;
const FREE: u8 = 4;
const INLINE_NODE: u8 = 8;
const BLOB_NODE: u8 = 9;
const INLINE_LINK: u8 = 10;
const BLOB_LINK: u8 = 11;
/// The highest kind sled writes.
const LAST_KIND: u8 = 11;

/// What a data log read page by page holds ([`read`]).
#[derive(Debug, Default)]
pub struct LogContents {
    /// Every key the log still holds, with its latest readable value.
    records: BTreeMap<Vec<u8>, Vec<u8>>,
    /// What the reading found, for the report.
    recovery: LogRecovery,
}

impl LogContents {
    /// How the reading went.
    pub fn recovery(&self) -> LogRecovery {
        self.recovery
    }

    /// Every key the log still holds, with its latest readable value.
    pub(super) fn records(&self) -> &BTreeMap<Vec<u8>, Vec<u8>> {
        &self.records
    }

    /// Drops the store's own records (the keys that start with a 0 byte:
    /// format, embedder, marks), as damage to the log page holding them
    /// does.
    #[cfg(test)]
    pub(crate) fn lose_store_records(&mut self) {
        self.records.retain(|key, _| key.first() != Some(&0));
    }
}

/// How a data log read page by page went: what [`crate::Db::salvage_store`]
/// reports when the store's engine could not open the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LogRecovery {
    /// Pages of keys rebuilt from the log.
    pub pages: usize,
    /// Keys read back.
    pub records: usize,
    /// Stretches of the log, and files of large pages, that did not read
    /// (their checksums failed) and were left out.
    pub damaged: usize,
    /// Whether the store's format record was among what did not read, so
    /// its records were read as this binary's format (a record of an
    /// older one that does not decode in it is left out as damaged).
    pub format_assumed: bool,
    /// Whether the record of the store's embedder did not read, so the
    /// caller named it.
    pub embedder_named: bool,
}

/// A leaf page as a node message holds it: its key range and entries,
/// keys in full.
#[derive(Debug, Clone, PartialEq)]
struct Leaf {
    lo: Vec<u8>,
    /// Empty: no upper bound.
    hi: Vec<u8>,
    /// The bytes every key in the page starts with, left out of the
    /// keys as stored (the first `prefix_len` bytes of `lo`).
    prefix: Vec<u8>,
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Leaf {
    fn holds(&self, key: &[u8]) -> bool {
        key >= self.lo.as_slice() && (self.hi.is_empty() || key < self.hi.as_slice())
    }

    fn full_key(&self, stored: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), stored].concat()
    }
}

/// What one message says about its page.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    /// The page's whole content (a leaf).
    Node(Leaf),
    /// An index node: not a page of keys, but it replaces whatever the
    /// page held before (sled reuses freed page ids).
    Index,
    /// A key set, as stored (without the page's prefix).
    Set(Vec<u8>, Vec<u8>),
    /// A key removed, as stored.
    Del(Vec<u8>),
    /// The page was freed.
    Free,
    /// A step of a merge, which moves no keys by itself.
    Merge,
}

/// One readable message: its page, its log sequence number and change.
#[derive(Debug)]
struct Message {
    page: u64,
    lsn: u64,
    change: Change,
}

/// Reads every page the data log in sled's directory `dir` still holds
/// (`dir` is only read). None when `dir` holds no log.
pub(super) fn read(dir: &Path) -> Result<Option<LogContents>> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(LOG_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let failed = |e: std::io::Error| Error::Storage(format!("reading {}: {e}", path.display()));
    let file = std::fs::File::open(&path).map_err(failed)?;
    let len = file.metadata().map_err(failed)?.len();
    let mut scan = Scan {
        blobs: dir.join(BLOBS_DIR),
        ..Scan::default()
    };
    let mut segment = vec![0; SEGMENT_SIZE as usize];
    for start in (0..len).step_by(SEGMENT_SIZE as usize) {
        let filled = ((len - start) as usize).min(segment.len());
        file.read_exact_at(&mut segment[..filled], start)
            .map_err(failed)?;
        scan.segment(&segment[..filled]);
    }
    let damaged = scan.damage.len();
    Ok(Some(rebuild(scan.whole_batches(), damaged)))
}

/// The messages read so far, and the damage met.
#[derive(Default)]
struct Scan {
    blobs: std::path::PathBuf,
    messages: Vec<Message>,
    /// Where each stretch of damage starts, as a log sequence number.
    damage: Vec<u64>,
    /// Each batch's manifest: where it is and how far its batch reaches.
    batches: Vec<(u64, u64)>,
    /// Where the last readable message ends.
    end: u64,
}

impl Scan {
    /// Reads the messages of one segment's bytes.
    fn segment(&mut self, bytes: &[u8]) {
        if bytes.len() < SEGMENT_HEADER {
            return;
        }
        // The segment's number, from its header when that reads, else
        // from its first message that does.
        let mut number = segment_lsn(&bytes[..SEGMENT_HEADER]).map(|lsn| lsn / SEGMENT_SIZE);
        let mut at = SEGMENT_HEADER;
        // Where the bytes skipped since the last message start, if any of
        // them was written (an unwritten stretch reads as zeros).
        let mut skipped_from = None;
        let last_start = SEGMENT_SIZE as usize - MAX_MESSAGE_HEADER;
        while at < bytes.len() && at <= last_start {
            let Some(message) = parse_message(&bytes[at..], number) else {
                if bytes[at] != 0 {
                    skipped_from.get_or_insert(at);
                }
                at += 1;
                continue;
            };
            let base = message.segment * SEGMENT_SIZE;
            if let Some(from) = skipped_from.take() {
                self.damage.push(base + from as u64);
            }
            number = Some(message.segment);
            let lsn = base + at as u64;
            self.end = self.end.max(lsn + message.len as u64);
            match message.kind {
                CAP => return,
                BATCH_MANIFEST => {
                    if let Ok(last) = message.body.try_into().map(i64::from_le_bytes) {
                        self.batches.push((lsn, u64::try_from(last).unwrap_or(0)));
                    }
                }
                kind => match self.change(kind, message.body) {
                    Ok(Some(change)) => self.messages.push(Message {
                        page: message.page,
                        lsn,
                        change,
                    }),
                    Ok(None) => {}
                    Err(Unreadable) => self.damage.push(lsn),
                },
            }
            at += message.len;
        }
    }

    /// The messages read, less the key changes of every batch that did
    /// not read whole: damage inside it, or its end beyond the last
    /// readable message. (A whole page written inside such a batch is
    /// kept: it holds other keys' latest values too. Where it holds one of
    /// the batch's changes, that document may read in a mix of its
    /// versions, which the checks of each copied document catch.)
    fn whole_batches(mut self) -> Vec<Message> {
        self.damage.sort_unstable();
        let damaged_up_to = |lsn: u64| self.damage.partition_point(|&at| at <= lsn);
        let torn: Vec<(u64, u64)> = (self.batches.iter().copied())
            .filter(|&(start, last)| last >= self.end || damaged_up_to(last) > damaged_up_to(start))
            .collect();
        self.messages.retain(|message| {
            !matches!(message.change, Change::Set(..) | Change::Del(_))
                || !(torn.iter()).any(|&(start, last)| (start + 1..=last).contains(&message.lsn))
        });
        self.messages
    }

    /// What a message of `kind` with `body` changes, if it is a page's:
    /// reading a large body from its file.
    fn change(&self, kind: u8, body: &[u8]) -> std::result::Result<Option<Change>, Unreadable> {
        match kind {
            INLINE_NODE => parse_node(body).map(Some),
            INLINE_LINK => parse_link(body).map(Some),
            BLOB_NODE => self.blob(kind, body)?.map(|b| parse_node(&b)).transpose(),
            BLOB_LINK => self.blob(kind, body)?.map(|b| parse_link(&b)).transpose(),
            FREE => Ok(Some(Change::Free)),
            _ => Ok(None),
        }
    }

    /// The body of a message of `kind` kept in a file of its own, which
    /// `pointer` names: the file holds a CRC-32, the kind and the body.
    /// None when the file is gone: sled removes the file of a page it has
    /// since rewritten, and leaves the message in the log until its
    /// segment is reused.
    fn blob(&self, kind: u8, pointer: &[u8]) -> std::result::Result<Option<Vec<u8>>, Unreadable> {
        let lsn = i64::from_le_bytes(pointer.try_into().map_err(|_| Unreadable)?);
        let bytes = match std::fs::read(self.blobs.join(lsn.to_string())) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Err(Unreadable),
        };
        if bytes.len() < 5 || bytes[4] != kind {
            return Err(Unreadable);
        }
        let crc = u32::from_le_bytes(bytes[..4].try_into().map_err(|_| Unreadable)?);
        if crc32fast::hash(&bytes[4..]) != crc {
            return Err(Unreadable);
        }
        Ok(Some(bytes[5..].to_vec()))
    }
}

/// A message or body that does not read: left out.
#[derive(Debug)]
struct Unreadable;

/// A segment header's log sequence number, when its checksum matches.
fn segment_lsn(header: &[u8]) -> Option<u64> {
    let crc = u32::from_le_bytes(header[..4].try_into().ok()?) ^ 0xFFFF_FFFF;
    if crc32fast::hash(&header[4..SEGMENT_HEADER]) != crc {
        return None;
    }
    let lsn = i64::from_le_bytes(header[4..12].try_into().ok()?) ^ 0x7FFF_FFFF_FFFF_FFFF;
    u64::try_from(lsn).ok()
}

/// A message whose checksum matches, as found at the start of its bytes.
struct RawMessage<'a> {
    kind: u8,
    segment: u64,
    page: u64,
    body: &'a [u8],
    /// Header and body.
    len: usize,
}

/// The message at the start of `bytes`, if one whose checksum matches
/// (and, where known, whose segment is `segment`) starts there.
fn parse_message(bytes: &[u8], segment: Option<u64>) -> Option<RawMessage<'_>> {
    let mut cursor = Cursor(bytes);
    let crc = cursor.u32()?;
    let kind = cursor.u8()?;
    if !(CANCELED..=LAST_KIND).contains(&kind) {
        return None;
    }
    let len = cursor.varint()?;
    let number = cursor.varint()?;
    if segment.is_some_and(|segment| segment != number) || len > MAX_INLINE_BODY {
        return None;
    }
    let page = cursor.varint()?;
    let header = bytes.len() - cursor.0.len();
    let body = cursor.take(len as usize)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(body);
    hasher.update(&bytes[4..header]);
    (hasher.finalize() ^ 0xFFFF_FFFF == crc).then_some(RawMessage {
        kind,
        segment: number,
        page,
        body,
        len: header + body.len(),
    })
}

/// A node's body: a leaf's content, or [`Change::Index`].
fn parse_node(body: &[u8]) -> std::result::Result<Change, Unreadable> {
    let mut cursor = Cursor(body);
    let mut node = || -> Option<Change> {
        let _next = cursor.varint()?;
        let _merging_child = cursor.varint()?;
        let _merging = cursor.u8()?;
        let prefix_len = usize::from(cursor.u8()?);
        let lo = cursor.ivec()?.to_vec();
        let hi = cursor.ivec()?.to_vec();
        let is_index = cursor.u8()?;
        let count = usize::try_from(cursor.varint()?).ok()?;
        if is_index != 0 {
            return Some(Change::Index);
        }
        let mut leaf = Leaf {
            prefix: lo.get(..prefix_len)?.to_vec(),
            lo,
            hi,
            entries: BTreeMap::new(),
        };
        // A count no body could hold is damage, not an allocation.
        let mut keys = Vec::with_capacity(count.min(body.len()));
        for _ in 0..count {
            keys.push(leaf.full_key(cursor.ivec()?));
        }
        for key in keys {
            let value = cursor.ivec()?.to_vec();
            leaf.entries.insert(key, value);
        }
        Some(Change::Node(leaf))
    };
    node().ok_or(Unreadable)
}

/// A link's body: one change to a page.
fn parse_link(body: &[u8]) -> std::result::Result<Change, Unreadable> {
    let mut cursor = Cursor(body);
    let mut link = || -> Option<Change> {
        Some(match cursor.u8()? {
            0 => Change::Set(cursor.ivec()?.to_vec(), cursor.ivec()?.to_vec()),
            1 => Change::Del(cursor.ivec()?.to_vec()),
            2..=4 => Change::Merge,
            _ => return None,
        })
    };
    link().ok_or(Unreadable)
}

/// Reads sled's encodings from the front of a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (taken, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// sled's variable-length integer: one byte up to 240, two up to
    /// 2287, three up to 67823, else a marker and 3 to 8 bytes.
    fn varint(&mut self) -> Option<u64> {
        let first = self.u8()?;
        Some(match first {
            0..=240 => u64::from(first),
            241..=248 => 240 + 256 * (u64::from(first) - 241) + u64::from(self.u8()?),
            249 => {
                let bytes = self.take(2)?;
                2288 + 256 * u64::from(bytes[0]) + u64::from(bytes[1])
            }
            _ => {
                let bytes = self.take(usize::from(first) - 247)?;
                let mut le = [0; 8];
                le[..bytes.len()].copy_from_slice(bytes);
                u64::from_le_bytes(le)
            }
        })
    }

    /// A length-prefixed byte string.
    fn ivec(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        self.take(len)
    }
}

/// The keys the pages of `messages` hold last: each page's latest leaf
/// with its later changes, the newer page winning where two claim a key.
fn rebuild(mut messages: Vec<Message>, damaged: usize) -> LogContents {
    messages.sort_by_key(|message| (message.page, message.lsn));
    let mut pages: Vec<(u64, Leaf)> = Vec::new();
    for history in messages.chunk_by(|a, b| a.page == b.page) {
        let Some(base) = history
            .iter()
            .rposition(|m| matches!(m.change, Change::Node(_) | Change::Index))
        else {
            continue;
        };
        let Change::Node(leaf) = &history[base].change else {
            continue;
        };
        let mut leaf = leaf.clone();
        let mut freed = false;
        for message in &history[base + 1..] {
            match &message.change {
                Change::Set(key, value) => {
                    let key = leaf.full_key(key);
                    if leaf.holds(&key) {
                        leaf.entries.insert(key, value.clone());
                    }
                }
                Change::Del(key) => {
                    leaf.entries.remove(&leaf.full_key(key));
                }
                Change::Free => freed = true,
                Change::Node(_) | Change::Index | Change::Merge => {}
            }
        }
        if !freed {
            pages.push((history[base].lsn, leaf));
        }
    }
    pages.sort_by_key(|(lsn, _)| std::cmp::Reverse(*lsn));
    let mut claimed = Claimed::default();
    let mut records = BTreeMap::new();
    for (_, leaf) in &pages {
        for (key, value) in &leaf.entries {
            if leaf.holds(key) && !claimed.holds(key) {
                records.insert(key.clone(), value.clone());
            }
        }
        claimed.claim(&leaf.lo, &leaf.hi);
    }
    LogContents {
        recovery: LogRecovery {
            pages: pages.len(),
            records: records.len(),
            damaged,
            ..Default::default()
        },
        records,
    }
}

/// Key ranges claimed by newer pages, kept disjoint: start → end (empty:
/// unbounded).
#[derive(Debug, Default)]
struct Claimed(BTreeMap<Vec<u8>, Vec<u8>>);

/// `a` ≥ `b` for range ends, where empty is unbounded.
fn end_at_least(a: &[u8], b: &[u8]) -> bool {
    a.is_empty() || (!b.is_empty() && a >= b)
}

impl Claimed {
    fn holds(&self, key: &[u8]) -> bool {
        self.0
            .range::<[u8], _>((Unbounded, Included(key)))
            .next_back()
            .is_some_and(|(_, hi)| hi.is_empty() || key < hi.as_slice())
    }

    /// Adds `[lo, hi)`, merging it with the ranges it touches.
    fn claim(&mut self, lo: &[u8], hi: &[u8]) {
        let (mut lo, mut hi) = (lo.to_vec(), hi.to_vec());
        if let Some((before_lo, before_hi)) = self
            .0
            .range::<[u8], _>((Unbounded, Included(lo.as_slice())))
            .next_back()
            && end_at_least(before_hi, &lo)
        {
            lo = before_lo.clone();
            if end_at_least(before_hi, &hi) {
                hi = before_hi.clone();
            }
        }
        let touched: Vec<Vec<u8>> = self
            .0
            .range(lo.clone()..)
            .take_while(|(start, _)| end_at_least(&hi, start))
            .map(|(start, _)| start.clone())
            .collect();
        for start in touched {
            let end = self.0.remove(&start).unwrap_or_default();
            if end_at_least(&end, &hi) {
                hi = end;
            }
        }
        self.0.insert(lo, hi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(i: u32) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// A value of `len` bytes for key `i`, version `v`.
    fn value(i: u32, v: u32, len: usize) -> Vec<u8> {
        let mut value = format!("value {i} version {v} ").into_bytes();
        value.resize(len.max(value.len()), b'.');
        value
    }

    /// A sled directory written by sled: 3000 keys (some large enough
    /// for files of their own), every third rewritten, every seventh
    /// removed in one batch that also rewrites others, closed. Returns the directory and what sled reads.
    fn written() -> (tempfile::TempDir, BTreeMap<Vec<u8>, Vec<u8>>) {
        let dir = tempfile::tempdir().unwrap();
        let db = super::super::engine_files::open(dir.path())
            .unwrap()
            .unwrap();
        for i in 0..3000 {
            let len = if i % 97 == 0 {
                200_000
            } else {
                40 + (i as usize % 300)
            };
            db.insert(key(i), value(i, 0, len)).unwrap();
        }
        for i in (0..3000).step_by(3) {
            db.insert(key(i), value(i, 1, 60)).unwrap();
        }
        let mut batch = sled::Batch::default();
        for i in (0..3000).step_by(7) {
            batch.remove(key(i));
            if i % 5 == 0 {
                batch.insert(key(i + 1), value(i + 1, 2, 90));
            }
        }
        db.apply_batch(batch).unwrap();
        db.flush().unwrap();
        let expected = db
            .iter()
            .map(|entry| {
                let (k, v) = entry.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        drop(db);
        (dir, expected)
    }

    #[test]
    fn a_whole_log_reads_as_sled_reads_it() {
        let (dir, expected) = written();
        let contents = read(dir.path()).unwrap().unwrap();
        assert_eq!(contents.recovery.damaged, 0);
        assert_eq!(contents.recovery.records, expected.len());
        assert!(contents.records == expected, "the log reads otherwise");
    }

    #[test]
    fn damage_costs_only_the_pages_it_touches() {
        let (dir, expected) = written();
        let log = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&log).unwrap();
        // The first messages after the first segment's header.
        for byte in &mut bytes[SEGMENT_HEADER..SEGMENT_HEADER + 4096] {
            *byte ^= 0x5a;
        }
        std::fs::write(&log, bytes).unwrap();
        // And one large page's file.
        let blob = std::fs::read_dir(dir.path().join(BLOBS_DIR))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&blob).unwrap();
        bytes[100] ^= 0xff;
        std::fs::write(&blob, bytes).unwrap();
        let contents = read(dir.path()).unwrap().unwrap();
        assert!(contents.recovery.damaged >= 2, "{:?}", contents.recovery);
        // Whatever reads is a value sled held for that key at some time,
        // and most keys read as sled last held them.
        let mut current = 0;
        for (k, v) in &contents.records {
            let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
            assert!(
                v.starts_with(format!("value {i} version ").as_bytes()),
                "key {i}"
            );
            current += usize::from(expected.get(k) == Some(v));
        }
        assert!(
            current * 10 >= expected.len() * 9,
            "{current} of {} read back",
            expected.len()
        );
    }

    #[test]
    fn the_changes_of_a_batch_damaged_anywhere_are_left_out_whole() {
        let leaf = Leaf {
            lo: Vec::new(),
            hi: Vec::new(),
            prefix: Vec::new(),
            entries: BTreeMap::from([(key(1), value(1, 0, 10))]),
        };
        let set = |lsn: u64, i: u32| Message {
            page: 7,
            lsn,
            change: Change::Set(key(i), value(i, 1, 10)),
        };
        let scan = |damage: Vec<u64>, end: u64| Scan {
            messages: vec![
                Message {
                    page: 7,
                    lsn: 100,
                    change: Change::Node(leaf.clone()),
                },
                // A batch from 200 up to 400, and a write after it.
                set(250, 2),
                set(400, 3),
                set(500, 4),
            ],
            damage,
            batches: vec![(200, 400)],
            end,
            ..Scan::default()
        };
        let keys = |scan: Scan| -> Vec<Vec<u8>> {
            rebuild(scan.whole_batches(), 0)
                .records
                .into_keys()
                .collect()
        };
        // Whole, the batch's changes stand.
        assert_eq!(keys(scan(vec![], 600)), [key(1), key(2), key(3), key(4)]);
        // Damage inside it, or a log ending before its end, drops all of
        // them; damage before or after it, none.
        assert_eq!(keys(scan(vec![300], 600)), [key(1), key(4)]);
        assert_eq!(keys(scan(vec![], 380)), [key(1), key(4)]);
        assert_eq!(
            keys(scan(vec![150, 450], 600)),
            [key(1), key(2), key(3), key(4)]
        );
    }

    #[test]
    fn varints_read_as_sled_writes_them() {
        // sled's encoding of each boundary (its `serialization.rs`).
        for (bytes, value) in [
            (&[240][..], 240),
            (&[241, 0], 240),
            (&[248, 255], 2287),
            (&[249, 0, 0], 2288),
            (&[249, 255, 255], 67823),
            (&[250, 0x10, 0x27, 0x01], 0x01_2710),
            (&[255, 1, 2, 3, 4, 5, 6, 7, 8], 0x0807_0605_0403_0201),
        ] {
            assert_eq!(Cursor(bytes).varint(), Some(value), "{bytes:?}");
        }
        assert_eq!(Cursor(&[251, 1]).varint(), None);
    }

    proptest! {
        /// Claimed ranges answer as the plain union of the ranges given.
        #[test]
        fn claimed_ranges_are_their_union(
            ranges in prop::collection::vec((0u8..40, 0u8..40), 0..12),
            probes in prop::collection::vec(0u8..45, 0..30),
        ) {
            let bound = |b: u8| if b >= 38 { Vec::new() } else { vec![b] };
            let mut claimed = Claimed::default();
            // Ranges as pages have them: each starts below its end.
            let ranges: Vec<(u8, u8)> =
                ranges.into_iter().filter(|&(lo, hi)| lo < hi).collect();
            for &(lo, hi) in &ranges {
                claimed.claim(&[lo], &bound(hi));
            }
            for probe in probes {
                let inside = ranges.iter().any(|&(lo, hi)| {
                    probe >= lo && (hi >= 38 || probe < hi)
                });
                prop_assert_eq!(claimed.holds(&[probe]), inside, "{}", probe);
            }
        }
    }
}
