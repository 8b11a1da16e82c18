//! Progress control and introspection: after each group of retrieved
//! items the model says which of them help answer the question and whether
//! the evidence gathered so far suffices.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::compute::chat::{ChatError, ChatModel, ChatRequest, ask_one, clip, parse_reply};
use crate::model::cost::LlmCost;
use crate::query::Item;

/// Times a refused judgement is asked again before the step falls back.
pub const RETRIES: u32 = 2;

/// Characters of one item shown to the model; longer ones are cut with `…`.
pub const ITEM_CHARS: usize = 1_200;

const SYSTEM: &str = "You judge whether retrieved passages answer a question. The user gives \
the question, the passages judged useful so far and the new passages, each after its number in \
brackets. Reply with JSON only: {\"relevant\": [...], \"enough\": true or false}: \"relevant\" \
lists the numbers of the new passages that help answer the question, and \"enough\" is true \
only when the useful passages together answer it.";

/// The model's verdict on one group of new items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// Numbers (as shown, from 1) of the new items that help.
    pub relevant: Vec<usize>,
    /// Whether the useful items so far answer the question.
    pub enough: bool,
}

#[derive(Deserialize)]
struct Reply {
    relevant: Vec<i64>,
    enough: bool,
}

/// `item` as the model sees it: `[n] (doc, EDUs a-b) text`.
pub fn shown(number: usize, item: &Item) -> String {
    format!(
        "[{number}] ({}, EDUs {}-{}) {}\n",
        item.doc,
        item.edus[0],
        item.edus[1],
        clip(&item.text, ITEM_CHARS)
    )
}

/// Asks for the verdict on `new` (numbered from `first`), given the
/// question and the `useful` items so far (numbered as shown before).
/// `None` when the replies stayed invalid.
pub fn judge(
    chat: &dyn ChatModel,
    question: &str,
    useful: &[(usize, &Item)],
    new: &[Item],
    first: usize,
) -> Result<(Option<Judgement>, LlmCost), ChatError> {
    if new.is_empty() {
        return Ok((None, LlmCost::default()));
    }
    let last = first + new.len() - 1;
    let mut user = format!("Question: {question}\n\nUseful so far:\n");
    if useful.is_empty() {
        user.push_str("(none)\n");
    }
    for (number, item) in useful {
        user.push_str(&shown(*number, item));
    }
    user.push_str("\nNew passages:\n");
    for (offset, item) in new.iter().enumerate() {
        user.push_str(&shown(first + offset, item));
    }
    let properties = serde_json::json!({
        "relevant": {
            "type": "array",
            "maxItems": new.len(),
            "items": {"type": "integer", "minimum": first, "maximum": last}
        },
        "enough": {"type": "boolean"}
    });
    let max_tokens = 32 + 8 * new.len() as u32;
    let request = ChatRequest::for_object(SYSTEM, user, "judgement", properties, max_tokens);
    ask_one(chat, request, RETRIES, |content| {
        check(content, first, last)
    })
}

/// Reads a judgement whose relevant numbers are among `first..=last`.
fn check(content: &str, first: usize, last: usize) -> Result<Judgement, String> {
    let reply: Reply = parse_reply(content)?;
    let mut relevant = BTreeSet::new();
    for n in reply.relevant {
        if n < first as i64 || n > last as i64 {
            return Err(format!(
                "passage {n} is not one of the new passages {first}-{last}"
            ));
        }
        relevant.insert(n as usize);
    }
    Ok(Judgement {
        relevant: relevant.into_iter().collect(),
        enough: reply.enough,
    })
}
