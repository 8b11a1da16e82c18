//! The context for a session's next turn (Context-Agent's context
//! construction): the **full text of the active path** (the active topic's
//! first turn down to the current turn) plus the **stored summaries** of
//! the active topic's other branches and of the other topics. Every item
//! carries coordinates into a turn document, so the text is exact source
//! text.
//!
//! Under a budget that cannot hold it all, the most recent path turns are
//! kept first (a run ending at the current turn), then branch summaries,
//! then topic summaries (each most recent first); the budget is never
//! exceeded.

use std::collections::HashSet;

use crate::error::Result;
use crate::model::dialogue::{Dialogue, Role, SummaryPick};

/// What a context item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextKind {
    /// A whole turn of the active path.
    PathTurn,
    /// A summary pick of another branch of the active topic (not the
    /// current turn's branch; a parent branch lies partly on the active
    /// path, so only its picks of turns off the path are used).
    BranchSummary,
    /// A summary pick of another topic.
    TopicSummary,
}

/// One piece of context with its coordinates.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContextItem {
    /// What it is.
    pub kind: ContextKind,
    /// The turn it comes from.
    pub turn: u32,
    /// That turn's role.
    pub role: Role,
    /// That turn's document id.
    pub doc: String,
    /// The topic it stands for (the turn's topic, or the summarised topic).
    pub topic: u32,
    /// The branch it stands for (the turn's branch, or the summarised branch).
    pub branch: u32,
    /// Closed EDU span `[first, last]` in the document.
    pub edus: [u32; 2],
    /// Byte range `[start, end)` in the document's text.
    pub bytes: [u32; 2],
    /// o200k_base tokens of exactly `text`.
    pub tokens: u64,
    /// Exactly the document's `text[bytes]`.
    pub text: String,
}

/// The context for the next turn, as [`crate::Db::session_context`] builds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionContext {
    /// The session id.
    pub session: String,
    /// The current turn.
    pub current: u32,
    /// Items: topic summaries (by topic), branch summaries (by branch),
    /// then path turns in order.
    pub items: Vec<ContextItem>,
    /// Tokens of all items.
    pub tokens_used: u64,
    /// The budget given.
    pub budget: u64,
    /// Tokens the whole history (every turn in full) would cost.
    pub history_tokens: u64,
    /// Turns on the active path.
    pub path_turns: u32,
    /// Path turns left out for the budget (the oldest ones).
    pub path_turns_dropped: u32,
}

/// A candidate item before its text is read.
struct Candidate {
    kind: ContextKind,
    turn: u32,
    topic: u32,
    branch: u32,
    edus: [u32; 2],
    bytes: [u32; 2],
    tokens: u64,
}

/// Builds the context of `dialogue` under `budget` tokens; `text_of(turn,
/// bytes)` reads exactly `text[bytes]` of a turn's stored text. Every
/// item's tokens are its turn's or pick's, counted on exactly that text
/// when the turn was appended, so the budget holds for the text returned.
pub(crate) fn build(
    dialogue: &Dialogue,
    budget: u64,
    text_of: &mut dyn FnMut(u32, [u32; 2]) -> Result<String>,
) -> Result<SessionContext> {
    let current = dialogue.current_turn();
    let path = dialogue.active_path();
    let on_path: HashSet<u32> = path.iter().copied().collect();
    let mut used = 0u64;
    // Path turns, most recent first, while they fit (a contiguous run).
    let mut path_items: Vec<Candidate> = Vec::new();
    for &number in path.iter().rev() {
        let turn = &dialogue.turns[number as usize];
        if used + turn.tokens > budget {
            break;
        }
        used += turn.tokens;
        path_items.push(Candidate {
            kind: ContextKind::PathTurn,
            turn: number,
            topic: turn.topic,
            branch: turn.branch,
            edus: [0, turn.edus.saturating_sub(1)],
            bytes: turn.bytes,
            tokens: turn.tokens,
        });
    }
    path_items.reverse();
    let dropped = (path.len() - path_items.len()) as u32;
    // Summaries: the active topic's other branches, then other topics, most
    // recent first; picks of turns already on the path are left out.
    let mut branch_items: Vec<Candidate> = Vec::new();
    let topic = &dialogue.topics[current.topic as usize];
    let pick = |kind, topic: u32, branch: u32, p: &SummaryPick| Candidate {
        kind,
        turn: p.turn,
        topic,
        branch,
        edus: [p.edus.first, p.edus.last],
        bytes: p.bytes,
        tokens: u64::from(p.tokens),
    };
    for &branch in topic.branches.iter().rev() {
        if branch == current.branch {
            continue;
        }
        let b = &dialogue.branches[branch as usize];
        for p in b.summary.iter().rev() {
            if !on_path.contains(&p.turn) && used + u64::from(p.tokens) <= budget {
                used += u64::from(p.tokens);
                branch_items.push(pick(ContextKind::BranchSummary, b.topic, branch, p));
            }
        }
    }
    let mut topic_items: Vec<Candidate> = Vec::new();
    let mut others: Vec<_> = dialogue
        .topics
        .iter()
        .filter(|t| t.id != current.topic)
        .collect();
    others.sort_by_key(|t| std::cmp::Reverse(t.last_turn));
    for t in others {
        for p in t.summary.iter().rev() {
            if used + u64::from(p.tokens) <= budget {
                used += u64::from(p.tokens);
                let branch = dialogue.turns[p.turn as usize].branch;
                topic_items.push(pick(ContextKind::TopicSummary, t.id, branch, p));
            }
        }
    }
    branch_items.sort_by_key(|c| (c.branch, c.turn));
    topic_items.sort_by_key(|c| (c.topic, c.turn));
    let mut items = Vec::new();
    for candidate in topic_items
        .into_iter()
        .chain(branch_items)
        .chain(path_items)
    {
        let turn = &dialogue.turns[candidate.turn as usize];
        let bytes = candidate.bytes;
        let text = text_of(candidate.turn, bytes)?;
        items.push(ContextItem {
            kind: candidate.kind,
            turn: candidate.turn,
            role: turn.role,
            doc: turn.doc.clone(),
            topic: candidate.topic,
            branch: candidate.branch,
            edus: candidate.edus,
            bytes,
            tokens: candidate.tokens,
            text,
        });
    }
    Ok(SessionContext {
        session: dialogue.id.clone(),
        current: dialogue.current,
        tokens_used: items.iter().map(|i| i.tokens).sum(),
        items,
        budget,
        history_tokens: dialogue.tokens(),
        path_turns: path.len() as u32,
        path_turns_dropped: dropped,
    })
}
