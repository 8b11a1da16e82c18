//! Documents' metadata and its index: a `U<doc>` record (JSON) per
//! document that has metadata, written in the document's batch, and one
//! index entry per value (per element of a list) whose key sorts by the
//! value, so a filter is a few range scans however many documents the
//! store holds.
//!
//! An index entry's key is `u`, the metadata key, a 0 byte, a type tag and
//! the value in an order-keeping encoding, then the document id:
//! texts `s` (a list's elements `l`) as their bytes and a 0 byte (texts
//! hold no NUL), numbers `n` and dates `d` as 8 bytes, booleans `b` as one;
//! a list also has an entry `L` with no value, so an empty list exists too.
//! Its value is empty.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::handle::{Batch, Store};
use super::records::{HAS_METADATA_KEY, META, METADATA, METADATA_INDEX, key};
use crate::error::{Error, Result};
use crate::model::metadata::{MetaTest, MetaValue, Metadata};

/// The index entries' key prefix of metadata key `name`.
fn name_prefix(name: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(name.len() + 2);
    prefix.push(METADATA_INDEX);
    prefix.extend_from_slice(name.as_bytes());
    prefix.push(0);
    prefix
}

/// A value's type tag and order-keeping bytes (a list has one entry per
/// element: see [`entries`]).
fn encoded(value: &MetaValue) -> (u8, Vec<u8>) {
    match value {
        MetaValue::Text(text) => (b's', terminated(text)),
        MetaValue::Number(number) => {
            // Order-keeping: negatives flipped whole, positives' sign set;
            // -0 and 0 are one number.
            let bits = (number + 0.0).to_bits();
            let ordered = if bits >> 63 == 1 {
                !bits
            } else {
                bits | 1 << 63
            };
            (b'n', ordered.to_be_bytes().to_vec())
        }
        MetaValue::Date { at, .. } => (b'd', ((*at as u64) ^ 1 << 63).to_be_bytes().to_vec()),
        MetaValue::Bool(b) => (b'b', vec![u8::from(*b)]),
        MetaValue::List(_) => (b'L', Vec::new()),
    }
}

fn terminated(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(0);
    bytes
}

/// The index keys of document `id`'s metadata.
fn entries(id: &str, metadata: &Metadata) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for (name, value) in metadata.iter() {
        // A list's own entry (`L`), then one per element.
        let items = match value {
            MetaValue::List(items) => items.as_slice(),
            _ => &[],
        };
        let values = std::iter::once(encoded(value))
            .chain(items.iter().map(|item| (b'l', terminated(item))));
        for (tag, bytes) in values {
            let mut key = name_prefix(name);
            key.push(tag);
            key.extend_from_slice(&bytes);
            key.extend_from_slice(id.as_bytes());
            keys.push(key);
        }
    }
    keys
}

/// The value and document id of an index entry's key (after its name
/// prefix); `None` for a key that is no entry.
fn decoded(entry: &[u8]) -> Option<(MetaValue, String)> {
    let (&tag, rest) = entry.split_first()?;
    let (value, id) = match tag {
        b's' | b'l' => {
            let end = rest.iter().position(|&b| b == 0)?;
            let text = String::from_utf8(rest[..end].to_vec()).ok()?;
            // A text in date form is indexed as a date, never as `s`.
            let value = if tag == b's' {
                MetaValue::Text(text)
            } else {
                MetaValue::List(vec![text])
            };
            (value, &rest[end + 1..])
        }
        b'n' | b'd' => {
            let ordered = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
            let value = if tag == b'n' {
                let bits = if ordered >> 63 == 1 {
                    ordered & !(1 << 63)
                } else {
                    !ordered
                };
                MetaValue::Number(f64::from_bits(bits))
            } else {
                let at = (ordered ^ 1 << 63) as i64;
                MetaValue::Date {
                    at,
                    text: String::new(),
                }
            };
            (value, &rest[8..])
        }
        b'b' => (MetaValue::Bool(*rest.first()? == 1), &rest[1..]),
        b'L' => (MetaValue::List(Vec::new()), rest),
        _ => return None,
    };
    Some((value, String::from_utf8(id.to_vec()).ok()?))
}

impl Store {
    /// The metadata of document `id` (empty when it was given none);
    /// `None` when no such document is listed. A record that does not
    /// decode is damage.
    pub fn metadata(&self, id: &str) -> Result<Option<Metadata>> {
        if !self.holds(&key(META, id))? {
            return Ok(None);
        }
        self.stored_metadata(id)
            .map(|m| Some(m.unwrap_or_default()))
    }

    /// The metadata record of document `id`, if it has one.
    pub(super) fn stored_metadata(&self, id: &str) -> Result<Option<Metadata>> {
        let Some(bytes) = self.metadata_record(id)? else {
            return Ok(None);
        };
        Metadata::decode(&bytes)
            .map(Some)
            .ok_or_else(|| damaged(id))
    }

    /// The bytes of document `id`'s metadata record, looked up only in a
    /// store where some document was given metadata.
    pub(super) fn metadata_record(&self, id: &str) -> Result<Option<super::handle::Bytes>> {
        if !self.has_metadata.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        self.value(&key(METADATA, id))
    }

    /// Every document that has metadata, with it, in id order; a record
    /// that does not decode is returned as its damage.
    pub fn all_metadata(&self) -> Result<Vec<(String, Result<Metadata>)>> {
        let mut all = Vec::new();
        if !self.has_metadata.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(all);
        }
        for entry in self.scan(&[METADATA])? {
            let (record, bytes) = entry?;
            let id = String::from_utf8_lossy(&record[1..]).into_owned();
            let metadata = Metadata::decode(&bytes).ok_or_else(|| damaged(&id));
            all.push((id, metadata));
        }
        Ok(all)
    }

    /// Replaces document `id`'s metadata and its index entries in one
    /// atomic batch; false when no such document is listed.
    pub fn set_metadata(&self, id: &str, metadata: &Metadata) -> Result<bool> {
        if !self.holds(&key(META, id))? {
            return Ok(false);
        }
        let mut batch = Batch::default();
        self.insert_metadata(&mut batch, id, metadata)?;
        self.apply(batch)?;
        self.flush()?;
        Ok(true)
    }

    /// Adds `metadata` as document `id`'s, with its index entries, to
    /// `batch`, replacing what it had.
    pub(super) fn insert_metadata(
        &self,
        batch: &mut Batch<'_>,
        id: &str,
        metadata: &Metadata,
    ) -> Result<()> {
        self.remove_metadata(batch, id)?;
        if !metadata.is_empty() {
            batch.insert(HAS_METADATA_KEY, b"1");
            (self.has_metadata).store(true, std::sync::atomic::Ordering::Relaxed);
            batch.insert(&key(METADATA, id), &metadata.encode());
            for entry in entries(id, metadata) {
                batch.insert(&entry, &[]);
            }
        }
        Ok(())
    }

    /// Adds the removal of document `id`'s metadata and its index entries
    /// to `batch`. A record that does not decode does not stop it: its
    /// entries are found by scanning the index.
    pub(super) fn remove_metadata(&self, batch: &mut Batch<'_>, id: &str) -> Result<()> {
        let record = key(METADATA, id);
        match self.metadata_record(id)? {
            None => return Ok(()),
            Some(bytes) => match Metadata::decode(&bytes) {
                Some(old) => {
                    for entry in entries(id, &old) {
                        batch.remove(&entry);
                    }
                }
                None => {
                    for entry in self.scan(&[METADATA_INDEX])? {
                        let (entry, _) = entry?;
                        if Self::entry_document(&entry).is_some_and(|doc| doc == id) {
                            batch.remove(&entry);
                        }
                    }
                }
            },
        }
        batch.remove(&record);
        Ok(())
    }

    /// The metadata records and index entries that disagree, each with
    /// its document: a record of no listed document, an entry its
    /// document's metadata does not hold, a value without its entry. A
    /// record that does not decode is named by the document's own check.
    pub(super) fn metadata_damage(&self) -> Result<Vec<(String, Error)>> {
        let mut damage = Vec::new();
        if !self.has_metadata.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(damage);
        }
        let mut name = |id: String, message: String| {
            let error = Error::Invariant {
                doc: id.clone(),
                message,
            };
            damage.push((id, error));
        };
        let (mut expected, mut undecodable) = (BTreeSet::new(), BTreeSet::new());
        for (id, metadata) in self.all_metadata()? {
            if !self.holds(&key(META, &id))? {
                name(id, "orphan metadata record".to_owned());
            } else if let Ok(metadata) = metadata {
                expected.extend(entries(&id, &metadata));
            } else {
                undecodable.insert(id);
            }
        }
        let mut found = BTreeSet::new();
        for entry in self.scan(&[METADATA_INDEX])? {
            let entry = entry?.0.to_vec();
            let document = Self::entry_document(&entry).unwrap_or_default();
            // A record that does not decode is named by its document's check.
            if !expected.contains(&entry) && !undecodable.contains(&document) {
                let message = format!(
                    "metadata index entry {:?} names a value its document's metadata lacks",
                    String::from_utf8_lossy(&entry)
                );
                name(document, message);
            }
            found.insert(entry);
        }
        for entry in expected.difference(&found) {
            let message = format!(
                "the metadata index lacks the entry {:?}",
                String::from_utf8_lossy(entry)
            );
            name(Self::entry_document(entry).unwrap_or_default(), message);
        }
        Ok(damage)
    }

    /// The document an index entry's key names.
    fn entry_document(entry: &[u8]) -> Option<String> {
        let name_end = entry.iter().position(|&b| b == 0)?;
        decoded(&entry[name_end + 1..]).map(|(_, id)| id)
    }

    /// The documents whose metadata key `name` passes `test`, found in the
    /// index (a range scan per test), or kept from the same lookup when no
    /// batch was applied since (a served store's filter, asked again and
    /// again, costs a copy of its set rather than a scan).
    pub fn documents_matching(&self, name: &str, test: &MetaTest) -> Result<BTreeSet<String>> {
        // Read before the scan: a batch applied during it makes the lookup
        // stale, however much of the batch the scan saw.
        let batches = self.batches.load(Ordering::SeqCst);
        if let Some(found) = self.lookups.find(batches, name, test) {
            return Ok(found);
        }
        let found = self.scan_matching(name, test)?;
        self.lookups.keep(batches, name, test, &found);
        Ok(found)
    }

    /// [`Store::documents_matching`]'s scan of the index.
    fn scan_matching(&self, name: &str, test: &MetaTest) -> Result<BTreeSet<String>> {
        let prefix = name_prefix(name);
        let mut found = BTreeSet::new();
        let (from, typed) = match test {
            MetaTest::Exists => (prefix.clone(), prefix.clone()),
            MetaTest::Contains(item) => {
                let mut from = prefix.clone();
                from.push(b'l');
                from.extend_from_slice(&terminated(item));
                (from.clone(), from)
            }
            MetaTest::Range(low, high) => {
                let Some(kind) = [low, high].into_iter().find_map(|bound| match bound {
                    Bound::Included(value) | Bound::Excluded(value) => Some(value),
                    Bound::Unbounded => None,
                }) else {
                    return Ok(found);
                };
                let (tag, _) = encoded(kind);
                let mut typed = prefix.clone();
                typed.push(tag);
                let from = match low {
                    Bound::Included(value) | Bound::Excluded(value) => {
                        let mut from = typed.clone();
                        from.extend_from_slice(&encoded(value).1);
                        from
                    }
                    Bound::Unbounded => typed.clone(),
                };
                (from, typed)
            }
        };
        let mut last = typed.clone();
        last.push(0xff);
        for entry in self.scan_between(&from, &last)? {
            let (entry, _) = entry?;
            if !entry.starts_with(&typed) {
                break;
            }
            let Some((value, id)) = decoded(&entry[prefix.len()..]) else {
                return Err(Error::Corrupt {
                    key: format!("metadata index entry {}", String::from_utf8_lossy(&entry)),
                    message: "it does not decode".into(),
                });
            };
            // Entries come in value order: past the upper bound, none passes.
            if test.is_past(&value) {
                break;
            }
            if test.passes(&value) {
                found.insert(id);
            }
        }
        Ok(found)
    }
}

fn damaged(id: &str) -> Error {
    Error::Corrupt {
        key: format!("{}{id}", METADATA as char),
        message: "the document's metadata record does not decode".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::test_support::*;

    fn with(json: serde_json::Value) -> Metadata {
        Metadata::from_json(&json).unwrap()
    }

    fn ids(found: BTreeSet<String>) -> Vec<String> {
        found.into_iter().collect()
    }

    #[test]
    fn a_lookup_is_kept_until_a_batch_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let boeing = MetaTest::equal(MetaValue::text("Boeing".into()));
        let mut a = doc("a", "One sentence here.");
        a.metadata = with(serde_json::json!({"company": "Boeing"}));
        put(&store, &a);
        let find = || ids(store.documents_matching("company", &boeing).unwrap());
        assert_eq!(find(), ["a"]);
        // Kept: the same lookup again is answered without a scan.
        let batches = store.batches.load(Ordering::SeqCst);
        assert_eq!(
            store.lookups.find(batches, "company", &boeing).map(ids),
            Some(vec!["a".to_owned()])
        );
        assert_eq!(
            store.lookups.find(batches, "company", &MetaTest::Exists),
            None
        );
        assert_eq!(find(), ["a"]);
        // Each kind of batch makes it stale: a document put, metadata set
        // in place, a document removed.
        let mut b = doc("b", "Another one there.");
        b.metadata = with(serde_json::json!({"company": "Boeing"}));
        put(&store, &b);
        assert_eq!(find(), ["a", "b"]);
        store
            .set_metadata("a", &with(serde_json::json!({"company": "Airbus"})))
            .unwrap();
        assert_eq!(find(), ["b"]);
        store.remove("b").unwrap();
        assert_eq!(find(), Vec::<String>::new());
    }

    #[test]
    fn metadata_is_written_with_its_document_and_found_by_range_scans() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rows = [
            (
                "a",
                serde_json::json!({"company": "Boeing", "year": 2019, "filed": "2019-02-01", "tags": ["risk"]}),
            ),
            (
                "b",
                serde_json::json!({"company": "Boeing", "year": 2021, "filed": "2021-02-01T10:00:00+02:00", "audited": true}),
            ),
            (
                "c",
                serde_json::json!({"company": "Apple", "year": -3.5, "tags": ["risk", "cash"]}),
            ),
            ("d", serde_json::json!({})),
        ];
        for (id, json) in &rows {
            let mut doc = doc(id, "One sentence here. Another one there.");
            doc.metadata = with(json.clone());
            put(&store, &doc);
        }
        let find = |name, test| ids(store.documents_matching(name, &test).unwrap());
        let text = |t: &str| MetaValue::text(t.to_owned());
        assert_eq!(find("company", MetaTest::equal(text("Boeing"))), ["a", "b"]);
        assert_eq!(
            find("company", MetaTest::equal(text("Boe"))),
            Vec::<String>::new()
        );
        let year = |y| MetaValue::Number(y);
        let at_least = |v| MetaTest::Range(Bound::Included(v), Bound::Unbounded);
        assert_eq!(find("year", at_least(year(2020.0))), ["b"]);
        assert_eq!(find("year", at_least(year(-4.0))), ["a", "b", "c"]);
        let below = MetaTest::Range(Bound::Unbounded, Bound::Excluded(year(2019.0)));
        assert_eq!(find("year", below), ["c"]);
        let between = MetaTest::Range(Bound::Excluded(year(-3.5)), Bound::Included(year(2021.0)));
        assert_eq!(find("year", between), ["a", "b"]);
        // Dates by their instant, however they were written.
        assert_eq!(find("filed", at_least(text("2020-01-01"))), ["b"]);
        assert_eq!(find("filed", at_least(text("2021-02-01T08:00:00Z"))), ["b"]);
        assert_eq!(
            find("filed", at_least(text("2021-02-01T08:00:01Z"))),
            Vec::<String>::new()
        );
        // A number never matches a text, nor a text a list.
        assert_eq!(find("company", at_least(year(0.0))), Vec::<String>::new());
        assert_eq!(
            find("tags", MetaTest::equal(text("risk"))),
            Vec::<String>::new()
        );
        assert_eq!(find("tags", MetaTest::Contains("risk".into())), ["a", "c"]);
        assert_eq!(
            find("audited", MetaTest::equal(MetaValue::Bool(true))),
            ["b"]
        );
        assert_eq!(find("tags", MetaTest::Exists), ["a", "c"]);
        assert_eq!(store.metadata("d").unwrap(), Some(Metadata::default()));
        assert_eq!(store.metadata("zz").unwrap(), None);
        assert_eq!(store.metadata("a").unwrap(), Some(with(rows[0].1.clone())));
        assert_eq!(
            store
                .get("a")
                .unwrap()
                .unwrap()
                .to_document()
                .unwrap()
                .metadata,
            with(rows[0].1.clone())
        );

        // Replaced, changed and removed: no entry stays behind.
        assert!(
            store
                .set_metadata("a", &with(serde_json::json!({"company": "Airbus"})))
                .unwrap()
        );
        assert!(!store.set_metadata("zz", &Metadata::default()).unwrap());
        assert_eq!(find("company", MetaTest::equal(text("Boeing"))), ["b"]);
        assert_eq!(find("tags", MetaTest::Exists), ["c"]);
        store.remove("b").unwrap();
        store.remove("c").unwrap();
        let left: Vec<Vec<u8>> = (store.scan(&[METADATA_INDEX]).unwrap())
            .map(|entry| entry.unwrap().0.to_vec())
            .collect();
        assert_eq!(left, entries("a", &store.metadata("a").unwrap().unwrap()));
        store.check().unwrap();
    }

    #[test]
    fn a_damaged_metadata_record_is_named_and_removed_with_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut a = doc("a", "One sentence here. Another one there.");
        a.metadata = with(serde_json::json!({"company": "Boeing", "n": 1}));
        put(&store, &a);
        store
            .put_raw(key(METADATA, "a"), &b"{not json"[..])
            .unwrap();
        assert!(matches!(store.metadata("a"), Err(Error::Corrupt { .. })));
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
        store.remove("a").unwrap();
        assert_eq!(store.scan(&[METADATA_INDEX]).unwrap().count(), 0);
        assert_eq!(store.scan(&[METADATA]).unwrap().count(), 0);
    }

    #[test]
    fn check_names_an_index_entry_missing_or_astray() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut a = doc("a", "One sentence here. Another one there.");
        a.metadata = with(serde_json::json!({"company": "Boeing"}));
        put(&store, &a);
        store.check().unwrap();
        let entry = entries("a", &a.metadata).remove(0);
        store.remove_raw(entry.clone()).unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "a" && message.contains("lacks the entry"))
        );
        store.put_raw(entry, &[][..]).unwrap();
        store.check().unwrap();
        let stray = entries("a", &with(serde_json::json!({"company": "Airbus"}))).remove(0);
        store.put_raw(stray, &[][..]).unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "a" && message.contains("lacks"))
        );
    }

    #[test]
    fn numbers_and_dates_keep_their_order_in_the_index() {
        let numbers = [-1e300, -2.5, -1.0, -0.0, 0.0, 1e-9, 1.0, 2020.0, 1e300];
        for pair in numbers.windows(2) {
            let (a, b) = (
                encoded(&MetaValue::Number(pair[0])).1,
                encoded(&MetaValue::Number(pair[1])).1,
            );
            assert!(a <= b, "{pair:?}");
            let back = decoded(&[&[b'n'][..], &a, b"x"].concat()).unwrap();
            assert_eq!(back, (MetaValue::Number(pair[0] + 0.0), "x".to_owned()));
        }
        for pair in [[-5_000_000_000i64, -1], [-1, 0], [0, 1], [1, i64::MAX]] {
            let date = |at| MetaValue::Date {
                at,
                text: String::new(),
            };
            assert!(
                encoded(&date(pair[0])).1 < encoded(&date(pair[1])).1,
                "{pair:?}"
            );
        }
    }
}
