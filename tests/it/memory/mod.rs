//! Agent memory: sessions of turns stored as documents, the dialogue tree,
//! placement, incremental summaries, context for the next turn, the
//! `session('id')` scope, and failure modes.

mod context;
mod fixtures;
mod forget;
mod placement;
mod sessions;
mod summaries;
