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
//!
//! **With a query** (what the user just said), the context answers from
//! the whole history instead (`build_for_query`): the current turn and
//! the path turns before it within [`RECENT_SHARE`] of the budget; then
//! whole turns by claim, a turn's claim being its relevance to the query or
//! [`NEIGHBOUR_WEIGHT`] of a neighbour's (the turns said just before and
//! after a hit come with it, so it can be understood): the best claim
//! whenever it fits, others within [`WHOLE_TURN_SHARE`] of the budget;
//! then the summaries of the topics the whole relevant turns come from,
//! within [`SUMMARY_SHARE`]; then an excerpt of every further turn by claim
//! (its EDU that best matches the query's words, else its summary pick),
//! so the context reaches many turns rather than a few; what budget is left
//! goes to more whole turns, then to the path turns not yet in (most recent
//! first: a path turn that fits is never left out) and the summaries the
//! plain context would hold. Items are grouped by topic (topics in order
//! of their first item, the active topic last) and chronological within
//! one.

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
    /// A whole turn relevant to the query, or the neighbour of one.
    RelevantTurn,
    /// Part of a turn relevant to the query, or of the neighbour of one,
    /// beyond the whole turns' share: its EDU that best matches the query's
    /// words, else its summary pick (a turn whose excerpt is all of it is a
    /// [`ContextKind::RelevantTurn`]).
    RelevantExcerpt,
}

/// Share of a query-aware context's budget the most recent path turns
/// may take (tuned on the LoCoMo dev set; docs/benchmarks.md).
pub const RECENT_SHARE: f64 = 0.05;
/// A turn's claim to a place beside a relevant neighbour, as a share of
/// that neighbour's relevance (tuned on the LoCoMo dev set).
pub const NEIGHBOUR_WEIGHT: f32 = 0.7;
/// Weight of vector similarity against BM25 in a turn's relevance when the
/// store's embedder is semantic (tuned on the LoCoMo dev set with
/// all-MiniLM-L6-v2; the hashed embedder's vectors are left out).
pub const VECTOR_WEIGHT: f32 = 0.5;
/// Cosine below which a turn gets no vector relevance (tuned with
/// all-MiniLM-L6-v2, whose cosines between unrelated texts sit around
/// 0–0.2).
pub const VECTOR_FLOOR: f32 = 0.2;
/// Share of a query-aware context's budget the summaries of the relevant
/// turns' topics may take (tuned on the LoCoMo dev set).
pub const SUMMARY_SHARE: f64 = 0.05;
/// Share of a query-aware context's budget (path turns included) up to
/// which the turns with the best claims (relevant turns and their
/// neighbours) come whole, before further ones get an excerpt each; the
/// best claim comes whole whenever it fits (tuned on the LoCoMo dev set).
pub const WHOLE_TURN_SHARE: f64 = 0.2;
/// Fewer tokens left than this end the excerpts: few clauses are shorter.
pub const MIN_EXCERPT_TOKENS: u64 = 4;

/// Where a relevant turn's excerpt lies in its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Excerpt {
    /// Closed EDU span `[first, last]`.
    pub edus: [u32; 2],
    /// Byte range `[start, end)` in the turn's text.
    pub bytes: [u32; 2],
    /// o200k_base tokens of exactly that text.
    pub tokens: u64,
}

impl Excerpt {
    /// A turn's summary pick as its excerpt.
    pub(crate) fn of_pick(pick: &SummaryPick) -> Excerpt {
        Excerpt {
            edus: [pick.edus.first, pick.edus.last],
            bytes: pick.bytes,
            tokens: u64::from(pick.tokens),
        }
    }
}

/// One piece of context with its coordinates.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ContextItem {
    /// What it is.
    pub kind: ContextKind,
    /// The turn it comes from.
    pub turn: u32,
    /// That turn's role.
    pub role: Role,
    /// When that turn was said (RFC 3339, UTC), if known.
    #[serde(serialize_with = "crate::model::time::serialize_at")]
    pub at: Option<i64>,
    /// The turn's claim: its relevance to the query, or
    /// [`NEIGHBOUR_WEIGHT`] of a neighbour's when that is larger (relevant
    /// turns and excerpts); `None` for other items.
    pub score: Option<f32>,
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
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionContext {
    /// The session id.
    pub session: String,
    /// The current turn.
    pub current: u32,
    /// Items. Without a query: topic summaries (by topic), branch
    /// summaries (by branch), then path turns in order. With one: grouped
    /// by topic (the active topic last), chronological inside a topic.
    pub items: Vec<ContextItem>,
    /// Tokens of all items.
    pub tokens_used: u64,
    /// The budget given.
    pub budget: u64,
    /// Tokens the whole history (every turn in full) would cost.
    pub history_tokens: u64,
    /// Turns on the active path.
    pub path_turns: u32,
    /// Path turns not in the context as whole turns (without a query, the
    /// oldest ones, left out for the budget).
    pub path_turns_dropped: u32,
}

/// A candidate item before its text is read.
struct Candidate {
    kind: ContextKind,
    score: Option<f32>,
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
    let path = dialogue.active_path();
    let mut used = 0u64;
    // Path turns, most recent first, while they fit (a contiguous run).
    let mut path_items: Vec<Candidate> = Vec::new();
    for &number in path.iter().rev() {
        let turn = &dialogue.turns[number as usize];
        if used + turn.tokens > budget {
            break;
        }
        used += turn.tokens;
        path_items.push(whole_turn(dialogue, number, ContextKind::PathTurn, None));
    }
    path_items.reverse();
    // Summaries, in their order of precedence, while they fit.
    let (mut branch_items, mut topic_items): (Vec<Candidate>, Vec<Candidate>) =
        summary_picks(dialogue, &path)
            .filter(|c| {
                let fits = used + c.tokens <= budget;
                used += if fits { c.tokens } else { 0 };
                fits
            })
            .partition(|c| c.kind == ContextKind::BranchSummary);
    branch_items.sort_by_key(|c| (c.branch, c.turn));
    topic_items.sort_by_key(|c| (c.topic, c.turn));
    let candidates = topic_items
        .into_iter()
        .chain(branch_items)
        .chain(path_items);
    finish(dialogue, budget, &path, candidates.collect(), text_of)
}

/// The summary picks a context may hold besides the active path, in order
/// of precedence: the active topic's other branches, then the other
/// topics, most recent first; picks of turns on `path` are left out.
fn summary_picks<'a>(dialogue: &'a Dialogue, path: &[u32]) -> impl Iterator<Item = Candidate> + 'a {
    let current = dialogue.current_turn();
    let on_path: HashSet<u32> = path.iter().copied().collect();
    let topic = &dialogue.topics[current.topic as usize];
    let branches = (topic.branches.iter().rev())
        .filter(move |&&branch| branch != current.branch)
        .flat_map(move |&branch| {
            let b = &dialogue.branches[branch as usize];
            (b.summary.iter().rev())
                .map(move |p| pick(ContextKind::BranchSummary, b.topic, branch, p))
        })
        .filter(move |c| !on_path.contains(&c.turn));
    let mut others: Vec<_> = (dialogue.topics.iter())
        .filter(|t| t.id != current.topic)
        .collect();
    others.sort_by_key(|t| std::cmp::Reverse(t.last_turn));
    let topics = others.into_iter().flat_map(move |t| {
        t.summary.iter().rev().map(move |p| {
            let branch = dialogue.turns[p.turn as usize].branch;
            pick(ContextKind::TopicSummary, t.id, branch, p)
        })
    });
    branches.chain(topics)
}

/// The context items of `candidates` in their order, with their texts;
/// `path` is the active path, whose turns not among the candidates as
/// whole turns are counted as dropped.
fn finish(
    dialogue: &Dialogue,
    budget: u64,
    path: &[u32],
    candidates: Vec<Candidate>,
    text_of: &mut dyn FnMut(u32, [u32; 2]) -> Result<String>,
) -> Result<SessionContext> {
    let whole: HashSet<u32> = candidates
        .iter()
        .filter(|c| matches!(c.kind, ContextKind::PathTurn | ContextKind::RelevantTurn))
        .map(|c| c.turn)
        .collect();
    let path_turns_dropped = path.iter().filter(|t| !whole.contains(t)).count() as u32;
    let mut items = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let turn = &dialogue.turns[candidate.turn as usize];
        let bytes = candidate.bytes;
        let text = text_of(candidate.turn, bytes)?;
        items.push(ContextItem {
            kind: candidate.kind,
            turn: candidate.turn,
            role: turn.role,
            at: turn.at,
            score: candidate.score,
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
        path_turns_dropped,
    })
}

/// A summary pick standing for `topic`'s (or `branch`'s) summary as a
/// candidate item.
fn pick(kind: ContextKind, topic: u32, branch: u32, p: &SummaryPick) -> Candidate {
    part(kind, None, p.turn, topic, branch, Excerpt::of_pick(p))
}

/// Part of turn `turn`, at `excerpt`, as a candidate item standing for
/// `topic` and `branch`.
fn part(
    kind: ContextKind,
    score: Option<f32>,
    turn: u32,
    topic: u32,
    branch: u32,
    excerpt: Excerpt,
) -> Candidate {
    Candidate {
        kind,
        score,
        turn,
        topic,
        branch,
        edus: excerpt.edus,
        bytes: excerpt.bytes,
        tokens: excerpt.tokens,
    }
}

/// A whole turn as a candidate item.
fn whole_turn(
    dialogue: &Dialogue,
    number: u32,
    kind: ContextKind,
    score: Option<f32>,
) -> Candidate {
    let turn = &dialogue.turns[number as usize];
    Candidate {
        kind,
        score,
        turn: number,
        topic: turn.topic,
        branch: turn.branch,
        edus: [0, turn.edus.saturating_sub(1)],
        bytes: turn.bytes,
        tokens: turn.tokens,
    }
}

/// Builds the context of `dialogue` for a query under `budget` tokens
/// (see the module's documentation); `relevance[turn]` is each turn's
/// relevance to the query (0: none), `excerpt_of(turn)` where a turn's
/// excerpt lies, and `text_of` reads a turn's text as for
/// [`build`]. The budget is never exceeded.
pub(crate) fn build_for_query(
    dialogue: &Dialogue,
    budget: u64,
    relevance: &[f32],
    excerpt_of: &mut dyn FnMut(u32) -> Excerpt,
    text_of: &mut dyn FnMut(u32, [u32; 2]) -> Result<String>,
) -> Result<SessionContext> {
    let turns = dialogue.turns.len();
    let mut chosen = vec![false; turns];
    let mut picked: Vec<Candidate> = Vec::new();
    let mut used = 0u64;
    // 1. The most recent path turns, a run ending at the current turn
    // (which is kept whenever it fits the budget at all).
    let path = dialogue.active_path();
    let recent_cap = (budget as f64 * RECENT_SHARE) as u64;
    for &number in path.iter().rev() {
        let tokens = dialogue.turns[number as usize].tokens;
        let cap = if used == 0 { budget } else { recent_cap };
        if used + tokens > cap {
            break;
        }
        used += tokens;
        chosen[number as usize] = true;
        picked.push(whole_turn(dialogue, number, ContextKind::PathTurn, None));
    }
    // 2. Relevant turns and their neighbours, best claim first.
    let relevance_of = |t: usize| relevance.get(t).copied().unwrap_or(0.0);
    let mut claims: Vec<(u32, f32)> = (0..turns)
        .map(|t| {
            let neighbour = [t.checked_sub(1), Some(t + 1)]
                .into_iter()
                .flatten()
                .map(relevance_of)
                .fold(0.0f32, f32::max);
            (t as u32, relevance_of(t).max(NEIGHBOUR_WEIGHT * neighbour))
        })
        .filter(|&(t, claim)| claim > 0.0 && !dialogue.turns[t as usize].is_forgotten())
        .collect();
    claims.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let summary_cap = (budget as f64 * SUMMARY_SHARE) as u64;
    let take_relevant =
        |used: &mut u64, limit: u64, picked: &mut Vec<Candidate>, chosen: &mut [bool]| {
            for &(number, claim) in &claims {
                let tokens = dialogue.turns[number as usize].tokens;
                if !chosen[number as usize] && *used + tokens <= limit {
                    *used += tokens;
                    chosen[number as usize] = true;
                    picked.push(whole_turn(
                        dialogue,
                        number,
                        ContextKind::RelevantTurn,
                        Some(claim),
                    ));
                }
            }
        };
    // The best claim comes whole whenever it fits (as the current turn
    // does); others within the whole turns' share.
    let whole_limit = budget.saturating_sub(summary_cap);
    let best = (claims.iter())
        .find(|&&(t, _)| !chosen[t as usize])
        .map(|&(t, _)| used + dialogue.turns[t as usize].tokens)
        .filter(|&with_best| with_best <= whole_limit);
    let whole_cap = ((budget as f64 * WHOLE_TURN_SHARE) as u64).max(best.unwrap_or(0));
    take_relevant(
        &mut used,
        whole_cap.min(whole_limit),
        &mut picked,
        &mut chosen,
    );
    let summary_limit = used + summary_cap;
    // 3. Summaries of the relevant turns' topics, most relevant topic
    // first, within their share.
    let mut topic_weight = vec![0.0f32; dialogue.topics.len()];
    for candidate in picked
        .iter()
        .filter(|c| c.kind == ContextKind::RelevantTurn)
    {
        topic_weight[candidate.topic as usize] += candidate.score.unwrap_or(0.0);
    }
    let mut topics: Vec<usize> = (0..topic_weight.len())
        .filter(|&t| topic_weight[t] > 0.0)
        .collect();
    topics.sort_by(|&a, &b| topic_weight[b].total_cmp(&topic_weight[a]).then(a.cmp(&b)));
    for topic in topics {
        for p in &dialogue.topics[topic].summary {
            let tokens = u64::from(p.tokens);
            if !chosen[p.turn as usize] && used + tokens <= summary_limit {
                used += tokens;
                // The pick stands for its turn: the turn is not added again.
                chosen[p.turn as usize] = true;
                let branch = dialogue.turns[p.turn as usize].branch;
                picked.push(pick(ContextKind::TopicSummary, topic as u32, branch, p));
            }
        }
    }
    // 4. An excerpt of each further relevant turn or neighbour, best claim
    // first.
    for &(number, claim) in &claims {
        if budget.saturating_sub(used) < MIN_EXCERPT_TOKENS {
            break;
        }
        if chosen[number as usize] {
            continue;
        }
        let excerpt = excerpt_of(number);
        if used + excerpt.tokens <= budget {
            used += excerpt.tokens;
            chosen[number as usize] = true;
            let turn = &dialogue.turns[number as usize];
            // A turn of one EDU is whole in its excerpt.
            let kind = match excerpt.bytes == turn.bytes {
                true => ContextKind::RelevantTurn,
                false => ContextKind::RelevantExcerpt,
            };
            let (topic, branch) = (turn.topic, turn.branch);
            picked.push(part(kind, Some(claim), number, topic, branch, excerpt));
        }
    }
    // 5. What is left goes to more whole turns.
    take_relevant(&mut used, budget, &mut picked, &mut chosen);
    // 6. Then to the path turns not yet in, most recent first (a path turn
    // that fits is never left out, whatever the query matched), and last
    // to the summaries the plain context would hold.
    for &number in path.iter().rev() {
        let tokens = dialogue.turns[number as usize].tokens;
        if !chosen[number as usize] && used + tokens <= budget {
            used += tokens;
            chosen[number as usize] = true;
            picked.push(whole_turn(dialogue, number, ContextKind::PathTurn, None));
        }
    }
    for candidate in summary_picks(dialogue, &path) {
        if !chosen[candidate.turn as usize] && used + candidate.tokens <= budget {
            used += candidate.tokens;
            chosen[candidate.turn as usize] = true;
            picked.push(candidate);
        }
    }
    // Grouped by topic (first item's turn order, the active topic last),
    // chronological inside a topic; a summary before the turns it sits among.
    let active = dialogue.current_turn().topic;
    let mut first_turn = vec![u32::MAX; dialogue.topics.len()];
    for c in &picked {
        let first = &mut first_turn[c.topic as usize];
        *first = (*first).min(c.turn);
    }
    picked.sort_by_key(|c| {
        (
            c.topic == active,
            first_turn[c.topic as usize],
            c.turn,
            c.kind != ContextKind::TopicSummary,
        )
    });
    finish(dialogue, budget, &path, picked, text_of)
}
