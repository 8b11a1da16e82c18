//! What a statement returns: [`QueryResult`] with its [`Rows`], the picked
//! [`Item`]s of a selection and the [`Stage`]s EXPLAIN shows; their JSON
//! is a stable contract.

use std::time::Duration;

use serde::Serialize;

use crate::engine::reads::{EduText, Stats};
use crate::model::document::DocMeta;
use crate::model::tree::Tree;
use crate::query::ast::Output;

/// One picked span: a whole node or a run of EDUs, with its coordinates
/// and text. This is the stable JSON contract of a result item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// Document id.
    pub doc: String,
    /// The node the span is, or `None` for a run of EDUs.
    pub node: Option<u32>,
    /// The node's kind, or `edu` for a run of EDUs.
    pub kind: &'static str,
    /// The node's level; for a run, one below its innermost node.
    pub level: u16,
    /// The node's title; `None` for a run.
    pub title: Option<String>,
    /// First and last EDU, inclusive.
    pub edus: [u32; 2],
    /// Byte range `[start, end)` in the stored text.
    pub bytes: [u32; 2],
    /// o200k_base tokens of the span.
    pub tokens: u64,
    /// Relevance in `[0, 1]` (0 without a SEED).
    pub score: f32,
    /// The seed's own score, before its ranking was divided by its best
    /// (BM25, cosine similarity, or HYBRID's fused score on its fixed 0–1
    /// scale), of the hit this item is: a node's, or for a run of EDUs the
    /// best of the EDU hits it holds. Comparable across queries (and what
    /// `SEED … MIN x` cuts on), unlike `score`. Absent when the item is or
    /// holds no seed hit: no SEED, a walk leaf, a propagated node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_score: Option<f32>,
    /// First and last page (1-based, inclusive) of a PDF's span; absent
    /// for other formats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<[u32; 2]>,
    /// With `WITH BOXES`, where each line of a PDF's span is drawn, in
    /// text order (an empty list for other formats); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boxes: Option<Vec<PageRect>>,
    /// Exactly `text[bytes]`.
    pub text: String,
}

/// Where one line of an item is drawn: its page (1-based) and box, in PDF
/// user-space points (origin at the page's bottom left).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PageRect {
    /// The page, 1-based.
    pub page: u32,
    /// Left edge.
    pub x0: f32,
    /// Bottom edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Top edge.
    pub y1: f32,
}

/// The picks of a SELECT.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    /// Items in the requested order.
    pub items: Vec<Item>,
    /// Tokens of all items together.
    pub tokens_used: u64,
    /// The BUDGET, when given.
    pub budget: Option<u64>,
}

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Rows {
    /// SELECT and SHOW NODE.
    Selection(Selection),
    /// SHOW DOCS.
    Docs(Vec<DocMeta>),
    /// SHOW TREE: a tree, to a depth.
    Tree(Tree, Option<u16>),
    /// SHOW EDUS.
    Edus(Vec<EduText>),
    /// SHOW STATS.
    Stats(Stats),
    /// SHOW DAG.
    Dag(crate::model::dag::DagListing),
    /// SHOW SESSIONS.
    Sessions(Vec<crate::memory::SessionMeta>),
    /// SHOW SESSION: one session's dialogue tree.
    Session(Box<crate::memory::SessionView>),
}

/// One operator of the pipeline, as EXPLAIN reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    /// Operator name, e.g. `seed`.
    pub operator: &'static str,
    /// Its arguments.
    pub detail: String,
    /// Rows it consumed.
    pub rows_in: usize,
    /// Rows it produced.
    pub rows_out: usize,
    /// Time it took.
    #[serde(serialize_with = "as_millis")]
    pub elapsed: Duration,
    /// What ran it: `cpu`, or `cuda` for a stage the GPU served.
    pub device: &'static str,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The result of one statement.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    /// The output form asked for (SELECT TEXT, SPANS, NODES or JSON).
    pub output: Output,
    /// The rows.
    pub rows: Rows,
    /// The pipeline with per-stage counts and times; shown by EXPLAIN.
    pub stages: Vec<Stage>,
    /// EXPLAIN was given.
    pub explain: bool,
    /// Wall-clock time of parse-to-result.
    pub elapsed: Duration,
}

impl QueryResult {
    /// The JSON form. A selection is
    /// `{"results": [Item...], "tokens_used": n, "budget": n|null, "elapsed_ms": x}`,
    /// plus `"plan": [Stage...]` under EXPLAIN.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{Value, json, to_value};
        let mut value = match &self.rows {
            Rows::Selection(selection) => json!({
                "results": to_value(&selection.items).unwrap_or(Value::Null),
                "tokens_used": selection.tokens_used,
                "budget": selection.budget,
            }),
            Rows::Docs(docs) => {
                json!({ "documents": docs.iter().map(DocMeta::to_json).collect::<Vec<_>>() })
            }
            Rows::Tree(tree, depth) => json!({ "tree": tree.to_json(*depth) }),
            Rows::Edus(edus) => json!({ "edus": to_value(edus).unwrap_or(Value::Null) }),
            Rows::Stats(stats) => json!({ "stats": to_value(stats).unwrap_or(Value::Null) }),
            Rows::Dag(listing) => json!({ "dag": to_value(listing).unwrap_or(Value::Null) }),
            Rows::Sessions(sessions) => {
                json!({ "sessions": to_value(sessions).unwrap_or(Value::Null) })
            }
            Rows::Session(view) => json!({ "session": to_value(view).unwrap_or(Value::Null) }),
        };
        value["elapsed_ms"] = json!(self.elapsed.as_secs_f64() * 1000.0);
        if self.explain {
            value["plan"] = to_value(&self.stages).unwrap_or(Value::Null);
        }
        value
    }
}
