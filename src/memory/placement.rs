//! Where a new turn goes: Context-Agent's topic and branch decisions,
//! model-free, from the store's embedder.
//!
//! [`Placement::Auto`] decides in two steps, each recorded in the
//! [`Decision`] with the similarities it used:
//!
//! 1. **Topic.** The cosine of the new turn's vector (the unit mean of its
//!    EDU vectors) with each topic's centroid; for the active topic, the
//!    larger of that and the cosine with the current turn (a reply
//!    resembles what it answers more than the topic's average). Switch to
//!    the most similar other topic when that is at least
//!    [`SWITCH_THRESHOLD`] and either the active topic is under
//!    [`CONTINUE_THRESHOLD`] or the other beats it by [`SWITCH_MARGIN`];
//!    else stay on the active topic when it is at least
//!    [`CONTINUE_THRESHOLD`] or the turn opens as a continuation (a
//!    connective or a pronoun pointing back: "Then …", "It …"; see
//!    [`opens_as_continuation`]); else start a new topic.
//! 2. **Fork point.** Inside the chosen topic, the turn most similar to
//!    the new one outside the thread it would continue (the leaf, the
//!    current turn or the topic's latest turn after a switch, and the
//!    [`THREAD_TURNS`]` - 1` turns before it on its path). A new branch
//!    forks there only when it beats the thread's best similarity by
//!    [`FORK_MARGIN`], stands out among all of the topic's similarities
//!    by [`FORK_OUTLIER`] standard deviations (the best of hundreds of
//!    noisy cosines is high by chance: LoCoMo's 509-turn conversation
//!    forked 279 branches without it), and the turn does not open as a
//!    continuation; else the turn continues the leaf's branch.
//!
//! The explicit placements skip the decisions they name; unknown topics and
//! turns are errors, found by one check before the turn is analysed.

use std::fmt;

use crate::compute::vector::{cosine, dot};
use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::model::dialogue::Dialogue;

/// Where the caller wants a new turn to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Decided from similarities (see [`crate::memory::placement`]).
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
    /// As [`Placement::Auto`], but a decision the similarities leave in
    /// doubt (within [`AMBIGUITY_MARGIN`] of a threshold) is asked of the
    /// store's chat model ([`crate::memory::llm_placement`]).
    Llm,
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
            Placement::Llm => f.write_str("llm"),
        }
    }
}

/// Stay on the active topic when the new turn's cosine to its centroid is
/// at least this. A heuristic for the built-in hashed n-gram embedder,
/// whose cosines between unrelated English turns sit around 0.03–0.12
/// (shared function words and character n-grams) and between turns on one
/// subject around 0.15–0.35 (measured on the travel dialogue of
/// `tests/it/memory/`); a semantic embedder may want other values.
pub const CONTINUE_THRESHOLD: f32 = 0.15;
/// Switch to another topic only when the new turn's cosine to its centroid
/// is at least this. A heuristic for the hashed embedder, like
/// [`CONTINUE_THRESHOLD`]: a switch needs clearer evidence than staying.
pub const SWITCH_THRESHOLD: f32 = 0.2;
/// Switch away from an active topic that is similar enough to stay on
/// only when another topic is this much more similar. A heuristic for the
/// hashed embedder: a turn shares some words with most topics of a
/// conversation, so only a clear lead counts.
pub const SWITCH_MARGIN: f32 = 0.15;
/// Fork at an earlier turn only when it is this much more similar to the
/// new turn than the leaf is. A heuristic for the hashed embedder: small
/// differences in its cosines are noise from shared words, and a question
/// resembles the previous question more than the answer between them.
pub const FORK_MARGIN: f32 = 0.2;

/// Turns at the end of a thread (the leaf and those just before it on its
/// path) that a new turn continues: a reply may answer the turn before the
/// last one as well, so its similarity to any of them counts as
/// continuing, and none of them is a fork point.
pub const THREAD_TURNS: usize = 3;
/// A fork point's similarity must lie this many standard deviations above
/// the mean of the topic's turns' similarities ([`stands_out`]).
pub const FORK_OUTLIER: f32 = 2.5;
/// First words of a turn that continues what came before: connectives,
/// pronouns pointing back, acknowledgements (lowercase).
pub const CONTINUATION_OPENERS: &[&str] = &[
    "then",
    "and",
    "but",
    "so",
    "also",
    "afterwards",
    "next",
    "yes",
    "yeah",
    "no",
    "ok",
    "okay",
    "sure",
    "thanks",
    "thank",
    "it",
    "it's",
    "that",
    "that's",
    "this",
    "those",
    "these",
    "they",
    "them",
    "there",
    "he",
    "she",
    "his",
    "her",
    "their",
    "which",
];

/// A similarity this close to the threshold it is compared with leaves
/// the decision in doubt, which [`Placement::Llm`] asks the chat model to
/// settle.
pub const AMBIGUITY_MARGIN: f32 = 0.05;

/// What settled a placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The caller's explicit placement, or the similarities' rules.
    #[default]
    Rule,
    /// The chat model ([`Placement::Llm`], a decision in doubt).
    Model,
    /// The rules, after the chat model's replies stayed invalid.
    Fallback,
}

/// How the topic was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TopicChoice {
    /// The session's first turn starts topic 0.
    First,
    /// Stayed on the active topic.
    Stay,
    /// Switched to another existing topic.
    Switch,
    /// Started a new topic.
    New,
}

/// How the branch was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchChoice {
    /// Continued the leaf's branch.
    Continue,
    /// Started a new branch forking at an earlier turn.
    Fork,
    /// The first branch of a new topic.
    NewTopic,
}

/// The decision made for a turn, and why.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Decision {
    /// What the caller asked for.
    pub requested: Placement,
    /// How the topic was chosen.
    pub topic: TopicChoice,
    /// How the branch was chosen.
    pub branch: BranchChoice,
    /// Similarity to the active topic (Auto with a previous turn): the
    /// larger of the cosines to its centroid and to the current turn.
    pub active_topic_similarity: Option<f32>,
    /// The most similar other topic and its cosine (Auto, when there is one).
    pub best_other_topic: Option<(u32, f32)>,
    /// The chosen topic's turn most similar to the new turn and its cosine (Auto).
    pub fork_candidate: Option<(u32, f32)>,
    /// Cosine of the thread the turn would continue (Auto): the largest
    /// over its leaf and the turns just before it ([`THREAD_TURNS`]).
    pub leaf_similarity: Option<f32>,
    /// What settled it.
    pub decided_by: DecidedBy,
    /// What asking the chat model cost (zero unless it was asked).
    pub llm: LlmCost,
}

impl Decision {
    /// Whether a similarity lies within [`AMBIGUITY_MARGIN`] of a threshold
    /// it was compared with (Auto and Llm decisions with a previous turn).
    pub fn in_doubt(&self) -> bool {
        let near = |a: f32, b: f32| (a - b).abs() < AMBIGUITY_MARGIN;
        let Some(active) = self.active_topic_similarity else {
            return false;
        };
        let topic = near(active, CONTINUE_THRESHOLD)
            || self.best_other_topic.is_some_and(|(_, other)| {
                near(other, SWITCH_THRESHOLD) || near(other, active + SWITCH_MARGIN)
            });
        let fork = match (self.fork_candidate, self.leaf_similarity) {
            (Some((_, candidate)), Some(leaf)) => near(candidate, leaf + FORK_MARGIN),
            _ => false,
        };
        topic || fork
    }
}

/// Where the new turn goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    /// The topic (`None`: a new one).
    pub topic: Option<u32>,
    /// The branch (`None`: a new one).
    pub branch: Option<u32>,
    /// The parent turn.
    pub parent: Option<u32>,
    /// Why.
    pub decision: Decision,
}

/// A placement whose target exists in its session, from [`check`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked(Placement);

/// Checks that `placement`'s target exists: [`Placement::Topic`] and
/// [`Placement::Fork`] need an existing session (`dialogue`; `None` for a
/// new session named `session`) with that topic or turn. Errors name the
/// unknown session, topic or turn. The one check of targets: [`resolve`]
/// takes only a checked placement.
pub(crate) fn check(
    session: &str,
    dialogue: Option<&Dialogue>,
    placement: Placement,
) -> Result<Checked> {
    match (dialogue, placement) {
        (None, Placement::Topic(_) | Placement::Fork(_)) => {
            return Err(Error::NoSuchSession(session.to_owned()));
        }
        (Some(d), Placement::Topic(topic)) => {
            d.topic(topic)?;
        }
        (Some(d), Placement::Fork(turn)) => {
            d.turn(turn)?;
        }
        _ => {}
    }
    Ok(Checked(placement))
}

/// Whether a similarity `s` stands out among all of a topic's
/// `similarities` (at least [`FORK_OUTLIER`] standard deviations above
/// their mean): the best of hundreds of noisy cosines is high by chance,
/// and only a clear outlier is evidence of a return to an earlier point.
fn stands_out(s: f32, similarities: &[f32]) -> bool {
    let n = similarities.len().max(1) as f32;
    let mean = similarities.iter().sum::<f32>() / n;
    let variance = similarities.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n;
    s >= mean + FORK_OUTLIER * variance.sqrt()
}

/// Whether `text` opens as a continuation of what came before: its first
/// word (after a speaker's label such as `Ann:`) is a connective, a
/// pronoun pointing back or a short acknowledgement
/// ([`CONTINUATION_OPENERS`]).
pub(crate) fn opens_as_continuation(text: &str) -> bool {
    let text = text.trim_start();
    let unlabelled = match text.split_once(':') {
        Some((label, rest)) if label.split_whitespace().count() <= 3 && !label.is_empty() => rest,
        _ => text,
    };
    let first: String = unlabelled
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphabetic() || *c == '\'')
        .flat_map(char::to_lowercase)
        .collect();
    CONTINUATION_OPENERS.contains(&first.as_str())
}

/// Resolves `placement`, checked against `dialogue` (`None` for a new
/// session), for a turn with unit vector `vector`; `cue` says that its
/// text [opens as a continuation](opens_as_continuation), which keeps it
/// on the active topic and its branch unless another topic clearly
/// matches. `turn_vector` gives an existing turn's unit vector (zero when
/// it has none), so a turn's cosine is a dot product.
pub(crate) fn resolve(
    dialogue: Option<&Dialogue>,
    Checked(placement): Checked,
    vector: &[f32],
    cue: bool,
    turn_vector: &mut dyn FnMut(u32) -> Result<std::sync::Arc<Vec<f32>>>,
) -> Result<Resolved> {
    let mut decision = Decision {
        requested: placement,
        topic: TopicChoice::First,
        branch: BranchChoice::NewTopic,
        active_topic_similarity: None,
        best_other_topic: None,
        fork_candidate: None,
        leaf_similarity: None,
        decided_by: DecidedBy::Rule,
        llm: LlmCost::default(),
    };
    let new_topic = |decision: Decision| Resolved {
        topic: None,
        branch: None,
        parent: None,
        decision,
    };
    // A new session: every checked placement starts its first topic.
    let Some(dialogue) = dialogue else {
        return Ok(new_topic(decision));
    };
    let current = dialogue.current_turn();
    let continue_at = |leaf: u32, topic: TopicChoice, decision: Decision| {
        let turn = &dialogue.turns[leaf as usize];
        Resolved {
            topic: Some(turn.topic),
            branch: Some(turn.branch),
            parent: Some(leaf),
            decision: Decision {
                topic,
                branch: BranchChoice::Continue,
                ..decision
            },
        }
    };
    let fork_at = |turn: u32, topic: TopicChoice, decision: Decision| Resolved {
        topic: Some(dialogue.turns[turn as usize].topic),
        branch: None,
        parent: Some(turn),
        decision: Decision {
            topic,
            branch: BranchChoice::Fork,
            ..decision
        },
    };
    // An explicit placement into `topic` stays on the active topic or
    // switches to another.
    let stay_or_switch = |topic: u32| {
        if topic == current.topic {
            TopicChoice::Stay
        } else {
            TopicChoice::Switch
        }
    };
    match placement {
        Placement::Continue => Ok(continue_at(current.number, TopicChoice::Stay, decision)),
        Placement::NewTopic => Ok(new_topic(Decision {
            topic: TopicChoice::New,
            ..decision
        })),
        Placement::Topic(topic) => {
            let leaf = dialogue.topics[topic as usize].last_turn;
            Ok(continue_at(leaf, stay_or_switch(topic), decision))
        }
        Placement::Fork(turn) => {
            let topic = dialogue.turns[turn as usize].topic;
            Ok(fork_at(turn, stay_or_switch(topic), decision))
        }
        Placement::Auto | Placement::Llm => {
            let active = current.topic;
            let similarity =
                |topic: u32| cosine(vector, &dialogue.topics[topic as usize].vector_sum);
            // The latest turn said on the active path (the current one
            // unless it was forgotten).
            let current_similarity = match dialogue.said_path_from(current.number).next() {
                Some(latest) => dot(&turn_vector(latest)?, vector),
                None => 0.0,
            };
            let active_similarity = similarity(active).max(current_similarity);
            decision.active_topic_similarity = Some(active_similarity);
            decision.best_other_topic = dialogue
                .topics
                .iter()
                .filter(|t| t.id != active)
                .map(|t| (t.id, similarity(t.id)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let stay = active_similarity >= CONTINUE_THRESHOLD || cue;
            let (topic, choice, leaf) = match decision.best_other_topic {
                Some((other, s))
                    if s >= SWITCH_THRESHOLD
                        && (!stay || s >= active_similarity + SWITCH_MARGIN) =>
                {
                    (
                        other,
                        TopicChoice::Switch,
                        dialogue.topics[other as usize].last_turn,
                    )
                }
                _ if stay => (active, TopicChoice::Stay, current.number),
                _ => {
                    return Ok(new_topic(Decision {
                        topic: TopicChoice::New,
                        ..decision
                    }));
                }
            };
            // The thread the turn would continue: the leaf and the turns
            // just before it on its path (those said).
            let thread: Vec<u32> = dialogue.said_path_from(leaf).take(THREAD_TURNS).collect();
            let mut best: Option<(u32, f32)> = None;
            let mut thread_similarity = 0.0f32;
            let mut similarities = Vec::new();
            let said = |t: &&crate::model::dialogue::Turn| t.topic == topic && !t.is_forgotten();
            for turn in dialogue.turns.iter().filter(said) {
                let s = dot(&turn_vector(turn.number)?, vector);
                similarities.push(s);
                if thread.contains(&turn.number) {
                    thread_similarity = thread_similarity.max(s);
                } else if best.is_none_or(|(_, b)| s > b) {
                    best = Some((turn.number, s));
                }
            }
            decision.fork_candidate = best;
            decision.leaf_similarity = Some(thread_similarity);
            match best {
                Some((turn, s))
                    if !cue
                        && s >= thread_similarity + FORK_MARGIN
                        && stands_out(s, &similarities) =>
                {
                    Ok(fork_at(turn, choice, decision))
                }
                _ => Ok(continue_at(leaf, choice, decision)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_in_doubt_near_any_threshold_it_compared() {
        let decision = |active: f32, other: Option<f32>, fork: Option<(f32, f32)>| Decision {
            requested: Placement::Llm,
            topic: TopicChoice::Stay,
            branch: BranchChoice::Continue,
            active_topic_similarity: Some(active),
            best_other_topic: other.map(|s| (1, s)),
            fork_candidate: fork.map(|(s, _)| (0, s)),
            leaf_similarity: fork.map(|(_, leaf)| leaf),
            decided_by: DecidedBy::Rule,
            llm: LlmCost::default(),
        };
        // Clear cases: far from every threshold.
        assert!(!decision(0.6, Some(0.05), Some((0.3, 0.3))).in_doubt());
        assert!(!decision(0.02, None, None).in_doubt());
        // Near staying, near switching, near a switch's margin, near forking.
        assert!(decision(CONTINUE_THRESHOLD + 0.01, None, None).in_doubt());
        assert!(decision(0.6, Some(SWITCH_THRESHOLD - 0.01), None).in_doubt());
        assert!(decision(0.4, Some(0.4 + SWITCH_MARGIN + 0.02), None).in_doubt());
        assert!(decision(0.6, None, Some((0.3 + FORK_MARGIN - 0.03, 0.3))).in_doubt());
        // The first turn of a session compares nothing.
        let first = Decision {
            active_topic_similarity: None,
            ..decision(0.15, None, None)
        };
        assert!(!first.in_doubt());
    }

    #[test]
    fn openers_that_point_back_mark_a_continuation() {
        for text in [
            "Then we take the train to Otaru.",
            "  and after that?",
            "Ann: That sounds lovely!",
            "Dr. Li Wei: It's late.",
            "Thanks!",
        ] {
            assert!(opens_as_continuation(text), "{text}");
        }
        for text in [
            "We fly to Sapporo on Monday.",
            "Thenceforth we walk.",
            "What about Thailand?",
            "",
        ] {
            assert!(!opens_as_continuation(text), "{text}");
        }
    }

    #[test]
    fn only_an_outlier_among_a_topics_similarities_stands_out() {
        let noisy: Vec<f32> = (0..200)
            .map(|i| 0.2 + 0.1 * ((i * 37 % 11) as f32 / 10.0))
            .collect();
        let best = noisy.iter().copied().fold(0.0, f32::max);
        assert!(!stands_out(best, &noisy), "the best of the noise");
        assert!(stands_out(0.9, &noisy));
        assert!(stands_out(0.5, &[0.5]), "one turn: nothing to compare with");
    }

    #[test]
    fn placements_read_in_words() {
        let words: Vec<String> = [
            Placement::Auto,
            Placement::Continue,
            Placement::NewTopic,
            Placement::Topic(2),
            Placement::Fork(3),
            Placement::Llm,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            words,
            [
                "auto",
                "continue",
                "new topic",
                "topic 2",
                "fork at turn 3",
                "llm"
            ]
        );
    }
}
