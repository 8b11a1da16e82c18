//! Sessions: a dialogue record written in the same batch as its turns'
//! documents, and removed with every one of them.

use super::handle::{Batch, Store};
use super::records::{RECORDS, SESSION, archive, decode_dialogue, key};
use crate::error::{Error, Result};
use crate::model::dag::Dag;
use crate::model::dialogue::Dialogue;
use crate::model::document::{Document, PackedVectors};
use crate::model::ids::SESSION_PREFIX;

impl Store {
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
        self.value(&key(SESSION, id))?
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
        self.scan(&[SESSION])?
            .map(|entry| {
                let (key, value) = entry?;
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
        let recorded = self.holds(&key(SESSION, id))?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::test_support::*;

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
            .put_raw(key(SESSION, "s"), b"not an archive".as_slice())
            .unwrap();
        let record = store.value(&key(SESSION, "u")).unwrap().unwrap();
        store.put_raw(key(SESSION, "t"), record).unwrap();
        assert!(store.dialogue("s").is_err() && store.dialogue("t").is_err());

        // A later turn of s that lost its metadata record, past turn 999,999.
        let late = turn_doc_id("s", 1_000_000);
        store.put_raw(key(TEXT, &late), b"text".as_slice()).unwrap();
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
        assert!(!store.holds(&key(SESSION, "s")).unwrap());
        // t's record goes, and nothing of u's with it.
        assert_eq!(store.remove_session("t").unwrap(), Some(Vec::new()));
        assert!(!store.holds(&key(SESSION, "t")).unwrap());
        let u0 = turn_doc_id("u", 0);
        assert_eq!(store.dialogue("u").unwrap().unwrap().turns[0].doc, u0);
        assert!(store.get(&u0).unwrap().is_some());
        // A turn left without its dialogue is removed with the session.
        store.remove_raw(key(SESSION, "u")).unwrap();
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
}
