//! What the rankings (full-text and vector) score and return.

use crate::model::edu::Span;

/// What a ranking scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Tree nodes, by their representation (title, child titles, leading
    /// text).
    Nodes,
    /// EDUs, by their text.
    Edus,
}

/// One ranked node or EDU.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedHit {
    /// Document id.
    pub doc: String,
    /// The node matched, or `None` for an EDU match.
    pub node: Option<u32>,
    /// EDUs covered: the EDU itself, or the node's span.
    pub span: Span,
    /// The ranking's score (BM25, or cosine similarity); higher is better.
    pub score: f32,
}
