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

use rkyv::{Archive, Deserialize, Serialize};

use crate::document::{Document, Span};
use crate::error::{Error, Result};

pub mod context;
pub mod placement;
mod session;
pub mod summary;

pub use context::{ContextItem, ContextKind, SessionContext};
pub use placement::{BranchChoice, Decision, TopicChoice};
pub use session::TurnReceipt;

/// Every turn document's id starts with this; callers cannot use it.
pub const SESSION_PREFIX: &str = "@session/";
/// Longest accepted session id, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;
/// Most turns one session holds: turn numbers are zero-padded to 6 digits.
pub const MAX_TURNS: u32 = 1_000_000;

/// Checks a session id: 1 to [`MAX_SESSION_ID_BYTES`] bytes of letters,
/// digits, `-`, `_`, `.` and `:` (no `/`, so a turn id names its session
/// unambiguously).
pub fn validate_session_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("session ids must not be empty")
    } else if id.len() > MAX_SESSION_ID_BYTES {
        Some("session ids must be at most 128 bytes")
    } else if !id
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
    {
        Some("session ids may hold only letters, digits, '-', '_', '.' and ':'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidSession {
            id: id.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a turn before anything is stored: the session id
/// ([`validate_session_id`]), the text as ingest checks any input (size
/// limit, NUL bytes; [`crate::ingest::check_bytes`]), and text that is not
/// blank ([`Error::EmptyTurn`]).
pub fn check_turn_input(session: &str, text: &str) -> Result<()> {
    validate_session_id(session)?;
    crate::ingest::check_bytes(&format!("session {session}"), text.as_bytes())?;
    if text.trim().is_empty() {
        return Err(Error::EmptyTurn {
            session: session.to_owned(),
        });
    }
    Ok(())
}

/// The document id of turn `turn` of `session`.
pub fn turn_doc_id(session: &str, turn: u32) -> String {
    format!("{SESSION_PREFIX}{session}/{turn:06}")
}

/// True for the id of a session's turn document.
pub fn is_turn_id(id: &str) -> bool {
    id.starts_with(SESSION_PREFIX)
}

/// The session and turn a turn document id names, if it is one.
pub fn parse_turn_id(id: &str) -> Option<(&str, &str)> {
    id.strip_prefix(SESSION_PREFIX)?.rsplit_once('/')
}

/// Who spoke a turn.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(derive(Debug))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person.
    #[default]
    User,
    /// The agent.
    Assistant,
    /// Instructions to the agent.
    System,
}

impl Role {
    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Role {
    type Err = Error;

    fn from_str(name: &str) -> Result<Role> {
        match name.to_ascii_lowercase().as_str() {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "system" => Ok(Role::System),
            _ => Err(Error::Usage(format!(
                "unknown role {name:?}; expected user, assistant or system"
            ))),
        }
    }
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

/// One summary unit: an EDU span inside one turn's document.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[rkyv(derive(Debug))]
pub struct SummaryPick {
    /// The turn whose document holds it.
    pub turn: u32,
    /// Closed EDU span in that document.
    pub edus: Span,
    /// Byte range `[start, end)` of the span in that document's text.
    pub bytes: [u32; 2],
    /// o200k_base tokens of exactly that text (`text[bytes]`).
    pub tokens: u32,
}

/// One turn of a dialogue.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct Turn {
    /// Its number: dense from 0 in the order appended.
    pub number: u32,
    /// Who spoke it.
    pub role: Role,
    /// Its document's id ([`turn_doc_id`]).
    pub doc: String,
    /// The turn it answers or follows; `None` for a topic's first turn.
    pub parent: Option<u32>,
    /// Its topic.
    pub topic: u32,
    /// Its branch.
    pub branch: u32,
    /// Its extractive summary: its most central EDU.
    pub summary: SummaryPick,
    /// Its EDUs.
    pub edus: u32,
    /// Byte range `[start, end)` of its EDUs (first to last) in its text.
    pub bytes: [u32; 2],
    /// o200k_base tokens of exactly that text (`text[bytes]`, gaps
    /// between EDUs such as list markers included), counted when appended.
    pub tokens: u64,
}

/// A chain of turns inside a topic: a topic's first branch starts at its
/// first turn, every other one at a fork.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct Branch {
    /// Its id: dense from 0 over the session.
    pub id: u32,
    /// Its topic.
    pub topic: u32,
    /// The turn its first turn forks from; `None` for a topic's first branch.
    pub fork: Option<u32>,
    /// Its turns in order; each one's parent is the one before.
    pub turns: Vec<u32>,
    /// Extractive summary: its most central turn summaries, by turn.
    pub summary: Vec<SummaryPick>,
    /// Sum of its turns' unit vectors (the centroid's direction).
    pub vector_sum: Vec<f32>,
}

/// A topic: a tree of branches rooted at its first turn.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct Topic {
    /// Its id: dense from 0 over the session.
    pub id: u32,
    /// Its branches, the first one starting at its first turn.
    pub branches: Vec<u32>,
    /// Its most recent turn (where a switch back continues).
    pub last_turn: u32,
    /// Number of its turns.
    pub turns: u32,
    /// Extractive summary: its most central turn summaries, by turn.
    pub summary: Vec<SummaryPick>,
    /// Sum of its turns' unit vectors (the centroid's direction).
    pub vector_sum: Vec<f32>,
}

/// A session's dialogue tree: the record stored beside its turn documents.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct Dialogue {
    /// The session id.
    pub id: String,
    /// Every turn, by number.
    pub turns: Vec<Turn>,
    /// Every topic, by id.
    pub topics: Vec<Topic>,
    /// Every branch, by id.
    pub branches: Vec<Branch>,
    /// The active turn: always the latest appended (the last of `turns`).
    pub current: u32,
}

/// What [`Dialogue::add_turn`] needs about the new turn's document.
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

impl Dialogue {
    /// The turn the next one follows by default. Like the methods below,
    /// it expects a dialogue that passed [`Dialogue::check_tree`], as every
    /// one read from a store has.
    pub fn current_turn(&self) -> &Turn {
        &self.turns[self.current as usize]
    }

    /// The turns from the current turn's topic root down to it, in order.
    pub fn active_path(&self) -> Vec<u32> {
        let mut path = vec![self.current];
        let mut at = self.current_turn().parent;
        while let Some(turn) = at {
            path.push(turn);
            at = self.turns[turn as usize].parent;
        }
        path.reverse();
        path
    }

    /// Total tokens of every turn (each turn's whole text span).
    pub fn tokens(&self) -> u64 {
        self.turns.iter().map(|t| t.tokens).sum()
    }

    /// Turn `turn`, or [`Error::NoSuchTurn`].
    pub fn turn(&self, turn: u32) -> Result<&Turn> {
        self.turns
            .get(turn as usize)
            .ok_or_else(|| Error::NoSuchTurn {
                session: self.id.clone(),
                turn,
                count: self.turns.len() as u32,
            })
    }

    /// Topic `topic`, or [`Error::NoSuchTopic`].
    pub fn topic(&self, topic: u32) -> Result<&Topic> {
        self.topics
            .get(topic as usize)
            .ok_or_else(|| Error::NoSuchTopic {
                session: self.id.clone(),
                topic,
                count: self.topics.len() as u32,
            })
    }

    /// The metadata [`crate::Db::sessions`] lists.
    pub fn meta(&self) -> SessionMeta {
        SessionMeta {
            id: self.id.clone(),
            turns: self.turns.len() as u32,
            topics: self.topics.len() as u32,
            branches: self.branches.len() as u32,
            tokens: self.tokens(),
            current: self.current,
            active_topic: self.current_turn().topic,
        }
    }

    /// Appends a turn where `resolved` says, making it the current turn,
    /// and updates the summaries and vector sums of its topic and branch
    /// only (`pick_vector` gives the unit vector of an earlier summary
    /// pick). Returns its number.
    pub(crate) fn add_turn(
        &mut self,
        resolved: &placement::Resolved,
        turn: NewTurn,
        pick_vector: &mut dyn FnMut(&SummaryPick) -> Result<Vec<f32>>,
    ) -> Result<u32> {
        let number = self.turns.len() as u32;
        let dimension = turn.vector.len();
        let topic = match resolved.topic {
            Some(topic) => topic,
            None => {
                let id = self.topics.len() as u32;
                self.topics.push(Topic {
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
                let id = self.branches.len() as u32;
                self.branches.push(Branch {
                    id,
                    topic,
                    fork: resolved.parent,
                    turns: Vec::new(),
                    summary: Vec::new(),
                    vector_sum: vec![0.0; dimension],
                });
                self.topics[topic as usize].branches.push(id);
                id
            }
        };
        let new_pick = (turn.summary, turn.summary_vector.clone());
        {
            let b = &mut self.branches[branch as usize];
            b.turns.push(number);
            add_into(&mut b.vector_sum, &turn.vector);
            b.summary = summary::update(&b.summary, new_pick.clone(), &b.vector_sum, pick_vector)?;
        }
        {
            let t = &mut self.topics[topic as usize];
            t.turns += 1;
            t.last_turn = number;
            add_into(&mut t.vector_sum, &turn.vector);
            t.summary = summary::update(&t.summary, new_pick, &t.vector_sum, pick_vector)?;
        }
        self.turns.push(Turn {
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
        self.current = number;
        Ok(number)
    }

    /// Checks the dialogue tree's own invariants, without the store (every
    /// dialogue read from a store has passed it; the methods above rely on
    /// it): a valid session id; turns dense from 0, naming their own
    /// documents, with a non-empty byte range and a summary that is an EDU
    /// span inside it; the current turn is the last one; parents precede
    /// children and stay in their topic; every turn is on exactly one
    /// branch, whose turns form a chain from its fork; each topic lists its
    /// branches once each, its root branch (no fork) first and only that
    /// one without a fork, and records its turn count and latest turn;
    /// every branch and topic summary holds 1 to [`summary::MAX_SUMMARY_PICKS`]
    /// picks in turn order, each the summary of one of its turns.
    pub fn check_tree(&self) -> Result<(), String> {
        validate_session_id(&self.id).map_err(|e| e.to_string())?;
        let last = self
            .turns
            .len()
            .checked_sub(1)
            .ok_or("a session has at least one turn")?;
        if self.current as usize != last {
            return Err(format!(
                "current turn {} is not the last turn {last}",
                self.current
            ));
        }
        for (index, turn) in self.turns.iter().enumerate() {
            if turn.number as usize != index || turn.doc != turn_doc_id(&self.id, turn.number) {
                return Err(format!(
                    "turn {index} is numbered {} with document {:?}",
                    turn.number, turn.doc
                ));
            }
            if turn.topic as usize >= self.topics.len()
                || turn.branch as usize >= self.branches.len()
            {
                return Err(format!(
                    "turn {index} names missing topic {} or branch {}",
                    turn.topic, turn.branch
                ));
            }
            if let Some(parent) = turn.parent {
                if parent >= turn.number {
                    return Err(format!(
                        "turn {index} has parent {parent}, not an earlier turn"
                    ));
                }
                if self.turns[parent as usize].topic != turn.topic {
                    return Err(format!("turn {index} has parent {parent} in another topic"));
                }
            }
            let pick = &turn.summary;
            if turn.edus == 0
                || turn.bytes[0] >= turn.bytes[1]
                || pick.turn != turn.number
                || pick.edus.first > pick.edus.last
                || pick.edus.last >= turn.edus
                || pick.bytes[0] >= pick.bytes[1]
                || pick.bytes[0] < turn.bytes[0]
                || pick.bytes[1] > turn.bytes[1]
            {
                return Err(format!(
                    "turn {index} ({} EDUs, bytes {:?}) has summary {pick:?}, not a span of its own EDUs",
                    turn.edus, turn.bytes
                ));
            }
        }
        let mut on_branch = vec![0u32; self.turns.len()];
        for (index, branch) in self.branches.iter().enumerate() {
            if branch.id as usize != index {
                return Err(format!("branch {index} has id {}", branch.id));
            }
            let topic = self
                .topics
                .get(branch.topic as usize)
                .ok_or_else(|| format!("branch {index} names missing topic {}", branch.topic))?;
            if !topic.branches.contains(&branch.id) {
                return Err(format!("topic {} does not list branch {index}", topic.id));
            }
            if branch.turns.is_empty() {
                return Err(format!("branch {index} has no turns"));
            }
            let mut previous = branch.fork;
            for &turn in &branch.turns {
                let t = self
                    .turns
                    .get(turn as usize)
                    .ok_or_else(|| format!("branch {index} lists missing turn {turn}"))?;
                if t.branch != branch.id || t.parent != previous || t.topic != branch.topic {
                    return Err(format!(
                        "turn {turn} does not continue branch {index} (parent {:?}, expected {previous:?})",
                        t.parent
                    ));
                }
                on_branch[turn as usize] += 1;
                previous = Some(turn);
            }
            self.check_summary(&branch.summary, |t| t.branch == branch.id, "branch", index)?;
        }
        if let Some(turn) = on_branch.iter().position(|&n| n != 1) {
            return Err(format!(
                "turn {turn} is on {} branches, not one",
                on_branch[turn]
            ));
        }
        let mut counts = vec![(0u32, 0u32); self.topics.len()];
        for turn in &self.turns {
            let (count, last) = &mut counts[turn.topic as usize];
            *count += 1;
            *last = turn.number;
        }
        for (index, topic) in self.topics.iter().enumerate() {
            if topic.id as usize != index {
                return Err(format!("topic {index} has id {}", topic.id));
            }
            let mut seen = std::collections::HashSet::new();
            for (n, &branch) in topic.branches.iter().enumerate() {
                let root = self
                    .branches
                    .get(branch as usize)
                    .filter(|b| b.topic == topic.id && seen.insert(branch))
                    .map(|b| b.fork.is_none())
                    .ok_or_else(|| {
                        format!("topic {index} lists branch {branch}, missing, repeated or of another topic")
                    })?;
                if root != (n == 0) {
                    return Err(format!(
                        "topic {index}'s branch {branch} (position {n}) {} a fork; only its first branch starts at its root",
                        if root { "lacks" } else { "has" }
                    ));
                }
            }
            let (count, last) = counts[index];
            if topic.branches.is_empty() || topic.turns != count || topic.last_turn != last {
                return Err(format!(
                    "topic {index} has {} branches, {count} turns (records {}), last turn {last} (records {})",
                    topic.branches.len(),
                    topic.turns,
                    topic.last_turn
                ));
            }
            self.check_summary(&topic.summary, |t| t.topic == topic.id, "topic", index)?;
        }
        Ok(())
    }

    /// [`Dialogue::check_tree`], and every turn's document exists with the
    /// EDUs it records; `edus_of` gives the number of EDUs of a stored
    /// document (`None`: no such document).
    pub fn validate(&self, edus_of: &dyn Fn(&str) -> Option<u32>) -> Result<(), String> {
        self.check_tree()?;
        for turn in &self.turns {
            let edus = edus_of(&turn.doc).ok_or_else(|| {
                format!("turn {}'s document {:?} is missing", turn.number, turn.doc)
            })?;
            if edus != turn.edus {
                return Err(format!(
                    "turn {} records {} EDUs; its document has {edus}",
                    turn.number, turn.edus
                ));
            }
        }
        Ok(())
    }

    /// Checks a branch's or topic's summary: 1 to
    /// [`summary::MAX_SUMMARY_PICKS`] picks in increasing turn order, each
    /// the stored summary of a turn that `belongs`.
    fn check_summary(
        &self,
        picks: &[SummaryPick],
        belongs: impl Fn(&Turn) -> bool,
        what: &str,
        index: usize,
    ) -> Result<(), String> {
        if picks.is_empty() || picks.len() > summary::MAX_SUMMARY_PICKS {
            return Err(format!(
                "{what} {index}'s summary has {} picks, not 1 to {}",
                picks.len(),
                summary::MAX_SUMMARY_PICKS
            ));
        }
        if picks.windows(2).any(|pair| pair[0].turn >= pair[1].turn) {
            return Err(format!(
                "{what} {index}'s summary picks are not in increasing turn order"
            ));
        }
        for pick in picks {
            let ok = self
                .turns
                .get(pick.turn as usize)
                .is_some_and(|t| belongs(t) && t.summary == *pick);
            if !ok {
                return Err(format!(
                    "{what} {index}'s summary names turn {} EDUs {}, not the summary of one of its turns",
                    pick.turn, pick.edus
                ));
            }
        }
        Ok(())
    }
}

impl Turn {
    /// Checks the turn's recorded coordinates against `doc`, its stored
    /// document: the EDU count; `bytes` from its first EDU's start to its
    /// last EDU's end and `tokens` the count of exactly that text; its
    /// summary's bytes the span of its EDUs and its tokens the count of
    /// exactly that text.
    pub fn check_document(&self, doc: &Document) -> Result<(), String> {
        let (Some(first), Some(last)) = (doc.edus.first(), doc.edus.last()) else {
            return Err(format!("turn {}'s document has no EDUs", self.number));
        };
        if doc.meta.id != self.doc || doc.edus.len() != self.edus as usize {
            return Err(format!(
                "turn {} records document {:?} with {} EDUs; found {:?} with {}",
                self.number,
                self.doc,
                self.edus,
                doc.meta.id,
                doc.edus.len()
            ));
        }
        let count = |bytes| span_text(&self.doc, &doc.text, bytes).map(crate::tokens::count);
        let tokens = count(self.bytes).map_err(|e| e.to_string())?;
        if self.bytes != [first.start, last.end] || self.tokens != u64::from(tokens) {
            return Err(format!(
                "turn {} records bytes {:?} and {} tokens; its EDUs span {:?}, {tokens} tokens",
                self.number,
                self.bytes,
                self.tokens,
                [first.start, last.end]
            ));
        }
        let pick = &self.summary;
        let span = doc
            .edus
            .get(pick.edus.first as usize)
            .zip(doc.edus.get(pick.edus.last as usize))
            .map(|(a, b)| [a.start, b.end]);
        let tokens = count(pick.bytes).map_err(|e| e.to_string())?;
        if span != Some(pick.bytes) || pick.tokens != tokens {
            return Err(format!(
                "turn {}'s summary records EDUs {} at bytes {:?} with {} tokens; its document has {span:?} with {tokens} tokens",
                self.number, pick.edus, pick.bytes, pick.tokens
            ));
        }
        Ok(())
    }
}

/// Exactly `text[bytes]`: the span a turn or summary pick stands for in
/// the text of document `doc`; [`Error::Invariant`] when the range is not
/// a span of that text (a record that does not match its document).
pub(crate) fn span_text<'t>(doc: &str, text: &'t str, bytes: [u32; 2]) -> Result<&'t str> {
    text.get(bytes[0] as usize..bytes[1] as usize)
        .ok_or_else(|| Error::Invariant {
            doc: doc.to_owned(),
            message: format!(
                "byte range {}..{} is not a span of its {}-byte text",
                bytes[0],
                bytes[1],
                text.len()
            ),
        })
}

/// Adds `v` into `sum` (which may be longer or shorter; extra values are ignored).
fn add_into(sum: &mut [f32], v: &[f32]) {
    for (s, x) in sum.iter_mut().zip(v) {
        *s += x;
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
    crate::embed::normalise(&mut mean);
    mean
}

/// A session as [`crate::Db::sessions`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionMeta {
    /// The session id.
    pub id: String,
    /// Its turns.
    pub turns: u32,
    /// Its topics.
    pub topics: u32,
    /// Its branches.
    pub branches: u32,
    /// Tokens of all its turns.
    pub tokens: u64,
    /// The current turn.
    pub current: u32,
    /// The current turn's topic.
    pub active_topic: u32,
}

/// A summary pick with its text, as views and contexts show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SummaryText {
    /// The turn whose document holds it.
    pub turn: u32,
    /// That document's id.
    pub doc: String,
    /// Closed EDU span `[first, last]` in it.
    pub edus: [u32; 2],
    /// Byte range `[start, end)` in its text.
    pub bytes: [u32; 2],
    /// o200k_base tokens.
    pub tokens: u32,
    /// Exactly the document's `text[bytes]`.
    pub text: String,
}

/// One turn in a [`SessionView`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TurnView {
    /// Its number.
    pub number: u32,
    /// Who spoke it.
    pub role: Role,
    /// Its document id.
    pub doc: String,
    /// Its parent turn.
    pub parent: Option<u32>,
    /// Its tokens.
    pub tokens: u64,
    /// It is the current turn.
    pub current: bool,
    /// Its summary EDU span with text.
    pub summary: SummaryText,
}

/// One branch in a [`SessionView`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BranchView {
    /// Its id.
    pub id: u32,
    /// The turn it forks from (`None`: the topic's first branch).
    pub fork: Option<u32>,
    /// It holds the current turn.
    pub active: bool,
    /// Its stored summary with text.
    pub summary: Vec<SummaryText>,
    /// Its turns, in order.
    pub turns: Vec<TurnView>,
}

/// One topic in a [`SessionView`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicView {
    /// Its id.
    pub id: u32,
    /// It holds the current turn.
    pub active: bool,
    /// Its stored summary with text.
    pub summary: Vec<SummaryText>,
    /// Its branches, in creation order.
    pub branches: Vec<BranchView>,
}

/// A session's dialogue tree with text, as [`crate::Db::session`] returns it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionView {
    /// The session id.
    pub id: String,
    /// The current turn.
    pub current: u32,
    /// Number of turns.
    pub turns: u32,
    /// Tokens of all turns.
    pub tokens: u64,
    /// Its topics, by id.
    pub topics: Vec<TopicView>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Format;
    use crate::ingest::analyze;

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
        let whole = crate::tokens::count(&text[bytes[0] as usize..bytes[1] as usize]);
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
