//! Removing a session with every turn, and forgetting one turn (its
//! document removed, the summaries it was part of chosen again).

use crate::engine::Engine;
use crate::engine::write::Written;
use crate::error::{Error, Result};
use crate::memory::append::TurnVectors;
use crate::memory::summary;
use crate::model::dialogue::{Dialogue, SummaryPick};
use crate::model::ids::validate_session_id;

/// The work of [`crate::Db::remove_session`].
pub(crate) fn remove_session(engine: &Engine, id: &str) -> Result<()> {
    validate_session_id(id)?;
    engine.write(|| {
        let Some(docs) = engine.store().remove_session(id)? else {
            // Removing a session lost to damage acknowledges the loss.
            return match engine.store().forget_lost(id, true)? {
                true => Ok(((), Written::default())),
                false => Err(Error::NoSuchSession(id.to_owned())),
            };
        };
        Ok((
            (),
            Written {
                removed: docs,
                ..Written::default()
            },
        ))
    })
}

/// The work of [`crate::Db::forget_turn`]: turn `turn` of session
/// `session` keeps its place in the tree while its document goes; the
/// summaries of its branch and topic, and its topic's vector sum, are
/// rebuilt from their turns still said, as appends would have built them
/// without it; all in one batch. Forgetting a forgotten turn writes
/// nothing.
pub(crate) fn forget_turn(engine: &Engine, session: &str, turn: u32) -> Result<()> {
    validate_session_id(session)?;
    engine.write(|| {
        let mut dialogue = engine
            .dialogue_to_change(session)?
            .ok_or_else(|| Error::NoSuchSession(session.to_owned()))?;
        let forgotten = dialogue.turn(turn)?;
        if forgotten.is_forgotten() {
            return Ok(((), Written::default()));
        }
        let (doc, branch, topic) = (forgotten.doc.clone(), forgotten.branch, forgotten.topic);
        dialogue.turns[turn as usize].forget();
        let mut vectors = TurnVectors::new(engine, session, dialogue.turns.len() as u32, &[]);
        let on_branch: Vec<u32> = (dialogue.branches[branch as usize].turns.iter())
            .copied()
            .filter(|&n| !dialogue.turns[n as usize].is_forgotten())
            .collect();
        let on_topic: Vec<u32> = (dialogue.turns.iter())
            .filter(|t| t.topic == topic && !t.is_forgotten())
            .map(|t| t.number)
            .collect();
        dialogue.branches[branch as usize].summary =
            summarise(&dialogue, &on_branch, &mut vectors)?.0;
        let (summary, sum) = summarise(&dialogue, &on_topic, &mut vectors)?;
        let topic = &mut dialogue.topics[topic as usize];
        topic.summary = summary;
        match sum.is_empty() {
            true => topic.vector_sum.iter_mut().for_each(|x| *x = 0.0),
            false => topic.vector_sum = sum,
        }
        dialogue.check_tree().map_err(|message| Error::Invariant {
            doc: format!("session {session}"),
            message,
        })?;
        engine.store().forget_turn(&doc, &dialogue)?;
        Ok((
            (),
            Written {
                removed: vec![doc],
                sessions: vec![dialogue],
                ..Written::default()
            },
        ))
    })
}

/// The summary and vector sum of `turns` (in order), folded as their
/// appends built them.
pub(super) fn summarise(
    dialogue: &Dialogue,
    turns: &[u32],
    vectors: &mut TurnVectors<'_>,
) -> Result<(Vec<SummaryPick>, Vec<f32>)> {
    let mut picks = Vec::new();
    let mut sum = Vec::new();
    for &number in turns {
        let vector = vectors.turn(number)?;
        sum.resize(vector.len(), 0.0);
        crate::compute::vector::add_into(&mut sum, &vector);
        let pick = dialogue.turns[number as usize].summary;
        let new = (pick, vectors.pick(&pick)?);
        picks = summary::update(&picks, new, &sum, &mut |p| vectors.pick(p))?;
    }
    Ok((picks, sum))
}
