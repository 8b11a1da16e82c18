//! Reading sessions: a session's tree, the list of sessions, the context
//! for the next turn, and the check of sessions against their turn
//! documents. A read that meets a turn forgotten meanwhile reads again.

use crate::engine::Engine;
use crate::engine::reads::Damaged;
use crate::error::{Error, Result};
use crate::memory::context::{self, Excerpt};
use crate::model::dialogue::{
    BranchView, Dialogue, SessionMeta, SessionView, SummaryPick, SummaryText, TimedTurns,
    TopicView, TurnView, span_text,
};
use crate::model::ids::{turn_number, validate_session_id};
use crate::model::rank::Target;
use crate::storage::fulltext::FullTextSet;
use std::sync::Arc;

/// The work of [`crate::Db::dialogue`]: session `id`'s dialogue, shared
/// with the engine's cache.
pub(crate) fn dialogue(engine: &Engine, id: &str) -> Result<Arc<Dialogue>> {
    validate_session_id(id)?;
    engine
        .dialogue(id)?
        .ok_or_else(|| Error::NoSuchSession(id.to_owned()))
}

/// Runs `read` on session `id`'s dialogue; when a turn's document it
/// reads is gone because that turn was forgotten meanwhile (a write
/// beside this read), runs it again on the dialogue as it is now, up to
/// [`READ_RETRIES`] times.
fn read_session<T>(engine: &Engine, id: &str, read: impl Fn(&Dialogue) -> Result<T>) -> Result<T> {
    let mut dialogue = dialogue(engine, id)?;
    for _ in 0..READ_RETRIES {
        match read(&dialogue) {
            Err(Error::NoSuchDocument(doc)) if is_turn_doc_id_of(&doc, id) => {
                let now = self::dialogue(engine, id)?;
                if !(now.turns.iter()).any(|t| t.doc == doc && t.is_forgotten()) {
                    return Err(Error::NoSuchDocument(doc));
                }
                dialogue = now;
            }
            outcome => return outcome,
        }
    }
    read(&dialogue)
}

/// How many times [`read_session`] reads again after meeting turns
/// forgotten meanwhile.
const READ_RETRIES: usize = 3;

/// Whether `doc` names a turn document of session `session`.
fn is_turn_doc_id_of(doc: &str, session: &str) -> bool {
    crate::model::ids::parse_turn_id(doc).is_some_and(|(s, _)| s == session)
}

/// The work of [`crate::Db::session`].
pub(crate) fn session(engine: &Engine, id: &str) -> Result<SessionView> {
    read_session(engine, id, |dialogue| session_view(engine, dialogue))
}

/// Session `dialogue`'s view with its texts.
fn session_view(engine: &Engine, dialogue: &Dialogue) -> Result<SessionView> {
    let mut texts = TurnTexts::new(engine, dialogue);
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
                    at: turn.at,
                    tokens: turn.tokens,
                    current: number == dialogue.current,
                    summary: match turn.is_forgotten() {
                        true => None,
                        false => Some(texts.pick(&turn.summary)?),
                    },
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

/// The work of [`crate::Db::sessions`].
pub(crate) fn sessions(engine: &Engine) -> Result<Vec<SessionMeta>> {
    Ok(engine
        .store()
        .dialogues()?
        .iter()
        .map(Dialogue::meta)
        .collect())
}

/// The work of [`crate::Db::session_context`].
pub(crate) fn session_context(
    engine: &Engine,
    id: &str,
    budget: u64,
    query: Option<&str>,
) -> Result<context::SessionContext> {
    if budget == 0 {
        // As a query's BUDGET 0 is refused: nothing would fit.
        return Err(Error::Usage(
            "a context budget of 0 tokens; give at least 1".into(),
        ));
    }
    if let Some(query) = query {
        crate::ingest::pipeline::check_bytes("context query", query.as_bytes())?;
    }
    read_session(engine, id, |dialogue| {
        let mut texts = TurnTexts::new(engine, dialogue);
        let mut text_of = |turn, bytes| texts.span(turn, bytes);
        match query {
            None => context::build(dialogue, budget, &mut text_of),
            Some(query) => {
                let relevance = turn_relevance(engine, dialogue, query)?;
                let mut excerpt_of = |turn: u32| relevance.excerpt(engine, dialogue, turn);
                let scores = &relevance.scores;
                context::build_for_query(dialogue, budget, scores, &mut excerpt_of, &mut text_of)
            }
        }
    })
}

/// Each turn's relevance to a query, and where its best match lies.
struct TurnRelevance {
    /// Relevance by turn number (0: none).
    scores: Vec<f32>,
    /// The EDU of each turn that best matches the query's words, if any.
    best_edu: Vec<Option<u32>>,
}

impl TurnRelevance {
    /// Turn `turn`'s excerpt: its best-matching EDU (read in place from its
    /// stored document), else its summary pick (a turn relevant by its
    /// vector alone or as a neighbour, or one whose document lacks the EDU
    /// the index named or cannot be read: its text is read again, and
    /// checked, when the context is made).
    fn excerpt(&self, engine: &Engine, dialogue: &Dialogue, turn: u32) -> Excerpt {
        let stored = &dialogue.turns[turn as usize];
        let matched = self.best_edu.get(turn as usize).copied().flatten();
        let edu = |edu: u32| -> Result<Option<Excerpt>> {
            let document = engine.document(&stored.doc)?;
            Ok(document.edus()?.get(edu as usize).map(|e| Excerpt {
                edus: [edu, edu],
                bytes: [e.start.to_native(), e.end.to_native()],
                tokens: u64::from(e.tokens.to_native()),
            }))
        };
        matched
            .and_then(|matched| edu(matched).ok().flatten())
            .unwrap_or_else(|| Excerpt::of_pick(&stored.summary))
    }
}

/// Each turn's relevance to `query`. Its BM25 part is the sum of two
/// scores among the session's turns, each on the scale of
/// [`crate::storage::fulltext::FullTextReader::rank_ceiling`] (1: an entry
/// of average length holding every query term once): its best-matching
/// EDU's and its own (its tree node's representation). With a semantic
/// embedder ([`crate::EmbedderConfig::is_semantic`]) that part, divided by
/// the best turn's, is blended at [`context::VECTOR_WEIGHT`] with the
/// cosine of the query's vector to the turn's nearest node (the turn as a
/// whole: its EDUs' cosines measured lower), above
/// [`context::VECTOR_FLOOR`] and divided by the best turn's.
fn turn_relevance(engine: &Engine, dialogue: &Dialogue, query: &str) -> Result<TurnRelevance> {
    let ids: Vec<&str> = dialogue.turns.iter().map(|t| t.doc.as_str()).collect();
    let reader = FullTextSet::of(engine.fulltext_reader());
    let entries: u32 = dialogue.turns.iter().map(|t| t.edus + 1).sum();
    let mut lexical = vec![0.0f32; ids.len()];
    let mut best_edu = vec![None; ids.len()];
    for target in [Target::Edus, Target::Nodes] {
        let ceiling = reader.rank_ceiling(query, target, Some(&ids))?;
        if ceiling <= 0.0 {
            continue;
        }
        let mut best = vec![0.0f32; ids.len()];
        for hit in reader.rank(query, target, Some(&ids), entries as usize)? {
            let Some(turn) = turn_number(&hit.doc).filter(|&t| (t as usize) < ids.len()) else {
                continue;
            };
            let score = hit.score / ceiling;
            if score > best[turn as usize] {
                best[turn as usize] = score;
                if hit.node.is_none() {
                    best_edu[turn as usize] = Some(hit.span.first);
                }
            }
        }
        lexical.iter_mut().zip(best).for_each(|(sum, b)| *sum += b);
    }
    if !engine.embedder_config().is_semantic() {
        return Ok(TurnRelevance {
            scores: lexical,
            best_edu,
        });
    }
    let vector = engine.embed_query(query)?;
    // Each turn's node vectors alone (no tree or EDUs read): a turn is a
    // few nodes.
    let cosine = (dialogue.turns.iter())
        .map(|turn| {
            if turn.is_forgotten() {
                return Ok(0.0);
            }
            let (rows, dimension) = engine.node_vectors(&turn.doc)?;
            Ok(rows
                .chunks_exact(dimension.max(1))
                .filter(|row| row.len() == vector.len())
                .map(|row| crate::compute::vector::dot(row, &vector))
                .fold(0.0f32, f32::max))
        })
        .collect::<Result<Vec<f32>>>()?;
    let top = |scores: &[f32]| scores.iter().copied().fold(0.0f32, f32::max);
    let (top_lexical, top_cosine) = (top(&lexical), top(&cosine));
    let floor = context::VECTOR_FLOOR;
    Ok(TurnRelevance {
        scores: lexical
            .iter()
            .zip(&cosine)
            .map(|(&l, &c)| {
                let l = if top_lexical > 0.0 {
                    l / top_lexical
                } else {
                    0.0
                };
                let c = if top_cosine > floor {
                    ((c - floor) / (top_cosine - floor)).max(0.0)
                } else {
                    0.0
                };
                (1.0 - context::VECTOR_WEIGHT) * l + context::VECTOR_WEIGHT * c
            })
            .collect(),
        best_edu,
    })
}

/// Checks every session's turns against their stored documents
/// ([`crate::memory::Turn::check_document`]: EDUs, byte ranges and
/// token counts of turns and their summaries), naming each session at
/// fault; the rest of a dialogue's invariants are checked when it is read.
/// Dialogues the store cannot read are left to the store's own check,
/// which names them.
pub(crate) fn check_session_documents(engine: &Engine) -> Vec<Damaged> {
    let store = engine.store();
    let ids = store.session_ids().unwrap_or_default();
    let mut damaged = Vec::new();
    for dialogue in ids
        .iter()
        .filter_map(|id| store.dialogue(id).ok().flatten())
    {
        for turn in dialogue.turns.iter().filter(|t| !t.is_forgotten()) {
            let checked = engine
                .document(&turn.doc)
                .and_then(|doc| doc.to_document())
                .and_then(|doc| {
                    turn.check_document(&doc)
                        .map_err(|message| Error::Invariant {
                            doc: turn.doc.clone(),
                            message,
                        })
                });
            if let Err(error) = checked {
                damaged.push(Damaged {
                    doc: format!("session {}", dialogue.id),
                    problem: error.to_string(),
                });
            }
        }
    }
    damaged
}

/// The turn document ids of session `id` in turn order (forgotten turns,
/// which have none, left out), each with its time, or `None` when the
/// session does not exist (for the `session('id')` query scope).
pub(crate) fn session_turns(engine: &Engine, id: &str) -> Result<Option<TimedTurns>> {
    Ok(engine.dialogue(id)?.map(|d| {
        (d.turns.iter())
            .filter(|t| !t.is_forgotten())
            .map(|t| (t.doc.clone(), t.at))
            .collect()
    }))
}

/// Reads turn texts for summary picks, each document once.
struct TurnTexts<'a> {
    engine: &'a Engine,
    dialogue: &'a Dialogue,
    texts: std::collections::HashMap<u32, String>,
}

impl<'a> TurnTexts<'a> {
    fn new(engine: &'a Engine, dialogue: &'a Dialogue) -> TurnTexts<'a> {
        TurnTexts {
            engine,
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
                entry.insert(self.engine.document(doc)?.text()?.to_owned())
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
    use crate::engine::write::Written;
    use crate::memory::append::{TurnInput, append_turn, append_turns};
    use crate::memory::forget::{forget_turn, remove_session};
    use crate::memory::placement::Placement;
    use crate::model::dialogue::Role;
    use crate::model::document::Format;
    use crate::model::ids::turn_doc_id;
    use crate::progress::CancelToken;

    /// One turn by `role` with `text`, placed as `placement` says.
    fn turn(role: Role, text: &str, placement: Placement) -> TurnInput {
        TurnInput {
            placement,
            ..TurnInput::new(role, text)
        }
    }

    /// An empty store.
    fn empty_store() -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let options = crate::engine::OpenOptions {
            create: true,
            ..Default::default()
        };
        let db = Engine::open(dir.path().join("db"), &options).unwrap();
        (dir, db)
    }

    /// Session `id`'s dialogue as the engine serves it equals the store's
    /// record, and has `turns` turns, each one's document stored.
    fn assert_cached_is_stored(db: &Engine, id: &str, turns: usize) {
        let served = dialogue(db, id).unwrap();
        assert_eq!(Some(&*served), db.store().dialogue(id).unwrap().as_ref());
        assert_eq!(served.turns.len(), turns);
        for turn in &served.turns {
            assert!(db.store().get(&turn.doc).unwrap().is_some(), "{}", turn.doc);
        }
    }

    #[test]
    fn the_cached_dialogue_is_the_stored_one_after_every_write() {
        let (_dir, db) = empty_store();
        let said = ["Apples are red.", "Pears are green.", "Plums are dark."];
        for (i, text) in said.iter().enumerate() {
            if i > 0 {
                // A read between appends puts the dialogue in the cache.
                session_context(&db, "s", 100, None).unwrap();
            }
            let receipt = append_turn(&db, "s", turn(Role::User, text, Placement::Auto)).unwrap();
            assert_eq!(receipt.turn, i as u32);
            assert_cached_is_stored(&db, "s", i + 1);
        }
        // A batch whose second turn fails after its first was placed writes
        // nothing, and the half-changed dialogue is not what is served.
        let failing = [
            turn(Role::User, "Cherries too.", Placement::Auto),
            turn(Role::User, "And figs.", Placement::Fork(99)),
        ];
        let none = crate::progress::NoProgress;
        let err = append_turns(&db, "s", &failing, &none, &CancelToken::new()).unwrap_err();
        assert!(matches!(err, Error::NoSuchTurn { .. }), "{err}");
        assert_cached_is_stored(&db, "s", 3);
        let batch = [
            &failing[0],
            &turn(Role::Assistant, "Noted.", Placement::Continue),
        ];
        let batch: Vec<TurnInput> = batch.into_iter().cloned().collect();
        append_turns(&db, "s", &batch, &none, &CancelToken::new()).unwrap();
        assert_cached_is_stored(&db, "s", 5);
        // Removing the session forgets it; the next turn starts it afresh.
        remove_session(&db, "s").unwrap();
        assert!(matches!(dialogue(&db, "s"), Err(Error::NoSuchSession(_))));
        let receipt = append_turn(&db, "s", turn(Role::User, said[0], Placement::Auto)).unwrap();
        assert_eq!(receipt.turn, 0);
        assert_cached_is_stored(&db, "s", 1);
    }

    #[test]
    fn a_read_that_meets_a_turn_forgotten_meanwhile_reads_again() {
        let (_dir, db) = empty_store();
        for text in ["Apples are red.", "Pears are green."] {
            append_turn(&db, "s", turn(Role::User, text, Placement::Auto)).unwrap();
        }
        let before = dialogue(&db, "s").unwrap();
        forget_turn(&db, "s", 0).unwrap();
        // A reader holding the dialogue from before the forget.
        let stale = session_view(&db, &before).unwrap_err();
        assert!(matches!(stale, Error::NoSuchDocument(_)), "{stale}");
        let calls = std::cell::Cell::new(0);
        let view = read_session(&db, "s", |now| {
            calls.set(calls.get() + 1);
            session_view(&db, if calls.get() == 1 { &before } else { now })
        })
        .unwrap();
        assert_eq!(calls.get(), 2);
        assert!(view.topics[0].branches[0].turns[0].summary.is_none());
        // A reader that keeps reading the forgotten turn gives up.
        let stuck = read_session(&db, "s", |_| session_view(&db, &before));
        assert!(matches!(stuck, Err(Error::NoSuchDocument(_))));
        // A document missing for another reason is still an error.
        let gone = read_session(&db, "s", |_| -> Result<()> {
            Err(Error::NoSuchDocument(turn_doc_id("s", 1)))
        });
        assert!(matches!(gone, Err(Error::NoSuchDocument(_))));
    }

    #[test]
    fn readers_racing_with_appends_never_leave_a_stale_dialogue_cached() {
        let (_dir, db) = empty_store();
        append_turn(
            &db,
            "s",
            turn(Role::User, "The first turn.", Placement::Auto),
        )
        .unwrap();
        let appended = 12;
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        let served = dialogue(&db, "s").unwrap();
                        assert!(served.check_tree().is_ok());
                        session_context(&db, "s", 50, Some("turn")).unwrap();
                    }
                });
            }
            for i in 0..appended {
                let text = format!("Turn number {i} says something new.");
                append_turn(&db, "s", turn(Role::User, &text, Placement::Auto)).unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert_cached_is_stored(&db, "s", appended + 1);
    }

    /// A store with session "s" of two turns, and what re-writing its last
    /// turn with the dialogue `corrupt` makes of it needs.
    fn rewrite(corrupt: impl FnOnce(&mut Dialogue)) -> (tempfile::TempDir, Engine) {
        let (dir, db) = empty_store();
        let text = "- apples\n- pears\n- plums, and a long list item";
        append_turn(&db, "s", turn(Role::User, "Which fruit?", Placement::Auto)).unwrap();
        append_turn(&db, "s", turn(Role::User, text, Placement::Continue)).unwrap();
        assert!(check_session_documents(&db).is_empty());
        let mut dialogue = Arc::unwrap_or_clone(dialogue(&db, "s").unwrap());
        corrupt(&mut dialogue);
        let id = turn_doc_id("s", 1);
        let (doc, vectors, dag) = db.prepare_text(&id, text.into(), Format::Text).unwrap();
        // Written as a writer would (so the engine's caches forget the
        // session), but without the checks an append makes.
        db.write(|| {
            let turns = [(doc, vectors, dag)];
            db.store().put_turns(&turns, &dialogue)?;
            let [(doc, ..)] = turns;
            let put = vec![doc];
            Ok((
                (),
                Written {
                    put,
                    ..Written::default()
                },
            ))
        })
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
            let damaged = check_session_documents(&db);
            assert!(
                matches!(&damaged[..], [Damaged { doc, .. }] if doc == "session s"),
                "{damaged:?}"
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
        corrupt(dialogue(&db, "s").map(drop));
        corrupt(session(&db, "s").map(drop));
        corrupt(session_context(&db, "s", 100, None).map(drop));
        corrupt(sessions(&db).map(drop));
        corrupt(db.store().check().map(drop));
        corrupt(append_turn(&db, "s", turn(Role::User, "More fruit.", Placement::Auto)).map(drop));
        // Still removable, with every turn.
        let turns: Vec<String> = (0..)
            .map(|n| crate::model::ids::turn_doc_id("s", n))
            .take_while(|id| db.document(id).is_ok())
            .collect();
        assert!(turns.len() > 1, "{turns:?}");
        remove_session(&db, "s").unwrap();
        assert!(matches!(dialogue(&db, "s"), Err(Error::NoSuchSession(_))));
        for id in &turns {
            assert!(matches!(db.document(id), Err(Error::NoSuchDocument(_))));
        }
        assert_eq!(db.store().check().unwrap(), 0);
    }
}
