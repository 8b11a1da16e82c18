//! Building a document's DAG: chunks, then levels of information points
//! over windows of the level below, with attention-weighted edges.

use super::attention::{AttentionSource, Window};
use super::ip::{EduVectors, IpMaker};
use crate::compute::aggregate::NodeWeights;
use crate::error::Result;
use crate::model::dag::{Dag, DagNode};
use crate::model::document::Document;
use crate::model::edu::Span;

/// Edges lighter than this share of a node's attention are dropped (and
/// the rest renormalised): they carry no information and would make the
/// graph dense.
pub const MIN_EDGE_WEIGHT: f32 = 0.01;
/// The tightest a level is summarised (and the most its window is widened)
/// when it does not shrink otherwise.
const MAX_COMPRESSION: u32 = 1024;
/// Most levels built above the chunks.
pub const MAX_LEVELS: u16 = 16;

/// How a DAG is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DagConfig {
    /// Target chunk size in tokens (a chunk is never cut inside an EDU).
    pub chunk_tokens: u32,
    /// Tokens of lower-level text summarised together (PECAN's `s`).
    pub window_tokens: u32,
    /// A window's IPs use about `1 / compression` of its tokens.
    pub compression: u32,
    /// Levels are built until one has at most this many nodes.
    pub top_nodes: usize,
}

impl Default for DagConfig {
    fn default() -> DagConfig {
        DagConfig {
            chunk_tokens: 300,
            window_tokens: 2048,
            compression: 8,
            top_nodes: 4,
        }
    }
}

/// One level under construction: each node's span, points and tokens.
struct Level {
    nodes: Vec<DagNode>,
    tokens: Vec<u32>,
}

/// Builds `doc`'s DAG: chunks, then IP levels from `maker`, with edges
/// weighted by `attention`.
pub fn build(
    doc: &Document,
    vectors: &EduVectors,
    config: &DagConfig,
    maker: &dyn IpMaker,
    attention: &dyn AttentionSource,
) -> Result<Dag> {
    let mut nodes: Vec<DagNode> = Vec::new();
    let mut edges: Vec<Vec<(u32, f32)>> = Vec::new();
    let mut level = chunks(doc, config.chunk_tokens);
    let mut level_edges = vec![Vec::new(); level.nodes.len()];
    let mut number = 1u16;
    let summariser = Summariser {
        doc,
        vectors,
        maker,
    };
    loop {
        let count = level.nodes.len();
        let level_start = nodes.len();
        nodes.extend(level.nodes.iter().cloned());
        edges.append(&mut level_edges);
        if count <= config.top_nodes || number > MAX_LEVELS {
            break;
        }
        let lower_edus: Vec<Vec<u32>> = level.nodes.iter().map(DagNode::edus).collect();
        // A level that does not shrink (its nodes are large, so windows
        // hold few of them) is summarised again over windows twice as
        // wide, twice as tightly.
        let (mut window, mut compression) = (config.window_tokens, config.compression.max(1));
        let (batches, upper, windows) = loop {
            let batches = crate::model::tokens::token_batches(&level.tokens, window);
            let first_ids = (level_start as u32, nodes.len() as u32);
            let (upper, windows) = summariser.summarise(
                &level,
                &batches,
                &lower_edus,
                compression,
                number + 1,
                first_ids,
            );
            if upper.nodes.len() < count || compression >= MAX_COMPRESSION {
                break (batches, upper, windows);
            }
            window = window.saturating_mul(2);
            compression *= 2;
        };
        if upper.nodes.is_empty() || upper.nodes.len() >= count {
            break; // No progress: this level is the top.
        }
        let weights = attention.weights(doc, &windows)?;
        // One row per new point, in id order; columns are the batch's nodes.
        level_edges = batches
            .iter()
            .zip(&weights)
            .flat_map(|(batch, window_weights)| {
                normalised_rows(window_weights).into_iter().map(|row| {
                    row.into_iter()
                        .map(|(column, w)| ((level_start + batch.start + column) as u32, w))
                        .collect()
                })
            })
            .collect();
        level = upper;
        number += 1;
    }
    Ok(Dag::from_edges(nodes, edges))
}

/// What makes a document's information points.
struct Summariser<'a> {
    doc: &'a Document,
    vectors: &'a EduVectors<'a>,
    maker: &'a dyn IpMaker,
}

impl Summariser<'_> {
    /// The next level (numbered `number`) over `level`'s `batches`: each
    /// batch's information points (from about `1 / compression` of its
    /// tokens) and its window. `first_ids` are the DAG ids of the level's
    /// first node and of the first new point.
    fn summarise(
        &self,
        level: &Level,
        batches: &[std::ops::Range<usize>],
        lower_edus: &[Vec<u32>],
        compression: u32,
        number: u16,
        first_ids: (u32, u32),
    ) -> (Level, Vec<Window>) {
        let doc = self.doc;
        let mut windows = Vec::with_capacity(batches.len());
        let mut upper = Level {
            nodes: Vec::new(),
            tokens: Vec::new(),
        };
        for batch in batches {
            let keys: Vec<Vec<u32>> = batch.clone().map(|i| lower_edus[i].clone()).collect();
            let tokens: u32 = batch.clone().map(|i| level.tokens[i]).sum();
            let points = self
                .maker
                .make(doc, self.vectors, &keys, (tokens / compression).max(1));
            let span = Span::new(
                level.nodes[batch.start].span.first,
                level.nodes[batch.end - 1].span.last,
            );
            for point in &points {
                upper
                    .tokens
                    .push(point.iter().map(|&e| doc.edus[e as usize].tokens).sum());
                upper.nodes.push(DagNode {
                    level: number,
                    span,
                    points: point.clone(),
                    window: Some([
                        first_ids.0 + batch.start as u32,
                        first_ids.0 + batch.end as u32 - 1,
                    ]),
                });
            }
            let first_point = first_ids.1 + (upper.nodes.len() - points.len()) as u32;
            windows.push(Window {
                query_nodes: (first_point..first_point + points.len() as u32).collect(),
                key_nodes: batch.clone().map(|i| first_ids.0 + i as u32).collect(),
                queries: points,
                keys,
            });
        }
        (upper, windows)
    }
}

/// Each row of `weights` as `(column, weight)` edges: normalised to sum 1,
/// edges under [`MIN_EDGE_WEIGHT`] dropped, the rest normalised again. A
/// row with no attention (all zero or not finite) has no edges.
pub fn normalised_rows(weights: &NodeWeights) -> Vec<Vec<(usize, f32)>> {
    (0..weights.rows)
        .map(|i| {
            let row = &weights.weights[i * weights.columns..][..weights.columns];
            let kept = normalise(row.iter().copied().enumerate().collect());
            let kept = kept
                .into_iter()
                .filter(|&(_, w)| w >= MIN_EDGE_WEIGHT)
                .collect();
            normalise(kept)
        })
        .collect()
}

/// Edges with positive, finite weights, scaled to sum 1 (none if none).
fn normalise(edges: Vec<(usize, f32)>) -> Vec<(usize, f32)> {
    let edges: Vec<(usize, f32)> = edges
        .into_iter()
        .filter(|&(_, w)| w > 0.0 && w.is_finite())
        .collect();
    let sum: f64 = edges.iter().map(|&(_, w)| f64::from(w)).sum();
    edges
        .into_iter()
        .map(|(j, w)| (j, (f64::from(w) / sum) as f32))
        .collect()
}

/// The chunks: runs of EDUs of about `target` tokens, cut only between EDUs.
fn chunks(doc: &Document, target: u32) -> Level {
    let mut level = Level {
        nodes: Vec::new(),
        tokens: Vec::new(),
    };
    let mut first = 0u32;
    let mut tokens = 0u32;
    for edu in &doc.edus {
        if tokens > 0 && tokens + edu.tokens > target {
            level.nodes.push(chunk(first, edu.id - 1));
            level.tokens.push(tokens);
            first = edu.id;
            tokens = 0;
        }
        tokens += edu.tokens.max(1);
    }
    if !doc.edus.is_empty() {
        level.nodes.push(chunk(first, doc.edus.len() as u32 - 1));
        level.tokens.push(tokens);
    }
    level
}

fn chunk(first: u32, last: u32) -> DagNode {
    DagNode {
        level: 1,
        span: Span::new(first, last),
        points: Vec::new(),
        window: None,
    }
}
