//! Checks of the whole store: every record readable and consistent,
//! nothing orphaned, every session's dialogue agreeing with its turns.

use super::documents::StoredVectors;
use super::handle::{Bytes, Scan, Store};
use super::kept_apart::Kept;
use super::records::{
    COST, MANIFEST, META, PIECE, PIECEABLE, SESSION, decode_cost, decode_dialogue, decode_meta, key,
};
use crate::error::{Error, Result};
use crate::model::dag::Dag;
use crate::model::document::{DocMeta, Document};
use crate::model::rank::Target;

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

impl Store {
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
            let mut scan = self.scan(&[kind])?;
            while let Some((record, _)) = next_or_damage(&mut scan, kind, &mut damaged)? {
                let id = String::from_utf8_lossy(&record[1..]).into_owned();
                if let Some(error) = self.unlisted(&id, || format!("{} record", kind as char))? {
                    damaged.push(Damage { doc: id, error });
                }
            }
        }
        // Build costs: each must decode and belong to a listed document.
        for entry in self.scan(&[COST])? {
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
        for (doc, error) in self.metadata_damage()? {
            damaged.push(Damage { doc, error });
        }
        self.check_pieces(&mut damaged)?;
        let (mut documents, mut metas) = (0, Vec::new());
        let (mut listed, mut absent) = (std::collections::BTreeSet::new(), Vec::new());
        let mut scan = self.scan(&[META])?;
        while let Some((record, value)) = next_or_damage(&mut scan, META, &mut damaged)? {
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
            let checked = (self.value(&record))
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
        let mut scan = self.scan(&[MANIFEST])?;
        while let Some((record, _)) = next_or_damage(&mut scan, MANIFEST, damaged)? {
            let (Some(&kind), Some(id)) = (record.get(1), record.get(2..)) else {
                continue;
            };
            let id = String::from_utf8_lossy(id).into_owned();
            let what = || format!("manifest of a pieced {} record", kind as char);
            if let Some(error) = self.unlisted(&id, what)? {
                found.insert((id, kind), error);
            }
        }
        let mut scan = self.scan(&[PIECE])?;
        while let Some((record, _)) = next_or_damage(&mut scan, PIECE, damaged)? {
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
        match self.holds(&key(META, id)) {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(Error::Invariant {
                doc: id.to_owned(),
                message: format!("orphan {}", what()),
            })),
            // A failure in the file system abandoned the handle: the check
            // cannot go on. Anything else is a page that does not read.
            Err(failure) if self.is_abandoned() => Err(failure),
            Err(damage) => Ok(Some(damage)),
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
    pub(super) fn check_document(&self, meta: &DocMeta) -> Result<()> {
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
        let mut scan = self.scan(&[SESSION])?;
        while let Some((record, value)) = next_or_damage(&mut scan, SESSION, &mut unreadable)? {
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

/// The next entry of a scan over the records of `kind`, or `None` at its
/// end or at a page the engine cannot read: that is recorded as damage and
/// the scan ends. A failure in the file system fails the scan.
fn next_or_damage(
    scan: &mut Scan<'_>,
    kind: u8,
    damaged: &mut Vec<Damage>,
) -> Result<Option<(Bytes, Bytes)>> {
    match scan.next_or_unreadable()? {
        None => Ok(None),
        Some(Ok(entry)) => Ok(Some(entry)),
        Some(Err(why)) => {
            let what = format!("the {} records", kind as char);
            damaged.push(Damage {
                doc: what.clone(),
                error: Error::Corrupt {
                    key: what,
                    message: format!("{why}, and the scan stopped there"),
                },
            });
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::test_support::*;

    #[test]
    fn check_refuses_a_dialogue_without_its_turn_or_a_turn_without_its_dialogue() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let t0 = turn("s", 0);
        let d = dialogue("s", &t0);
        store.put_turns(&[written(&t0)], &d).unwrap();
        // What a torn write would leave: the dialogue without the document…
        for kind in RECORDS {
            store.remove_raw(key(kind, &t0.meta.id)).unwrap();
        }
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "session s" && message.contains("missing"))
        );
        // …or the document without the dialogue.
        store
            .put(&t0, &vectors(&t0), &dag(&t0), &LlmCost::default())
            .unwrap();
        store.check().unwrap();
        store.remove_raw(key(SESSION, "s")).unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == t0.meta.id));
        // A parent that does not precede its child is caught (when the
        // record is read: a corrupt record).
        let mut bad = d.clone();
        bad.turns[0].parent = Some(0);
        store
            .put_raw(key(SESSION, "s"), archive(&bad).unwrap().as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
        // A summary span outside its turn is caught.
        let mut bad = d;
        bad.topics[0].summary[0].edus = crate::model::edu::Span::new(0, 99);
        store
            .put_raw(key(SESSION, "s"), archive(&bad).unwrap().as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
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
            .put_raw(key(TREE, "a"), b"not an archive".as_slice())
            .unwrap();
        store
            .put_raw(key(EDUS, "c"), b"garbage".as_slice())
            .unwrap();
        store
            .put_raw(key(DAG, "ghost"), b"orphan".as_slice())
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
    fn check_finds_orphans_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Some text."));
        store
            .put_raw(key(TEXT, "ghost"), b"orphan".as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == "ghost"));
        store.remove_raw(key(TEXT, "ghost")).unwrap();
        store
            .put_raw(key(TREE, "a"), b"not an archive".as_slice())
            .unwrap();
        assert!(matches!(store.check(), Err(Error::Corrupt { .. })));
        store.remove_raw(key(EDUS, "a")).unwrap();
        assert!(matches!(store.get("a"), Err(Error::Corrupt { .. })));
    }
}
