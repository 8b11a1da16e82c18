//! Identifier rules: document ids, session ids, and the reserved ids of
//! session turns (`@session/<session>/<turn:06>`), which every layer that
//! must tell turns from documents asks here.

use crate::error::{Error, Result};

/// Longest accepted document id, in bytes.
pub const MAX_ID_BYTES: usize = 512;
/// Every turn document's id starts with this; callers cannot use it.
pub const SESSION_PREFIX: &str = "@session/";
/// Longest accepted session id, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;

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
    } else if is_dot_segment(id) {
        Some(DOT_SEGMENT)
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

/// Why `.` and `..` are refused as ids: a URL path (the served API's
/// `/v1/docs/{id}`) cannot carry them, since clients resolve them away.
const DOT_SEGMENT: &str =
    "ids must not be \".\" or \"..\": a URL path cannot name them (clients resolve them away)";

/// True for `.` and `..`.
fn is_dot_segment(id: &str) -> bool {
    matches!(id, "." | "..")
}

/// The document id of turn `turn` of `session`.
pub fn turn_doc_id(session: &str, turn: u32) -> String {
    let mut id = String::new();
    write_turn_doc_id(&mut id, session, turn);
    id
}

/// Replaces `id` with [`turn_doc_id`]`(session, turn)`, reusing its
/// allocation (placing a turn names every turn of its topic).
pub fn write_turn_doc_id(id: &mut String, session: &str, turn: u32) {
    use std::fmt::Write;
    id.clear();
    write!(id, "{SESSION_PREFIX}{session}/{turn:06}").expect("writing to a String cannot fail");
}

/// Whether `id` is exactly [`turn_doc_id`]`(session, turn)`, without
/// building that id (checking a long dialogue compares one per turn).
pub fn is_turn_doc_id(id: &str, session: &str, turn: u32) -> bool {
    let Some((named, digits)) = parse_turn_id(id) else {
        return false;
    };
    let width = (turn.checked_ilog10().unwrap_or(0) as usize + 1).max(6);
    named == session
        && digits.len() == width
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.parse() == Ok(turn)
}

/// True for the id of a session's turn document.
pub fn is_turn_id(id: &str) -> bool {
    id.starts_with(SESSION_PREFIX)
}

/// The session and turn a turn document id names, if it is one.
pub fn parse_turn_id(id: &str) -> Option<(&str, &str)> {
    id.strip_prefix(SESSION_PREFIX)?.rsplit_once('/')
}

/// The turn number a turn document id names, if it is one.
pub fn turn_number(id: &str) -> Option<u32> {
    parse_turn_id(id)?.1.parse().ok()
}

/// Checks a document id a caller gives: [`check_id`], and not in the
/// namespace reserved for session turns ([`SESSION_PREFIX`]).
pub fn validate_id(id: &str) -> Result<()> {
    if id.starts_with(SESSION_PREFIX) {
        return Err(Error::InvalidId {
            id: id.to_owned(),
            reason: "ids starting with \"@session/\" are reserved for session turns; append turns with `edudb session add`",
        });
    }
    check_id(id)
}

/// Checks the form of any document id, a session turn's included:
/// non-empty, at most [`MAX_ID_BYTES`], no control characters, no
/// surrounding whitespace.
pub fn check_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("ids must not be empty")
    } else if id.len() > MAX_ID_BYTES {
        Some("ids must be at most 512 bytes")
    } else if id.chars().any(char::is_control) {
        Some("ids must not contain control characters")
    } else if id != id.trim() {
        Some("ids must not start or end with whitespace")
    } else if is_dot_segment(id) {
        Some(DOT_SEGMENT)
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidId {
            id: id.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The check agrees with comparing against the built id, for the
        /// id itself, near misses and ids of other turns and sessions.
        #[test]
        fn a_turn_doc_id_is_recognised_exactly(
            session in "[a-z0-9]{1,8}",
            other in "[a-z0-9]{1,8}",
            turn in prop_oneof![0u32..2_000, any::<u32>()],
            delta in 0u32..3,
        ) {
            let id = turn_doc_id(&session, turn);
            let near_misses = [
                id.clone(),
                turn_doc_id(&other, turn),
                turn_doc_id(&session, turn.wrapping_add(delta)),
                format!("{SESSION_PREFIX}{session}/{turn}"),
                format!("{SESSION_PREFIX}{session}/+{turn:05}"),
                format!("{SESSION_PREFIX}{session}/0{turn:06}"),
                format!("{session}/{turn:06}"),
            ];
            for candidate in near_misses {
                prop_assert_eq!(
                    is_turn_doc_id(&candidate, &session, turn),
                    candidate == id,
                    "{}",
                    candidate
                );
            }
            // Written over a buffer holding another (longer) id.
            let mut buffer = format!("{SESSION_PREFIX}{other}{session}/{:06}", u64::MAX);
            write_turn_doc_id(&mut buffer, &session, turn);
            prop_assert_eq!(buffer, id);
        }
    }
}
