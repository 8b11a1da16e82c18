//! The answer step: the model answers from the useful items only and cites
//! them by number; the citations become edudb coordinates.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::ask::judge::{RETRIES, shown};
use crate::compute::chat::{ChatError, ChatModel, ChatRequest, ask_one, parse_reply};
use crate::model::cost::LlmCost;
use crate::query::Item;

/// Most characters of an answer.
pub const ANSWER_CHARS: usize = 2_000;

const SYSTEM: &str = "You answer a question from the given passages only. The user gives the \
question and the passages, each after its number in brackets. Reply with JSON only: \
{\"answer\": \"...\", \"citations\": [...]}: a short answer, and the numbers of the passages it \
uses. If the passages do not answer the question, say so and cite nothing.";

/// The model's answer and the numbers of the items it cites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The answer's text.
    pub text: String,
    /// Numbers (as shown) of the cited items, ascending.
    pub citations: Vec<usize>,
}

#[derive(Deserialize)]
struct Reply {
    answer: String,
    citations: Vec<i64>,
}

/// Asks for the answer from `evidence` (each with the number it was shown
/// under). `None` when the replies stayed invalid.
pub fn answer(
    chat: &dyn ChatModel,
    question: &str,
    evidence: &[(usize, &Item)],
) -> Result<(Option<Answer>, LlmCost), ChatError> {
    let numbers: BTreeSet<usize> = evidence.iter().map(|(n, _)| *n).collect();
    let mut user = format!("Question: {question}\n\nPassages:\n");
    for (number, item) in evidence {
        user.push_str(&shown(*number, item));
    }
    let properties = serde_json::json!({
        "answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_CHARS},
        "citations": {
            "type": "array",
            "maxItems": evidence.len(),
            "items": {"type": "integer", "enum": numbers.iter().collect::<Vec<_>>()}
        }
    });
    let request = ChatRequest::for_object(SYSTEM, user, "answer", properties, 600);
    ask_one(chat, request, RETRIES, |content| check(content, &numbers))
}

/// Reads an answer whose citations are among `numbers`.
fn check(content: &str, numbers: &BTreeSet<usize>) -> Result<Answer, String> {
    let reply: Reply = parse_reply(content)?;
    let text = reply.answer.trim();
    if text.is_empty() {
        return Err("the answer is empty".into());
    }
    if text.chars().count() > ANSWER_CHARS {
        return Err(format!(
            "the answer is longer than {ANSWER_CHARS} characters"
        ));
    }
    let mut citations = BTreeSet::new();
    for n in reply.citations {
        match usize::try_from(n).ok().filter(|n| numbers.contains(n)) {
            Some(n) => citations.insert(n),
            None => return Err(format!("passage {n} was not given")),
        };
    }
    Ok(Answer {
        text: text.to_owned(),
        citations: citations.into_iter().collect(),
    })
}
