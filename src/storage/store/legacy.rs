//! Older layouts and their upgrade at open: which versions are read, and
//! the dialogue and DAG records rewritten from them.

use rkyv::rancor::BoxedError;

use super::handle::{Batch, Store};
use super::records::{DAG, FORMAT_VERSION, SESSION, VERSION_KEY, archive};
use crate::error::{Error, Result};
use crate::model::dag::Dag;
use crate::model::dialogue::Dialogue;

/// Older layouts this one upgrades at open, in one batch with the new
/// [`FORMAT_VERSION`](super::FORMAT_VERSION) record: version 3 had no large records apart, and its
/// whole records are read as before (a later write of a document stores it
/// pieced); versions 3 and 4 stored turns without a time, and versions 3
/// to 7 kept a vector sum in every branch of a dialogue, so every
/// dialogue record is rewritten ([`crate::model::legacy::dialogue_v4`],
/// [`crate::model::legacy::dialogue_v7`]);
/// versions 3 to 5 stored information points without written text, so
/// their DAG records are rewritten ([`crate::model::legacy::dag_v5`]); versions 3
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
/// [`crate::model::legacy::dialogue_v4`] (the later ones: of
/// [`crate::model::legacy::dialogue_v7`]).
const TIMELESS_TURN_VERSIONS: [u32; 2] = [3, 4];

impl Store {
    /// Checks the store's format record, and upgrades an older layout's
    /// records in one batch with the new record: none for a current store;
    /// for an older one the record and its rewritten dialogues and DAGs,
    /// held to the small reserve. Dialogues hold no text (though one of a
    /// thousand turns in the layout of versions 5 to 7 is about 0.7 MB);
    /// DAGs are about a tenth of their documents' text, so an old store of
    /// version 5 or older on a disk without room for them fails to open
    /// with `DiskFull` until some space is freed, and is then upgraded
    /// whole. A new (empty) store gets the record; anything else is refused.
    pub(super) fn settle_format(&self) -> Result<()> {
        let version = |v: u32| v.to_string().into_bytes();
        let found = self.value(VERSION_KEY)?;
        let upgradable = (found.as_ref())
            .and_then(|found| UPGRADABLE_VERSIONS.iter().find(|&&v| found == &version(v)));
        let record = match found {
            Some(found) if found.as_ref() == version(FORMAT_VERSION) => None,
            Some(_) if upgradable.is_some() => Some((Batch::reclaiming(), upgradable.copied())),
            Some(found) => {
                return Err(Error::FormatVersion {
                    path: self.dir.clone(),
                    found: String::from_utf8_lossy(&found).into_owned(),
                    expected: FORMAT_VERSION,
                });
            }
            None if self.is_empty()? => Some((Batch::default(), None)),
            None => return Err(Error::NotAStore(self.dir.clone())),
        };
        if let Some((mut batch, old)) = record {
            if let Some(old) = old.filter(|old| OLD_DIALOGUE_VERSIONS.contains(old)) {
                self.upgrade_dialogues(&mut batch, TIMELESS_TURN_VERSIONS.contains(&old))?;
                if TEXTLESS_POINT_VERSIONS.contains(&old) {
                    self.upgrade_dags(&mut batch)?;
                }
            }
            batch.insert(VERSION_KEY, &version(FORMAT_VERSION));
            self.apply(batch)?;
            self.flush()?;
        }
        Ok(())
    }

    /// Adds to `batch` every dialogue record rewritten to this layout from
    /// that of versions 3 and 4 ([`crate::model::legacy::dialogue_v4`], when
    /// `timeless`) or of versions 5 to 7 ([`crate::model::legacy::dialogue_v7`]).
    fn upgrade_dialogues(&self, batch: &mut Batch<'_>, timeless: bool) -> Result<()> {
        use crate::model::legacy::{dialogue_v4 as v4, dialogue_v7 as v7};
        // A record that does not decode in the old layout is left as it is:
        // read in the new one it is damage, which `check` names. A page
        // sled cannot read fails the open instead: recording the new
        // version past it would leave the dialogues behind it unreadable.
        for entry in self.scan(&[SESSION])? {
            let (key, value) = entry?;
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
    /// versions 3 to 5 ([`crate::model::legacy::dag_v5`]) to this one, whole or
    /// pieced as its size asks. A record that does not decode in the old
    /// layout (or whose pieces do not make it) is left as it is, for
    /// `check` to name. A page sled cannot read fails the open instead:
    /// recording the new version past it would leave that DAG unreadable.
    fn upgrade_dags<'a>(&'a self, batch: &mut Batch<'a>) -> Result<()> {
        use crate::model::legacy::dag_v5 as v5;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::kept_apart::{Kept, PIECE_BYTES};
    use crate::storage::store::test_support::*;

    #[test]
    fn older_stores_are_read_and_upgraded_with_their_dialogues_and_dags() {
        use crate::model::legacy::dag_v5 as v5;
        use crate::model::legacy::{dialogue_v4 as v4, dialogue_v7 as v7};
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
                    store.put_raw(key(SESSION, "s"), old.as_slice()).unwrap();
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
                    .put_raw(key(SESSION, "bad"), b"not an archive".as_slice())
                    .unwrap();
                store
                    .put_raw(VERSION_KEY, old_version.to_string().as_bytes())
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
                store.value(VERSION_KEY).unwrap().unwrap().as_ref(),
                FORMAT_VERSION.to_string().as_bytes()
            );
            assert_eq!(
                store.value(&key(SESSION, "s")).unwrap().unwrap().as_ref(),
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
                store.value(&key(SESSION, "bad")).unwrap().unwrap().as_ref(),
                b"not an archive"
            );
            assert!(matches!(store.dialogue("bad"), Err(Error::Corrupt { .. })));
            store.remove_raw(key(SESSION, "bad")).unwrap();
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
                    store.store_pieced(VECTORS, id, &old);
                } else {
                    store.put_raw(key(VECTORS, id), old.as_slice()).unwrap();
                }
            }
            assert!(matches!(
                store.manifest(VECTORS, "big").unwrap(),
                Some(Kept::Pieces(_))
            ));
            store.put_raw(VERSION_KEY, b"6".as_slice()).unwrap();
            store.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.value(VERSION_KEY).unwrap().unwrap().as_ref(),
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
        assert!(!store.holds(&key(VECTORS, "a")).unwrap());
        assert_eq!(stored.to_packed().unwrap(), pack(&old_a));
        assert_eq!(store.check().unwrap(), 2);
        // Removal takes the old layout's pieces too.
        remove_whole(&store, "big");
    }
}
