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

use crate::document::Span;
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
    /// o200k_base tokens of the span.
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
    /// Its tokens (the sum of its EDUs').
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
    /// The active turn: the latest appended.
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
    /// The turn the next one follows by default.
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

    /// Total tokens of every turn.
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

    /// Checks the dialogue tree's invariants; `edus_of` gives the number of
    /// EDUs of a stored document (`None`: no such document). Turns are
    /// dense and name their own documents, which exist; parents precede
    /// children and stay in their topic; every turn is on exactly one
    /// branch, whose turns form a chain from its fork (or the topic root);
    /// every summary is a valid EDU span of a turn of its topic or branch;
    /// the current turn exists.
    pub fn validate(&self, edus_of: &dyn Fn(&str) -> Option<u32>) -> Result<(), String> {
        validate_session_id(&self.id).map_err(|e| e.to_string())?;
        if self.turns.is_empty() {
            return Err("a session has at least one turn".into());
        }
        if self.current as usize >= self.turns.len() {
            return Err(format!("current turn {} does not exist", self.current));
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
            if branch.turns.is_empty() {
                return Err(format!("branch {index} has no turns"));
            }
            self.check_summary(&branch.summary, |t| t.branch == branch.id, "branch", index)?;
        }
        if let Some(turn) = on_branch.iter().position(|&n| n != 1) {
            return Err(format!(
                "turn {turn} is on {} branches, not one",
                on_branch[turn]
            ));
        }
        for (index, topic) in self.topics.iter().enumerate() {
            if topic.id as usize != index {
                return Err(format!("topic {index} has id {}", topic.id));
            }
            let turns: Vec<&Turn> = self.turns.iter().filter(|t| t.topic == topic.id).collect();
            let roots = turns.iter().filter(|t| t.parent.is_none()).count();
            let last = turns.iter().map(|t| t.number).max();
            if roots != 1 || topic.turns as usize != turns.len() || last != Some(topic.last_turn) {
                return Err(format!(
                    "topic {index} has {roots} first turns, {} turns (records {}), last {last:?} (records {})",
                    turns.len(),
                    topic.turns,
                    topic.last_turn
                ));
            }
            self.check_summary(&topic.summary, |t| t.topic == topic.id, "topic", index)?;
        }
        for (index, turn) in self.turns.iter().enumerate() {
            if turn.number as usize != index || turn.doc != turn_doc_id(&self.id, turn.number) {
                return Err(format!(
                    "turn {index} is numbered {} with document {:?}",
                    turn.number, turn.doc
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
            let edus = edus_of(&turn.doc)
                .ok_or_else(|| format!("turn {index}'s document {:?} is missing", turn.doc))?;
            if edus != turn.edus {
                return Err(format!(
                    "turn {index} records {} EDUs; its document has {edus}",
                    turn.edus
                ));
            }
            if turn.summary.turn != turn.number || turn.summary.edus.last >= edus {
                return Err(format!(
                    "turn {index}'s summary is not a span of its own EDUs"
                ));
            }
        }
        Ok(())
    }

    fn check_summary(
        &self,
        picks: &[SummaryPick],
        belongs: impl Fn(&Turn) -> bool,
        what: &str,
        index: usize,
    ) -> Result<(), String> {
        if picks.is_empty() {
            return Err(format!("{what} {index} has an empty summary"));
        }
        for pick in picks {
            let ok = self.turns.get(pick.turn as usize).is_some_and(|t| {
                belongs(t)
                    && pick.edus.first <= pick.edus.last
                    && pick.edus.last < t.edus
                    && pick.bytes[0] < pick.bytes[1]
            });
            if !ok {
                return Err(format!(
                    "{what} {index}'s summary names turn {} EDUs {}, not a span of one of its turns",
                    pick.turn, pick.edus
                ));
            }
        }
        Ok(())
    }
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
    let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        mean.iter_mut().for_each(|x| *x /= norm);
    }
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
