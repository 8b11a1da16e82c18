//! Multi-turn agent memory ("sessions"), after Context-Agent's dynamic
//! discourse trees, made model-free.
//!
//! A session is an append-only dialogue of turns. Each turn is stored as
//! its **own document** (plain text) under a reserved id,
//! `@session/<session>/<turn, zero-padded to 6>`, so it gets EDU
//! coordinates, a tree, full-text and vector entries and a DAG through the
//! ordinary ingest pipeline, and appending a turn costs one turn's analysis.
//! Beside the turn documents each session keeps one small record, its
//! [`Dialogue`]: topics → branches → turns, each turn with its parent, its
//! extractive summary (an EDU span inside its own document), and per topic
//! and branch an extractive summary and the sum of its turns' vectors,
//! both updated incrementally when a turn joins ([`summary`]).
//!
//! - [`placement`] decides where a new turn goes (continue, new topic,
//!   switch topic, fork) from the store's embedder, model-free;
//! - [`summary`] picks a turn's summary EDU and keeps topic and branch
//!   summaries;
//! - [`context`] builds the context for the next turn: the active path in
//!   full plus the stored summaries of everything else, under a budget;
//! - [`session`] holds the [`crate::Db`] methods (append, browse, context, remove).
//!
//! This module holds the record types, the views callers read, and the
//! dialogue tree's invariants ([`Dialogue::validate`]).

use std::fmt;

use crate::error::{Error, Result};

pub mod context;
pub mod placement;
pub(crate) mod session;
pub mod summary;

pub use context::{ContextItem, ContextKind, SessionContext};
pub use placement::{BranchChoice, Decision, TopicChoice};
pub use session::TurnReceipt;

pub use crate::model::dialogue::{
    Branch, BranchView, Dialogue, MAX_TURNS, Role, SessionMeta, SessionView, SummaryPick,
    SummaryText, Topic, TopicView, Turn, TurnView, span_text,
};
pub use crate::model::ids::{
    MAX_SESSION_ID_BYTES, SESSION_PREFIX, is_turn_id, parse_turn_id, turn_doc_id,
    validate_session_id,
};

/// Checks a turn before anything is stored: the session id
/// ([`validate_session_id`]), the text as ingest checks any input (size
/// limit, NUL bytes; [`crate::ingest::pipeline::check_bytes`]), and text that is not
/// blank ([`Error::EmptyTurn`]).
pub fn check_turn_input(session: &str, text: &str) -> Result<()> {
    validate_session_id(session)?;
    crate::ingest::pipeline::check_bytes(&format!("session {session}"), text.as_bytes())?;
    if text.trim().is_empty() {
        return Err(Error::EmptyTurn {
            session: session.to_owned(),
        });
    }
    Ok(())
}

/// Where the caller wants a new turn to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Decided from similarities (see [`placement`]).
    #[default]
    Auto,
    /// A child of the current turn, on its branch.
    Continue,
    /// The first turn of a new topic.
    NewTopic,
    /// Back to this topic: a child of its latest turn.
    Topic(u32),
    /// A new branch whose first turn is a child of this turn.
    Fork(u32),
}

impl fmt::Display for Placement {
    /// In words, as the command line prints it: `auto`, `continue`, `new
    /// topic`, `topic N`, `fork at turn N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Auto => f.write_str("auto"),
            Placement::Continue => f.write_str("continue"),
            Placement::NewTopic => f.write_str("new topic"),
            Placement::Topic(topic) => write!(f, "topic {topic}"),
            Placement::Fork(turn) => write!(f, "fork at turn {turn}"),
        }
    }
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na <= 0.0 || nb <= 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The unit-length mean of rows `first..=last` of a row-major matrix of
/// `dimension` columns (zeros when they sum to zero).
pub fn mean_unit(rows: &[f32], dimension: usize, first: usize, last: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; dimension];
    for row in first..=last {
        if let Some(values) = rows.get(row * dimension..(row + 1) * dimension) {
            add_into(&mut mean, values);
        }
    }
    crate::compute::embed::normalise(&mut mean);
    mean
}

/// What [`add_turn`] needs about the new turn's document.
#[derive(Debug, Clone)]
pub(crate) struct NewTurn {
    pub role: Role,
    pub doc: String,
    pub summary: SummaryPick,
    pub edus: u32,
    pub bytes: [u32; 2],
    pub tokens: u64,
    /// The turn's unit vector.
    pub vector: Vec<f32>,
    /// Its summary span's unit vector.
    pub summary_vector: Vec<f32>,
}

/// Appends a turn to `dialogue` where `resolved` says, making it the current turn,
/// and updates the summaries and vector sums of its topic and branch
/// only (`pick_vector` gives the unit vector of an earlier summary
/// pick). Returns its number.
pub(crate) fn add_turn(
    dialogue: &mut Dialogue,
    resolved: &placement::Resolved,
    turn: NewTurn,
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
                vector_sum: vec![0.0; dimension],
            });
            dialogue.topics[topic as usize].branches.push(id);
            id
        }
    };
    let new_pick = (turn.summary, turn.summary_vector.clone());
    {
        let b = &mut dialogue.branches[branch as usize];
        b.turns.push(number);
        add_into(&mut b.vector_sum, &turn.vector);
        b.summary = summary::update(&b.summary, new_pick.clone(), &b.vector_sum, pick_vector)?;
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
    });
    dialogue.current = number;
    Ok(number)
}

/// Adds `v` into `sum` (which may be longer or shorter; extra values are ignored).
fn add_into(sum: &mut [f32], v: &[f32]) {
    for (s, x) in sum.iter_mut().zip(v) {
        *s += x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pipeline::analyze;
    use crate::model::document::Format;
    use crate::model::edu::Span;

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
        }
    }

    fn branch(id: u32, topic: u32, fork: Option<u32>, turns: &[u32]) -> Branch {
        Branch {
            id,
            topic,
            fork,
            turns: turns.to_vec(),
            summary: turns.iter().map(|&t| pick(t)).collect(),
            vector_sum: vec![1.0],
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

    #[test]
    fn placements_read_in_words() {
        let words: Vec<String> = [
            Placement::Auto,
            Placement::Continue,
            Placement::NewTopic,
            Placement::Topic(2),
            Placement::Fork(3),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            words,
            ["auto", "continue", "new topic", "topic 2", "fork at turn 3"]
        );
    }
}
