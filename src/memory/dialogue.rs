//! Growing a session's dialogue tree by one turn: the new turn joins the
//! topic and branch placement resolved, and only that topic's and branch's
//! vector sums and summaries change.

use crate::compute::vector::add_into;
use crate::error::Result;
use crate::memory::placement;
use crate::memory::summary;
use crate::model::dialogue::{Branch, Dialogue, Role, SummaryPick, Topic, Turn};

/// What [`add_turn`] needs about the new turn's document.
#[derive(Debug, Clone)]
pub(crate) struct NewTurn {
    pub role: Role,
    pub doc: String,
    pub summary: SummaryPick,
    pub edus: u32,
    pub bytes: [u32; 2],
    pub tokens: u64,
    /// When it was said (seconds since the Unix epoch), if known.
    pub at: Option<i64>,
    /// The turn's unit vector.
    pub vector: Vec<f32>,
    /// Its summary span's unit vector.
    pub summary_vector: Vec<f32>,
}

/// Appends a turn to `dialogue` where `resolved` says, making it the current turn,
/// and updates the summaries of its topic and branch and its topic's
/// vector sum only. `branch_sum` is the sum of the unit vectors of the
/// turns already on the branch it joins ([`branch_sum`]); `pick_vector`
/// gives the unit vector of an earlier summary pick. Returns its number.
pub(crate) fn add_turn(
    dialogue: &mut Dialogue,
    resolved: &placement::Resolved,
    turn: NewTurn,
    mut branch_sum: Vec<f32>,
    pick_vector: &mut dyn FnMut(&SummaryPick) -> Result<Vec<f32>>,
) -> Result<u32> {
    let number = dialogue.turns.len() as u32;
    let dimension = turn.vector.len();
    let topic = match resolved.topic {
        Some(topic) => topic,
        None => {
            let id = dialogue.topics.len() as u32;
            dialogue.topics.push(Topic {
                id,
                branches: Vec::new(),
                last_turn: number,
                turns: 0,
                summary: Vec::new(),
                vector_sum: vec![0.0; dimension],
            });
            id
        }
    };
    let branch = match resolved.branch {
        Some(branch) => branch,
        None => {
            let id = dialogue.branches.len() as u32;
            dialogue.branches.push(Branch {
                id,
                topic,
                fork: resolved.parent,
                turns: Vec::new(),
                summary: Vec::new(),
            });
            dialogue.topics[topic as usize].branches.push(id);
            id
        }
    };
    let new_pick = (turn.summary, turn.summary_vector.clone());
    {
        let b = &mut dialogue.branches[branch as usize];
        b.turns.push(number);
        branch_sum.resize(dimension, 0.0);
        add_into(&mut branch_sum, &turn.vector);
        b.summary = summary::update(&b.summary, new_pick.clone(), &branch_sum, pick_vector)?;
    }
    {
        let t = &mut dialogue.topics[topic as usize];
        t.turns += 1;
        t.last_turn = number;
        add_into(&mut t.vector_sum, &turn.vector);
        t.summary = summary::update(&t.summary, new_pick, &t.vector_sum, pick_vector)?;
    }
    dialogue.turns.push(Turn {
        number,
        role: turn.role,
        doc: turn.doc,
        parent: resolved.parent,
        topic,
        branch,
        summary: turn.summary,
        edus: turn.edus,
        bytes: turn.bytes,
        tokens: turn.tokens,
        at: turn.at,
    });
    dialogue.current = number;
    Ok(number)
}

/// The sum of the unit vectors of the turns on the branch `resolved`
/// places a turn on (`turn_vector` gives an earlier turn's), in turn
/// order as the branch grew, forgotten turns left out; empty for a new
/// branch.
pub(crate) fn branch_sum(
    dialogue: &Dialogue,
    resolved: &placement::Resolved,
    turn_vector: &mut dyn FnMut(u32) -> Result<std::sync::Arc<Vec<f32>>>,
) -> Result<Vec<f32>> {
    let mut sum = Vec::new();
    if let Some(branch) = resolved.branch {
        let branch = &dialogue.branches[branch as usize];
        for &turn in &branch.turns {
            if dialogue.turns[turn as usize].is_forgotten() {
                continue;
            }
            let vector = turn_vector(turn)?;
            sum.resize(vector.len(), 0.0);
            add_into(&mut sum, &vector);
        }
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::ingest::pipeline::analyze;
    use crate::model::dialogue::span_text;
    use crate::model::document::Format;
    use crate::model::edu::Span;
    use crate::model::ids::turn_doc_id;

    /// A turn's one-EDU summary pick.
    fn pick(turn: u32) -> SummaryPick {
        SummaryPick {
            turn,
            edus: Span::new(0, 0),
            bytes: [0, 4],
            tokens: 1,
        }
    }

    fn turn(number: u32, parent: Option<u32>, topic: u32, branch: u32) -> Turn {
        Turn {
            number,
            role: Role::User,
            doc: turn_doc_id("s", number),
            parent,
            topic,
            branch,
            summary: pick(number),
            edus: 1,
            bytes: [0, 4],
            tokens: 1,
            at: None,
        }
    }

    fn branch(id: u32, topic: u32, fork: Option<u32>, turns: &[u32]) -> Branch {
        Branch {
            id,
            topic,
            fork,
            turns: turns.to_vec(),
            summary: turns.iter().map(|&t| pick(t)).collect(),
        }
    }

    fn topic(id: u32, branches: &[u32], last_turn: u32, turns: &[u32]) -> Topic {
        Topic {
            id,
            branches: branches.to_vec(),
            last_turn,
            turns: turns.len() as u32,
            summary: turns.iter().map(|&t| pick(t)).collect(),
            vector_sum: vec![1.0],
        }
    }

    /// Topic 0: branch 0 (turns 0, 1) and branch 1 forking at turn 0
    /// (turn 2); topic 1: branch 2 (turn 3, current).
    fn valid() -> Dialogue {
        Dialogue {
            id: "s".into(),
            turns: vec![
                turn(0, None, 0, 0),
                turn(1, Some(0), 0, 0),
                turn(2, Some(0), 0, 1),
                turn(3, None, 1, 2),
            ],
            topics: vec![topic(0, &[0, 1], 2, &[0, 1, 2]), topic(1, &[2], 3, &[3])],
            branches: vec![
                branch(0, 0, None, &[0, 1]),
                branch(1, 0, Some(0), &[2]),
                branch(2, 1, None, &[3]),
            ],
            current: 3,
        }
    }

    #[test]
    fn check_tree_refuses_each_broken_invariant() {
        valid().check_tree().unwrap();
        type Corruption = (&'static str, fn(&mut Dialogue));
        let broken: Vec<Corruption> = vec![
            ("not the last turn", |d| d.current = 2),
            ("repeated", |d| d.topics[0].branches = vec![0, 1, 1]),
            ("first branch", |d| d.topics[0].branches = vec![1, 0]),
            ("of another topic", |d| d.topics[1].branches = vec![2, 0]),
            ("lacks a fork", |d| {
                d.branches[1].fork = None;
                d.turns[2].parent = None;
            }),
            ("increasing turn order", |d| d.topics[0].summary.reverse()),
            ("picks, not 1 to 3", |d| d.topics[0].summary.push(pick(2))),
            ("picks, not 1 to 3", |d| d.branches[0].summary.clear()),
            ("not the summary of one of its turns", |d| {
                d.topics[0].summary[0].tokens = 7
            }),
            ("not the summary of one of its turns", |d| {
                d.branches[1].summary = vec![pick(3)]
            }),
            ("3 turns (records 4)", |d| d.topics[0].turns = 4),
            ("last turn 2 (records 1)", |d| d.topics[0].last_turn = 1),
            ("not a span of its own EDUs", |d| d.turns[1].bytes = [4, 4]),
            ("not a span of its own EDUs", |d| {
                d.turns[1].summary.bytes = [0, 9]
            }),
            ("not an earlier turn", |d| d.turns[1].parent = Some(1)),
            ("missing topic", |d| d.turns[3].topic = 5),
            ("does not continue branch", |d| {
                d.branches[0].turns = vec![1, 0]
            }),
            ("at least one turn", |d| d.turns.clear()),
        ];
        for (expected, corrupt) in broken {
            let mut d = valid();
            corrupt(&mut d);
            let err = d.check_tree().unwrap_err();
            assert!(err.contains(expected), "{expected:?}: {err}");
        }
    }

    #[test]
    fn check_document_compares_bytes_and_tokens_with_the_text() {
        let id = turn_doc_id("s", 0);
        let text = "- apples\n- pears\n- plums, and a long list item about winter fruit";
        let doc = analyze(&id, text.into(), Format::Text).unwrap();
        let (first, last) = (doc.edus[0], doc.edus[doc.edus.len() - 1]);
        let bytes = [first.start, last.end];
        let whole = crate::model::tokens::count(&text[bytes[0] as usize..bytes[1] as usize]);
        let edu_sum: u32 = doc.edus.iter().map(|e| e.tokens).sum();
        // The list markers between EDUs cost tokens the EDUs do not count.
        assert!(whole > edu_sum, "{whole} vs {edu_sum}");
        let good = Turn {
            summary: SummaryPick {
                turn: 0,
                edus: Span::new(1, 1),
                bytes: [doc.edus[1].start, doc.edus[1].end],
                tokens: doc.edus[1].tokens,
            },
            edus: doc.edus.len() as u32,
            bytes,
            tokens: u64::from(whole),
            ..turn(0, None, 0, 0)
        };
        good.check_document(&doc).unwrap();
        let broken: Vec<fn(&mut Turn)> = vec![
            |t| t.tokens -= 1,
            |t| t.bytes[0] += 1,
            |t| t.bytes = [0, 9_999],
            |t| t.summary.tokens += 1,
            |t| t.summary.bytes[1] += 1,
            |t| t.summary.edus = Span::new(1, 9),
            |t| t.edus += 1,
        ];
        for corrupt in broken {
            let mut t = good.clone();
            corrupt(&mut t);
            assert!(t.check_document(&doc).is_err(), "{t:?}");
        }
    }

    #[test]
    fn span_text_refuses_a_range_outside_the_text() {
        assert_eq!(span_text("d", "héllo", [0, 3]).unwrap(), "hé");
        for bytes in [[0, 9], [3, 1], [0, 2]] {
            assert!(matches!(
                span_text("d", "héllo", bytes),
                Err(Error::Invariant { .. })
            ));
        }
    }
}
