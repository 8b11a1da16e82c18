//! The persisted record of an agent-memory session: its [`Dialogue`]
//! (topics → branches → turns, with extractive summaries and per-topic
//! vector sums), the tree's invariants
//! ([`Dialogue::check_tree`], [`Dialogue::validate`]), and the views
//! callers read ([`SessionView`], [`SessionMeta`]).

use std::fmt;

use rkyv::{Archive, Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::document::Document;
use crate::model::edu::Span;
use crate::model::ids::{is_turn_doc_id, validate_session_id};

/// Most picks one branch or topic summary holds.
pub const MAX_SUMMARY_PICKS: usize = 3;
/// Most turns one session holds: turn numbers are zero-padded to 6 digits.
pub const MAX_TURNS: u32 = 1_000_000;

/// A session's turn document ids in turn order, each with its time
/// (seconds since the Unix epoch) when it has one.
pub type TimedTurns = Vec<(String, Option<i64>)>;

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
    /// Its document's id ([`crate::model::ids::turn_doc_id`]).
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
    /// When it was said, in seconds since the Unix epoch (UTC), when the
    /// caller gave a time ([`crate::memory::TurnInput::at`]).
    pub at: Option<i64>,
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
    /// Extractive summary: its most central turn summaries, by turn. (Its
    /// centroid is summed from its turns' when it grows: store formats 7
    /// and older kept that sum here, over a kilobyte per branch.)
    pub summary: Vec<SummaryPick>,
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

impl Dialogue {
    /// The turn the next one follows by default. Like the methods below,
    /// it expects a dialogue that passed [`Dialogue::check_tree`], as every
    /// one read from a store has.
    pub fn current_turn(&self) -> &Turn {
        &self.turns[self.current as usize]
    }

    /// The turns from the current turn's topic root down to it, in order,
    /// [forgotten](Turn::is_forgotten) ones left out.
    pub fn active_path(&self) -> Vec<u32> {
        let mut path: Vec<u32> = self.said_path_from(self.current).collect();
        path.reverse();
        path
    }

    /// Turn `turn` and its ancestors up to its topic's root, nearest
    /// first, [forgotten](Turn::is_forgotten) ones left out.
    pub fn said_path_from(&self, turn: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors(Some(turn), |&t| self.turns[t as usize].parent)
            .filter(|&t| !self.turns[t as usize].is_forgotten())
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

    /// Checks the dialogue tree's own invariants, without the store (every
    /// dialogue read from a store has passed it; the methods above rely on
    /// it): a valid session id; turns dense from 0, naming their own
    /// documents, with a non-empty byte range and a summary that is an EDU
    /// span inside it (a forgotten turn: none, and an empty summary); the
    /// current turn is the last one; parents precede
    /// children and stay in their topic; every turn is on exactly one
    /// branch, whose turns form a chain from its fork; each topic lists its
    /// branches once each, its root branch (no fork) first and only that
    /// one without a fork, and records its turn count and latest turn;
    /// every branch and topic summary holds 1 to [`MAX_SUMMARY_PICKS`]
    /// picks in turn order, each the summary of one of its turns not
    /// forgotten (none when all of them are).
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
            if turn.number as usize != index || !is_turn_doc_id(&turn.doc, &self.id, turn.number) {
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
            if turn.is_forgotten() {
                if turn.bytes != [0, 0] || turn.tokens != 0 || *pick != forgotten_pick(turn.number)
                {
                    return Err(format!(
                        "forgotten turn {index} keeps bytes {:?}, {} tokens or summary {pick:?}",
                        turn.bytes, turn.tokens
                    ));
                }
                continue;
            }
            if turn.bytes[0] >= turn.bytes[1]
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
    /// EDUs it records (a forgotten turn's does not exist); `edus_of` gives the number of EDUs of a stored
    /// document (`None`: no such document).
    pub fn validate(&self, edus_of: &dyn Fn(&str) -> Option<u32>) -> Result<(), String> {
        self.check_tree()?;
        for turn in &self.turns {
            if turn.is_forgotten() {
                if edus_of(&turn.doc).is_some() {
                    return Err(format!(
                        "forgotten turn {}'s document {:?} is still stored",
                        turn.number, turn.doc
                    ));
                }
                continue;
            }
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
    /// [`MAX_SUMMARY_PICKS`] picks in increasing turn order, each
    /// the stored summary of a turn that `belongs` and is not forgotten;
    /// none when every such turn is forgotten.
    fn check_summary(
        &self,
        picks: &[SummaryPick],
        belongs: impl Fn(&Turn) -> bool,
        what: &str,
        index: usize,
    ) -> Result<(), String> {
        let said = self.turns.iter().any(|t| belongs(t) && !t.is_forgotten());
        if !said && picks.is_empty() {
            return Ok(());
        }
        if picks.is_empty() || picks.len() > MAX_SUMMARY_PICKS {
            return Err(format!(
                "{what} {index}'s summary has {} picks, not 1 to {}",
                picks.len(),
                MAX_SUMMARY_PICKS
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
                .is_some_and(|t| belongs(t) && !t.is_forgotten() && t.summary == *pick);
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

/// The summary a forgotten turn keeps: an empty span of no text.
fn forgotten_pick(turn: u32) -> SummaryPick {
    SummaryPick {
        turn,
        edus: Span::new(0, 0),
        bytes: [0, 0],
        tokens: 0,
    }
}

impl Turn {
    /// Whether the turn was forgotten ([`crate::Db::forget_turn`]): it keeps
    /// its place in the tree (number, role, time, parent, topic, branch),
    /// while its document is removed and it records no EDUs, bytes or
    /// tokens.
    pub fn is_forgotten(&self) -> bool {
        self.edus == 0
    }

    /// Forgets the turn's text: no EDUs, bytes or tokens are recorded from
    /// now on (its document is the caller's to remove).
    pub fn forget(&mut self) {
        self.edus = 0;
        self.bytes = [0, 0];
        self.tokens = 0;
        self.summary = forgotten_pick(self.number);
    }

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
        let count = |bytes| span_text(&self.doc, &doc.text, bytes).map(crate::model::tokens::count);
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
pub fn span_text<'t>(doc: &str, text: &'t str, bytes: [u32; 2]) -> Result<&'t str> {
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
    /// When it was said (RFC 3339, UTC), if known.
    #[serde(serialize_with = "crate::model::time::serialize_at")]
    pub at: Option<i64>,
    /// Its tokens.
    pub tokens: u64,
    /// It is the current turn.
    pub current: bool,
    /// Its summary EDU span with text; `None` for a forgotten turn.
    pub summary: Option<SummaryText>,
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
