//! Where the DAG's token-level attention comes from, behind one
//! [`AttentionSource`] trait:
//!
//! - [`ComputedAttention`] (the default): scaled dot-product attention
//!   `softmax(QKᵀ/√d)` between an information point's token vectors and
//!   the token vectors of the lower nodes of its window, from the store's
//!   token embedder (hashed per-word vectors with their neighbours' context,
//!   [`crate::compute::embed::hashed::HashedEmbedder::token_vectors`]);
//! - [`super::model_attention::ModelAttention`]: a local transformer's
//!   own attention probabilities, when the store embeds with one;
//! - [`super::supplied::SuppliedSource`]: matrices a caller exported from
//!   its own model's summarisation run, read by [`super::supplied`] and
//!   aggregated the same way ([`crate::compute::aggregate::segment_mean`]).
//!
//! Either way the result is node-level weights per window, which
//! [`super::build`] normalises into edges.

use crate::compute::aggregate::{NodeWeights, Segments, VectorWindow};
use crate::compute::device::Device;
use crate::compute::embed::hashed::HashedEmbedder;
use crate::error::Result;
use crate::model::dag::DagNode;
use crate::model::document::Document;

/// Length of the token vectors computed attention uses.
pub const TOKEN_DIMENSION: usize = 64;

/// One summarisation window: its information points (queries) and the
/// lower-level nodes they were made from (keys), each given as its DAG
/// node id and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The IPs' DAG node ids.
    pub query_nodes: Vec<u32>,
    /// The IPs' text.
    pub queries: Vec<NodeText>,
    /// The lower nodes' DAG node ids.
    pub key_nodes: Vec<u32>,
    /// The lower nodes' text.
    pub keys: Vec<NodeText>,
}

/// The text of a node as attention reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeText {
    /// The document's EDUs, in order (a chunk, an extractive point).
    Edus(Vec<u32>),
    /// A written point's own text.
    Written(String),
}

impl NodeText {
    /// The text of DAG node `node`: a written point's own, else its EDUs.
    pub fn of(node: &DagNode) -> NodeText {
        match &node.text {
            Some(text) => NodeText::Written(text.clone()),
            None => NodeText::Edus(node.edus()),
        }
    }

    /// The text itself: EDUs joined by single spaces.
    pub fn text(&self, doc: &Document) -> String {
        match self {
            NodeText::Edus(edus) => (edus.iter())
                .map(|&e| {
                    let edu = &doc.edus[e as usize];
                    &doc.text[edu.start as usize..edu.end as usize]
                })
                .collect::<Vec<_>>()
                .join(" "),
            NodeText::Written(text) => text.clone(),
        }
    }

    /// Its length in tokens.
    pub fn tokens(&self, doc: &Document) -> u32 {
        match self {
            NodeText::Edus(edus) => edus.iter().map(|&e| doc.edus[e as usize].tokens).sum(),
            NodeText::Written(text) => crate::model::tokens::count(text),
        }
    }
}

/// Gives node-level attention weights for windows of one document.
pub trait AttentionSource: Send + Sync + std::fmt::Debug {
    /// Weights `queries × keys` for each window, in order.
    fn weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>>;

    /// Weights `queries × EDUs` for each window, in order: the columns are
    /// the EDUs of its keys (each [`NodeText::Edus`]), key after key. By
    /// default each EDU is a key of its own.
    fn edu_weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        let split: Vec<Window> = (windows.iter())
            .map(|w| Window {
                query_nodes: w.query_nodes.clone(),
                queries: w.queries.clone(),
                key_nodes: Vec::new(),
                keys: (w.keys.iter())
                    .flat_map(|k| match k {
                        NodeText::Edus(edus) => {
                            edus.iter().map(|&e| NodeText::Edus(vec![e])).collect()
                        }
                        NodeText::Written(_) => vec![k.clone()],
                    })
                    .collect(),
            })
            .collect();
        self.weights(doc, &split)
    }
}

/// Attention computed from the store's token vectors on a [`Device`].
#[derive(Debug, Clone)]
pub struct ComputedAttention {
    embedder: HashedEmbedder,
    device: Device,
}

impl ComputedAttention {
    /// Computed attention with [`TOKEN_DIMENSION`]-long token vectors, run on `device`.
    pub fn new(device: Device) -> ComputedAttention {
        ComputedAttention {
            embedder: HashedEmbedder::new(TOKEN_DIMENSION)
                .unwrap_or_else(|_| unreachable!("TOKEN_DIMENSION is a valid dimension")),
            device,
        }
    }
}

/// Tokens of windows handed to the device at once: enough to fill a GPU
/// launch, few enough that their token vectors stay small (about 33 MB).
pub const TOKENS_PER_LAUNCH: u32 = 1 << 17;

/// Consecutive groups of windows of about [`TOKENS_PER_LAUNCH`] tokens
/// each (at least one window per group).
fn launches<'a>(doc: &Document, windows: &'a [Window]) -> Vec<&'a [Window]> {
    let sizes: Vec<u32> = windows
        .iter()
        .map(|w| {
            (w.queries.iter().chain(&w.keys))
                .map(|n| n.tokens(doc))
                .sum()
        })
        .collect();
    crate::model::tokens::token_batches(&sizes, TOKENS_PER_LAUNCH)
        .into_iter()
        .map(|range| &windows[range])
        .collect()
}

/// Token vectors of some EDUs, concatenated: EDU `e`'s rows are
/// `values[rows[e].0 × d .. rows[e].1 × d]`.
struct TokenVectors<'a> {
    rows: std::collections::HashMap<u32, (usize, usize)>,
    values: Vec<f32>,
    embedder: &'a HashedEmbedder,
}

/// Token vectors scaled from unit length to `√d`, the typical norm of a
/// transformer's queries and keys, so the attention logits are
/// `√d · cosine` rather than nearly uniform.
fn scaled_token_vectors(embedder: &HashedEmbedder, text: &str, into: &mut Vec<f32>) {
    let scale = (TOKEN_DIMENSION as f32).sqrt();
    for token in embedder.token_vectors(text) {
        into.extend(token.iter().map(|v| v * scale));
    }
}

impl<'a> TokenVectors<'a> {
    /// Scaled token vectors ([`scaled_token_vectors`]) of the EDUs the
    /// windows use.
    fn of(doc: &Document, windows: &[Window], embedder: &'a HashedEmbedder) -> TokenVectors<'a> {
        let mut edus: Vec<u32> = windows
            .iter()
            .flat_map(|w| w.queries.iter().chain(&w.keys))
            .flat_map(|n| match n {
                NodeText::Edus(edus) => edus.as_slice(),
                NodeText::Written(_) => &[],
            })
            .copied()
            .collect();
        edus.sort_unstable();
        edus.dedup();
        let mut rows = std::collections::HashMap::with_capacity(edus.len());
        let mut values = Vec::new();
        for e in edus {
            let edu = &doc.edus[e as usize];
            let start = values.len() / TOKEN_DIMENSION;
            let text = &doc.text[edu.start as usize..edu.end as usize];
            scaled_token_vectors(embedder, text, &mut values);
            rows.insert(e, (start, values.len() / TOKEN_DIMENSION));
        }
        TokenVectors {
            rows,
            values,
            embedder,
        }
    }

    /// The rows of `nodes`, end to end, and the segment each node's
    /// tokens occupy.
    fn gather(&self, nodes: &[NodeText]) -> (Vec<f32>, Segments) {
        let d = TOKEN_DIMENSION;
        let mut rows = Vec::new();
        let mut lengths = Vec::with_capacity(nodes.len());
        for node in nodes {
            let before = rows.len();
            match node {
                NodeText::Edus(edus) => {
                    for e in edus {
                        let (a, b) = self.rows[e];
                        rows.extend_from_slice(&self.values[a * d..b * d]);
                    }
                }
                NodeText::Written(text) => scaled_token_vectors(self.embedder, text, &mut rows),
            }
            lengths.push(((rows.len() - before) / d) as u32);
        }
        (rows, Segments::from_lengths(lengths))
    }
}

impl AttentionSource for ComputedAttention {
    fn weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        let mut out = Vec::with_capacity(windows.len());
        for group in launches(doc, windows) {
            let tokens = TokenVectors::of(doc, group, &self.embedder);
            let gathered: Vec<_> = group
                .iter()
                .map(|w| (tokens.gather(&w.queries), tokens.gather(&w.keys)))
                .collect();
            let views: Vec<VectorWindow> = gathered
                .iter()
                .map(
                    |((queries, query_segments), (keys, key_segments))| VectorWindow {
                        queries,
                        keys,
                        dimension: TOKEN_DIMENSION,
                        query_segments,
                        key_segments,
                    },
                )
                .collect();
            out.extend(self.device.vector_attention(&views)?);
        }
        Ok(out)
    }
}
