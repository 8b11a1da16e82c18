//! [`ask_checked`]: requests whose replies are checked, re-asked with the
//! reason when refused, and given up on after a bounded number of tries.

use crate::compute::chat::chat_model::{ChatModel, ChatRequest};
use crate::error::ChatError;
use crate::model::cost::LlmCost;

/// Sampling temperature of a retry: the first try is the caller's (greedy
/// in every step), a retry samples a little, so a deterministic model's
/// next answer can differ.
pub const RETRY_TEMPERATURE: f32 = 0.4;

/// Asks `requests` (their first tries) at once and checks each reply with
/// `check(index, content)`. A refused reply is asked again, all refused
/// ones together, up to `retries` more times: the same request with the
/// reason appended to its user message, at [`RETRY_TEMPERATURE`]. A reply
/// cut at its token limit is refused without being checked. Returns each
/// request's checked answer (`None`: still refused after every try) and
/// what the calls cost. Fails only when the model could not be asked.
pub fn ask_checked<T>(
    chat: &dyn ChatModel,
    requests: &[ChatRequest],
    retries: u32,
    check: impl Fn(usize, &str) -> Result<T, String>,
) -> Result<(Vec<Option<T>>, LlmCost), ChatError> {
    let count = requests.len();
    let mut answers: Vec<Option<T>> = (0..count).map(|_| None).collect();
    let mut rejections: Vec<Option<String>> = vec![None; count];
    let mut cost = LlmCost::default();
    for attempt in 0..=retries {
        let pending: Vec<usize> = (0..count).filter(|&i| answers[i].is_none()).collect();
        if pending.is_empty() {
            break;
        }
        let asked: Vec<ChatRequest> = pending
            .iter()
            .map(|&i| match &rejections[i] {
                None => requests[i].clone(),
                Some(why) => retry(&requests[i], why),
            })
            .collect();
        let (replies, spent) = chat.chat(&asked)?;
        cost.add(&spent);
        for (&i, reply) in pending.iter().zip(replies) {
            let checked = if reply.truncated {
                Err("the reply was cut off at its token limit; answer more briefly".into())
            } else {
                check(i, &reply.content)
            };
            match checked {
                Ok(answer) => answers[i] = Some(answer),
                Err(why) => {
                    tracing::debug!(request = i, attempt, "chat reply refused: {why}");
                    rejections[i] = Some(why);
                }
            }
        }
    }
    Ok((answers, cost))
}

/// [`ask_checked`] of one request: its checked answer (`None`: still
/// refused after every try) and what the calls cost.
pub fn ask_one<T>(
    chat: &dyn ChatModel,
    request: ChatRequest,
    retries: u32,
    check: impl Fn(&str) -> Result<T, String>,
) -> Result<(Option<T>, LlmCost), ChatError> {
    let (mut answers, cost) = ask_checked(
        chat,
        std::slice::from_ref(&request),
        retries,
        |_, content| check(content),
    )?;
    Ok((answers.pop().flatten(), cost))
}

/// `first` asked again: the reason its reply was refused appended to its
/// user message, at [`RETRY_TEMPERATURE`].
fn retry(first: &ChatRequest, why: &str) -> ChatRequest {
    ChatRequest {
        user: format!(
            "{}\nYour previous answer was rejected: {why}. Answer again, following the rules exactly.",
            first.user
        ),
        temperature: RETRY_TEMPERATURE,
        ..first.clone()
    }
}

/// A reply's JSON content as `T`, or why not (the reason a refused reply
/// is asked again with).
pub fn parse_reply<T: serde::de::DeserializeOwned>(content: &str) -> Result<T, String> {
    serde_json::from_str(content).map_err(|e| format!("the reply is not the requested JSON ({e})"))
}

/// `text` on one line (whitespace runs collapsed), cut to `chars`
/// characters with `…`: how the steps show document text to a model.
pub fn clip(text: &str, chars: usize) -> String {
    let mut flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > chars {
        flat = flat.chars().take(chars).collect();
        flat.push('…');
    }
    flat
}
