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
//! extractive summary (an EDU span inside its own document), per topic and
//! branch an extractive summary, and per topic the sum of its turns'
//! vectors, all updated incrementally when a turn joins ([`summary`]).
//!
//! - [`placement`] decides where a new turn goes (continue, new topic,
//!   switch topic, fork) from the store's embedder, model-free, and
//!   [`llm_placement`] asks a chat model when those similarities leave it
//!   in doubt (`Placement::Llm`);
//! - [`summary`] picks a turn's summary EDU and keeps topic and branch
//!   summaries;
//! - [`context`] builds the context for the next turn: the active path in
//!   full plus the stored summaries of everything else, under a budget;
//! - `dialogue` grows the dialogue tree by one turn;
//! - the work of the [`crate::Db`] session methods: `append` (a turn
//!   stored and placed), `session` (browse, context, check) and `forget`
//!   (a session removed, a turn forgotten).
//!
//! The record types, the views callers read and the dialogue tree's
//! invariants are records: [`crate::model::dialogue`].

pub(crate) mod append;
pub mod context;
mod dialogue;
pub(crate) mod forget;
pub mod llm_placement;
pub mod placement;
pub(crate) mod session;
pub mod summary;

pub use append::{TurnInput, TurnReceipt, check_turn_input};
pub use context::{ContextItem, ContextKind, SessionContext};
pub use placement::{BranchChoice, DecidedBy, Decision, Placement, TopicChoice};

pub use crate::model::dialogue::{
    Branch, BranchView, Dialogue, MAX_TURNS, Role, SessionMeta, SessionView, SummaryPick,
    SummaryText, Topic, TopicView, Turn, TurnView, span_text,
};
pub use crate::model::ids::{
    MAX_SESSION_ID_BYTES, SESSION_PREFIX, is_turn_id, parse_turn_id, turn_doc_id, turn_number,
    validate_session_id,
};
