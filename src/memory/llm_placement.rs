//! Context-Agent's placement decision asked of a chat model, for
//! [`Placement::Llm`] turns whose similarities leave the decision in doubt
//! ([`crate::memory::placement::Decision::in_doubt`]): the model sees the
//! topics (each by its latest turn), the recent turns of the current
//! branch, the turn the similarities would fork at, and the new turn, and
//! answers in Context-Agent's format: stay, switch to topic N, new topic,
//! or fork after turn N. The answer is checked against the dialogue (the
//! topic or turn must exist; a switch must leave the current topic).

use serde::Deserialize;

use crate::compute::chat::{ChatError, ChatModel, ChatRequest, ask_one, clip, parse_reply};
use crate::memory::placement::Placement;
use crate::model::cost::LlmCost;
use crate::model::dialogue::Dialogue;

/// Times a refused decision is asked again before the rules decide.
pub const RETRIES: u32 = 2;
/// Recent turns of the current branch shown.
pub const RECENT_TURNS: usize = 4;
/// Characters of one turn shown; longer ones are cut with `…`.
pub const TURN_CHARS: usize = 300;
/// Most topics shown: the current one, the most similar other, and the
/// most recently active others.
pub const TOPICS_SHOWN: usize = 8;

const SYSTEM: &str = "You place a new turn in a dialogue tree: topics hold branches of turns. \
Reply with JSON only: {\"decision\": D, \"target\": N}. D is \"stay\" (the new turn follows the \
current turn), \"switch\" (it returns to topic N), \"new_topic\" (it starts a new topic) or \
\"fork\" (it starts a new branch after turn N). N is -1 for stay and new_topic.";

#[derive(Deserialize)]
struct Reply {
    decision: String,
    target: i64,
}

/// What the prompt shows of the dialogue.
pub struct Shown<'a> {
    /// Topics shown, each with its latest turn's text.
    pub topics: Vec<(u32, String)>,
    /// The recent turns of the current branch, oldest first: (number, text).
    pub recent: Vec<(u32, String)>,
    /// The turn the similarities would fork at, with its text.
    pub fork_candidate: Option<(u32, String)>,
    /// The new turn's text.
    pub new_turn: &'a str,
}

/// The topics the prompt shows, in topic order: the current one, the most
/// similar other (`best_other`, from the similarities), then the most
/// recently active others, at most [`TOPICS_SHOWN`].
pub fn topics_shown(dialogue: &Dialogue, best_other: Option<(u32, f32)>) -> Vec<u32> {
    let mut chosen = vec![dialogue.current_turn().topic];
    chosen.extend(best_other.map(|(topic, _)| topic));
    let mut by_recency: Vec<_> = dialogue.topics.iter().collect();
    by_recency.sort_by_key(|t| std::cmp::Reverse(t.last_turn));
    for topic in by_recency {
        if chosen.len() >= TOPICS_SHOWN {
            break;
        }
        if !chosen.contains(&topic.id) {
            chosen.push(topic.id);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// `text` as the prompt shows a turn.
fn line(text: &str) -> String {
    clip(text, TURN_CHARS)
}

/// Asks where the new turn goes; `None` when the replies stayed invalid.
pub fn decide(
    chat: &dyn ChatModel,
    dialogue: &Dialogue,
    shown: &Shown<'_>,
) -> std::result::Result<(Option<Placement>, LlmCost), ChatError> {
    let current = dialogue.current_turn();
    let mut user = String::from("Topics:\n");
    for (topic, text) in &shown.topics {
        user.push_str(&format!("[topic {topic}] latest turn: {}\n", line(text)));
    }
    user.push_str(&format!(
        "\nCurrent topic: {}. Recent turns of the current branch:\n",
        current.topic
    ));
    for (number, text) in &shown.recent {
        user.push_str(&format!("[turn {number}] {}\n", line(text)));
    }
    if let Some((number, text)) = &shown.fork_candidate {
        user.push_str(&format!(
            "\nAn earlier turn it may follow instead: [turn {number}] {}\n",
            line(text)
        ));
    }
    user.push_str(&format!("\nNew turn: {}\n", line(shown.new_turn)));
    let most = dialogue.turns.len().max(dialogue.topics.len()) as i64;
    let properties = serde_json::json!({
        "decision": {"type": "string", "enum": ["stay", "switch", "new_topic", "fork"]},
        "target": {"type": "integer", "minimum": -1, "maximum": most}
    });
    let request = ChatRequest::for_object(SYSTEM, user, "placement", properties, 40);
    ask_one(chat, request, RETRIES, |content| check(content, dialogue))
}

/// Reads a decision that names an existing topic or turn where it needs one.
fn check(content: &str, dialogue: &Dialogue) -> std::result::Result<Placement, String> {
    let reply: Reply = parse_reply(content)?;
    let current = dialogue.current_turn().topic;
    let target = u32::try_from(reply.target).ok();
    match (reply.decision.as_str(), target) {
        ("stay", _) => Ok(Placement::Continue),
        ("new_topic", _) => Ok(Placement::NewTopic),
        ("switch", Some(topic)) if topic == current => Err(format!(
            "topic {topic} is the current topic; answer stay to remain on it"
        )),
        ("switch", Some(topic)) if (topic as usize) < dialogue.topics.len() => {
            Ok(Placement::Topic(topic))
        }
        ("switch", _) => Err(format!(
            "switch needs the number of another topic (0 to {})",
            dialogue.topics.len().saturating_sub(1)
        )),
        ("fork", Some(turn)) if (turn as usize) < dialogue.turns.len() => Ok(Placement::Fork(turn)),
        ("fork", _) => Err(format!(
            "fork needs the number of an earlier turn (0 to {})",
            dialogue.turns.len().saturating_sub(1)
        )),
        (other, _) => Err(format!("{other:?} is not stay, switch, new_topic or fork")),
    }
}
