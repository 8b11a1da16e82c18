//! The [`Db`] methods of agent memory: append a turn, read a session's
//! tree, list sessions, build the next turn's context, remove a session.

use super::placement::{self, Decision};
use super::{
    BranchView, Dialogue, MAX_TURNS, NewTurn, Placement, Role, SessionMeta, SessionView,
    SummaryPick, SummaryText, TopicView, TurnView, check_turn_input, context, mean_unit, span_text,
    summary, turn_doc_id, validate_session_id,
};
use crate::db::{Db, Written};
use crate::error::{Error, Result};
use crate::model::document::Format;

/// What [`Db::append_turn`] did: where the turn went and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TurnReceipt {
    /// The session id.
    pub session: String,
    /// The turn's number.
    pub turn: u32,
    /// Its document id.
    pub doc: String,
    /// Who spoke it.
    pub role: Role,
    /// Its parent turn (`None`: the first turn of a topic).
    pub parent: Option<u32>,
    /// Its topic.
    pub topic: u32,
    /// Its branch.
    pub branch: u32,
    /// Its EDUs.
    pub edus: u32,
    /// Its tokens.
    pub tokens: u64,
    /// Its summary: a closed EDU span of its own text.
    pub summary: [u32; 2],
    /// The placement decision and the similarities behind it.
    pub decision: Decision,
}

impl Db {
    /// Appends a turn spoken by `role` to session `session` (created by its
    /// first turn), placed as `placement` says ([`Placement::Auto`]
    /// decides from similarities; see [`crate::memory::placement`]). The
    /// turn is stored as its own plain-text document
    /// ([`crate::model::ids::turn_doc_id`]) and written with the session's
    /// updated dialogue record in one atomic batch; it becomes the current
    /// turn. What [`crate::memory::check_turn_input`] refuses (a bad
    /// session id, blank, oversized or binary text), text with no words to
    /// index ([`Error::EmptyTurn`]), and an unknown session, topic or turn
    /// for [`Placement::Topic`]/[`Placement::Fork`] are errors that write
    /// nothing.
    pub fn append_turn(
        &self,
        session: &str,
        role: Role,
        text: &str,
        placement: Placement,
    ) -> Result<TurnReceipt> {
        check_turn_input(session, text)?;
        let empty = || Error::EmptyTurn {
            session: session.to_owned(),
        };
        self.write(|| {
            let store = self.store();
            let existing = store.dialogue(session)?;
            let number = existing.as_ref().map_or(0, |d| d.turns.len() as u32);
            if number >= MAX_TURNS {
                return Err(Error::SessionFull {
                    session: session.to_owned(),
                    limit: MAX_TURNS,
                });
            }
            // Unknown targets fail before any analysis.
            let placement = placement::check(session, existing.as_ref(), placement)?;
            let id = turn_doc_id(session, number);
            // Text with no words to index (only punctuation, say) is an
            // empty turn, not an error naming the internal document id.
            let (doc, vectors, dag) = self
                .prepare_text(&id, text.to_owned(), Format::Text)
                .map_err(|e| match e {
                    Error::EmptyDocument { .. } => empty(),
                    e => e,
                })?;
            let (Some(first), Some(last)) = (doc.edus.first(), doc.edus.last()) else {
                return Err(empty());
            };
            let bytes = [first.start, last.end];
            let tokens = crate::model::tokens::count(span_text(&id, &doc.text, bytes)?);
            let dimension = vectors.dimension as usize;
            let vector = mean_unit(
                &vectors.edus,
                dimension,
                first.id as usize,
                last.id as usize,
            );
            let mut turn_vector = |turn: u32| -> Result<Vec<f32>> {
                let (edus, dimension) = self.edu_vectors(&turn_doc_id(session, turn))?;
                let rows = edus.len() / dimension.max(1);
                Ok(mean_unit(&edus, dimension, 0, rows.saturating_sub(1)))
            };
            let resolved =
                placement::resolve(existing.as_ref(), placement, &vector, &mut turn_vector)?;
            let (pick, pick_vector) = summary::turn_summary(number, &doc, &vectors.edus, dimension);
            let mut stored_pick_vector = |p: &SummaryPick| -> Result<Vec<f32>> {
                let (edus, dimension) = self.edu_vectors(&turn_doc_id(session, p.turn))?;
                Ok(mean_unit(
                    &edus,
                    dimension,
                    p.edus.first as usize,
                    p.edus.last as usize,
                ))
            };
            let mut dialogue = existing.unwrap_or_else(|| Dialogue {
                id: session.to_owned(),
                turns: Vec::new(),
                topics: Vec::new(),
                branches: Vec::new(),
                current: 0,
            });
            super::add_turn(
                &mut dialogue,
                &resolved,
                NewTurn {
                    role,
                    doc: id.clone(),
                    summary: pick,
                    edus: doc.meta.edus,
                    bytes,
                    tokens: u64::from(tokens),
                    vector,
                    summary_vector: pick_vector,
                },
                &mut stored_pick_vector,
            )?;
            dialogue.check_tree().map_err(|message| Error::Invariant {
                doc: id.clone(),
                message,
            })?;
            store.put_turn(&doc, &vectors, &dag, &dialogue)?;
            let turn = dialogue.current_turn();
            let receipt = TurnReceipt {
                session: session.to_owned(),
                turn: number,
                doc: id,
                role,
                parent: turn.parent,
                topic: turn.topic,
                branch: turn.branch,
                edus: turn.edus,
                tokens: turn.tokens,
                summary: [pick.edus.first, pick.edus.last],
                decision: resolved.decision,
            };
            Ok((
                receipt,
                Written {
                    put: vec![doc],
                    removed: Vec::new(),
                },
            ))
        })
    }

    /// Session `id`'s stored dialogue record, or [`Error::NoSuchSession`].
    pub fn dialogue(&self, id: &str) -> Result<Dialogue> {
        validate_session_id(id)?;
        self.store()
            .dialogue(id)?
            .ok_or_else(|| Error::NoSuchSession(id.to_owned()))
    }

    /// Session `id`'s dialogue tree with the text of every summary:
    /// topics, their branches, their turns; the current turn marked.
    pub fn session(&self, id: &str) -> Result<SessionView> {
        let dialogue = self.dialogue(id)?;
        let mut texts = TurnTexts::new(self, &dialogue);
        let current = dialogue.current_turn();
        let mut topics = Vec::with_capacity(dialogue.topics.len());
        for topic in &dialogue.topics {
            let mut branches = Vec::with_capacity(topic.branches.len());
            for &branch in &topic.branches {
                let b = &dialogue.branches[branch as usize];
                let mut turns = Vec::with_capacity(b.turns.len());
                for &number in &b.turns {
                    let turn = &dialogue.turns[number as usize];
                    turns.push(TurnView {
                        number,
                        role: turn.role,
                        doc: turn.doc.clone(),
                        parent: turn.parent,
                        tokens: turn.tokens,
                        current: number == dialogue.current,
                        summary: texts.pick(&turn.summary)?,
                    });
                }
                branches.push(BranchView {
                    id: branch,
                    fork: b.fork,
                    active: branch == current.branch,
                    summary: texts.picks(&b.summary)?,
                    turns,
                });
            }
            topics.push(TopicView {
                id: topic.id,
                active: topic.id == current.topic,
                summary: texts.picks(&topic.summary)?,
                branches,
            });
        }
        Ok(SessionView {
            id: dialogue.id.clone(),
            current: dialogue.current,
            turns: dialogue.turns.len() as u32,
            tokens: dialogue.tokens(),
            topics,
        })
    }

    /// Every session, in id order.
    pub fn sessions(&self) -> Result<Vec<SessionMeta>> {
        Ok(self
            .store()
            .dialogues()?
            .iter()
            .map(Dialogue::meta)
            .collect())
    }

    /// The context for session `id`'s next turn within `budget` tokens:
    /// the active path in full, then the stored summaries of the active
    /// topic's other branches and of the other topics (see
    /// [`crate::memory::context`]). Never over the budget.
    pub fn session_context(&self, id: &str, budget: u64) -> Result<context::SessionContext> {
        let dialogue = self.dialogue(id)?;
        let mut texts = TurnTexts::new(self, &dialogue);
        context::build(&dialogue, budget, &mut |turn, bytes| {
            texts.span(turn, bytes)
        })
    }

    /// Removes session `id`: all its turn documents (records and index
    /// entries) and its dialogue record, in one atomic batch.
    pub fn remove_session(&self, id: &str) -> Result<()> {
        validate_session_id(id)?;
        self.write(|| {
            let docs = self
                .store()
                .remove_session(id)?
                .ok_or_else(|| Error::NoSuchSession(id.to_owned()))?;
            Ok((
                (),
                Written {
                    put: Vec::new(),
                    removed: docs,
                },
            ))
        })
    }

    /// Checks every session's turns against their stored documents
    /// ([`crate::memory::Turn::check_document`]: EDUs, byte ranges and
    /// token counts of turns and their summaries); the rest of a
    /// dialogue's invariants are checked when it is read.
    pub(crate) fn check_session_documents(&self) -> Result<()> {
        for dialogue in self.store().dialogues()? {
            for turn in &dialogue.turns {
                let doc = self.document(&turn.doc)?.to_document()?;
                turn.check_document(&doc)
                    .map_err(|message| Error::Invariant {
                        doc: format!("session {}", dialogue.id),
                        message,
                    })?;
            }
        }
        Ok(())
    }

    /// The turn document ids of session `id` in turn order, or `None` when
    /// it does not exist (for the `session('id')` query scope).
    pub(crate) fn session_turn_ids(&self, id: &str) -> Result<Option<Vec<String>>> {
        Ok(self
            .store()
            .dialogue(id)?
            .map(|d| d.turns.into_iter().map(|t| t.doc).collect()))
    }
}

/// Reads turn texts for summary picks, each document once.
struct TurnTexts<'a> {
    db: &'a Db,
    dialogue: &'a Dialogue,
    texts: std::collections::HashMap<u32, String>,
}

impl<'a> TurnTexts<'a> {
    fn new(db: &'a Db, dialogue: &'a Dialogue) -> TurnTexts<'a> {
        TurnTexts {
            db,
            dialogue,
            texts: std::collections::HashMap::new(),
        }
    }

    /// Exactly `text[bytes]` of turn `turn`'s stored text
    /// ([`Error::Invariant`] when the record does not match its document).
    fn span(&mut self, turn: u32, bytes: [u32; 2]) -> Result<String> {
        let doc = &self.dialogue.turns[turn as usize].doc;
        let text = match self.texts.entry(turn) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(self.db.document(doc)?.text()?.to_owned())
            }
        };
        Ok(span_text(doc, text, bytes)?.to_owned())
    }

    fn pick(&mut self, pick: &SummaryPick) -> Result<SummaryText> {
        Ok(SummaryText {
            turn: pick.turn,
            doc: self.dialogue.turns[pick.turn as usize].doc.clone(),
            edus: [pick.edus.first, pick.edus.last],
            bytes: pick.bytes,
            tokens: pick.tokens,
            text: self.span(pick.turn, pick.bytes)?,
        })
    }

    fn picks(&mut self, picks: &[SummaryPick]) -> Result<Vec<SummaryText>> {
        picks.iter().map(|p| self.pick(p)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store with session "s" of two turns, and what re-writing its last
    /// turn with the dialogue `corrupt` makes of it needs.
    fn rewrite(corrupt: impl FnOnce(&mut Dialogue)) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::create(dir.path().join("db")).unwrap();
        let text = "- apples\n- pears\n- plums, and a long list item";
        db.append_turn("s", Role::User, "Which fruit?", Placement::Auto)
            .unwrap();
        db.append_turn("s", Role::User, text, Placement::Continue)
            .unwrap();
        db.check().unwrap();
        let mut dialogue = db.dialogue("s").unwrap();
        corrupt(&mut dialogue);
        let id = turn_doc_id("s", 1);
        let (doc, vectors, dag) = db.prepare_text(&id, text.into(), Format::Text).unwrap();
        db.store()
            .put_turn(&doc, &vectors, &dag, &dialogue)
            .unwrap();
        (dir, db)
    }

    #[test]
    fn check_compares_turns_with_their_documents() {
        let corruptions: [fn(&mut Dialogue); 3] = [
            |d| d.turns[1].tokens -= 1,
            |d| d.turns[1].bytes[1] -= 1,
            |d| d.turns[1].summary.tokens += 1,
        ];
        for corrupt in corruptions {
            let (_dir, db) = rewrite(|d| {
                corrupt(d);
                // Keep the branch and topic copies of the pick in step.
                let pick = d.turns[1].summary;
                for picks in [&mut d.branches[0].summary, &mut d.topics[0].summary] {
                    picks
                        .iter_mut()
                        .filter(|p| p.turn == 1)
                        .for_each(|p| *p = pick);
                }
            });
            let err = db.check().unwrap_err();
            assert!(
                matches!(&err, Error::Invariant { doc, .. } if doc == "session s"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_damaged_dialogue_is_a_corrupt_record_not_a_panic() {
        let (_dir, db) = rewrite(|d| d.current = 0);
        let corrupt = |r: Result<()>| {
            let err = r.unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { key, .. } if key == "session s"),
                "{err}"
            );
        };
        corrupt(db.dialogue("s").map(drop));
        corrupt(db.session("s").map(drop));
        corrupt(db.session_context("s", 100).map(drop));
        corrupt(db.sessions().map(drop));
        corrupt(db.check().map(drop));
        corrupt(
            db.append_turn("s", Role::User, "More fruit.", Placement::Auto)
                .map(drop),
        );
    }
}
