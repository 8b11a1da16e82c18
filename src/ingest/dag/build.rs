//! Building a document's DAG: chunks, then levels of information points
//! over windows of the level below, with attention-weighted edges.

use super::attention::{AttentionSource, NodeText, Window};
use super::ip::{EduVectors, IpMaker};
use super::llm::{LlmIpWriter, PointWindow};
use crate::compute::aggregate::NodeWeights;
use crate::error::Result;
use crate::model::cost::LlmCost;
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

/// One level under construction: its nodes and each node's tokens.
#[derive(Default)]
struct Level {
    nodes: Vec<DagNode>,
    tokens: Vec<u32>,
}

/// Builds `doc`'s DAG: chunks, then IP levels written by `writer` when
/// given (windows it cannot write for get `maker`'s points), else made by
/// `maker`, with edges weighted by `attention`; and what the writer's
/// calls cost.
pub fn build(
    doc: &Document,
    vectors: &EduVectors,
    config: &DagConfig,
    maker: &dyn IpMaker,
    writer: Option<&LlmIpWriter<'_>>,
    attention: &dyn AttentionSource,
) -> Result<(Dag, LlmCost)> {
    let mut nodes: Vec<DagNode> = Vec::new();
    let mut edges: Vec<Vec<(u32, f32)>> = Vec::new();
    let mut level = chunks(doc, config.chunk_tokens);
    let mut level_edges = vec![Vec::new(); level.nodes.len()];
    let mut number = 1u16;
    let mut cost = LlmCost::default();
    let summariser = Summariser {
        doc,
        vectors,
        maker,
        writer,
    };
    loop {
        let count = level.nodes.len();
        let level_start = nodes.len();
        nodes.extend(level.nodes.iter().cloned());
        edges.append(&mut level_edges);
        if count <= config.top_nodes || number > MAX_LEVELS {
            break;
        }
        // A level that does not shrink (its nodes are large, so windows
        // hold few of them) is summarised again over windows twice as
        // wide, twice as tightly.
        let (mut window, mut compression) = (config.window_tokens, config.compression.max(1));
        let (batches, mut upper, windows) = loop {
            let batches = crate::model::tokens::token_batches(&level.tokens, window);
            let first_ids = (level_start as u32, nodes.len() as u32);
            let (upper, windows, spent) =
                summariser.summarise(&level, &batches, compression, number + 1, first_ids)?;
            let kept = upper.nodes.len() < count || compression >= MAX_COMPRESSION;
            // A pass summarised again, wider, was paid for, but its
            // fallbacks and dropped points are not the DAG's.
            cost.add(&match kept {
                true => spent,
                false => LlmCost {
                    fallbacks: 0,
                    dropped_points: 0,
                    ..spent
                },
            });
            if kept {
                break (batches, upper, windows);
            }
            window = window.saturating_mul(2);
            compression *= 2;
        };
        if upper.nodes.is_empty() || upper.nodes.len() >= count {
            break; // No progress: this level is the top.
        }
        let weights = attention.weights(doc, &windows)?;
        support_written_points(
            doc,
            attention,
            (&windows, &batches),
            &level,
            &mut upper,
            nodes.len(),
        )?;
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
    Ok((Dag::from_edges(nodes, edges), cost))
}

/// Most EDUs that stand for a written point ([`DagNode::points`]).
pub const SUPPORT_EDUS: usize = 3;

/// Gives each written point of `upper` (the level made from `lower`'s
/// `batches`; its first node has DAG id `first_id`) its coordinates: the
/// [`SUPPORT_EDUS`] EDUs of its window's nodes it attends to most, in
/// document order, by `attention` from the point's text to each EDU.
fn support_written_points(
    doc: &Document,
    attention: &dyn AttentionSource,
    (windows, batches): (&[Window], &[std::ops::Range<usize>]),
    lower: &Level,
    upper: &mut Level,
    first_id: usize,
) -> Result<()> {
    let mut asked = Vec::new();
    let mut columns = Vec::new();
    for (window, batch) in windows.iter().zip(batches) {
        let (query_nodes, queries): (Vec<u32>, Vec<NodeText>) = (window.query_nodes.iter())
            .copied()
            .zip(window.queries.iter().cloned())
            .filter(|(_, q)| matches!(q, NodeText::Written(_)))
            .unzip();
        if queries.is_empty() {
            continue;
        }
        let keys: Vec<Vec<u32>> = batch.clone().map(|i| lower.nodes[i].edus()).collect();
        columns.push(keys.concat());
        asked.push(Window {
            query_nodes,
            queries,
            key_nodes: window.key_nodes.clone(),
            keys: keys.into_iter().map(NodeText::Edus).collect(),
        });
    }
    if asked.is_empty() {
        return Ok(());
    }
    let weights = attention.edu_weights(doc, &asked)?;
    for ((window, edus), w) in asked.iter().zip(&columns).zip(&weights) {
        for (row, &id) in window.query_nodes.iter().enumerate() {
            let values = &w.weights[row * w.columns..][..w.columns];
            let mut ranked: Vec<usize> = (0..values.len()).collect();
            ranked.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
            // An EDU can be in two extractive points of one window: each
            // is taken once.
            let mut support: Vec<u32> = Vec::with_capacity(SUPPORT_EDUS);
            for e in ranked.into_iter().map(|c| edus[c]) {
                if support.len() == SUPPORT_EDUS {
                    break;
                }
                if !support.contains(&e) {
                    support.push(e);
                }
            }
            support.sort_unstable();
            upper.nodes[id as usize - first_id].points = support;
        }
    }
    Ok(())
}

/// What makes a document's information points.
struct Summariser<'a> {
    doc: &'a Document,
    vectors: &'a EduVectors<'a>,
    maker: &'a dyn IpMaker,
    writer: Option<&'a LlmIpWriter<'a>>,
}

impl Summariser<'_> {
    /// The next level (numbered `number`) over `level`'s `batches`: each
    /// batch's information points (from about `1 / compression` of its
    /// tokens) and its window, and what writing them cost. `first_ids` are
    /// the DAG ids of the level's first node and of the first new point.
    fn summarise(
        &self,
        level: &Level,
        batches: &[std::ops::Range<usize>],
        compression: u32,
        number: u16,
        first_ids: (u32, u32),
    ) -> Result<(Level, Vec<Window>, LlmCost)> {
        let doc = self.doc;
        let budgets: Vec<u32> = batches
            .iter()
            .map(|batch| (batch.clone().map(|i| level.tokens[i]).sum::<u32>() / compression).max(1))
            .collect();
        let (mut written, cost) = match self.writer {
            Some(writer) => {
                let asked: Vec<PointWindow> = (batches.iter().zip(&budgets))
                    .map(|(batch, &budget)| PointWindow {
                        nodes: batch
                            .clone()
                            .map(|i| NodeText::of(&level.nodes[i]).text(doc))
                            .collect(),
                        budget,
                    })
                    .collect();
                writer.write(&asked)?
            }
            None => (vec![None; batches.len()], LlmCost::default()),
        };
        let mut windows = Vec::with_capacity(batches.len());
        let mut upper = Level::default();
        for ((batch, &budget), written) in batches.iter().zip(&budgets).zip(&mut written) {
            let keys: Vec<NodeText> = batch
                .clone()
                .map(|i| NodeText::of(&level.nodes[i]))
                .collect();
            let points: Vec<NodeText> = match written.take() {
                Some(texts) => texts.into_iter().map(NodeText::Written).collect(),
                None => {
                    let key_edus: Vec<Vec<u32>> =
                        batch.clone().map(|i| level.nodes[i].edus()).collect();
                    (self
                        .maker
                        .make(doc, self.vectors, &key_edus, budget)
                        .into_iter())
                    .map(NodeText::Edus)
                    .collect()
                }
            };
            let span = Span::new(
                level.nodes[batch.start].span.first,
                level.nodes[batch.end - 1].span.last,
            );
            for point in &points {
                let (edus, text) = match point {
                    NodeText::Edus(edus) => (edus.clone(), None),
                    // Its coordinates come with its attention.
                    NodeText::Written(text) => (Vec::new(), Some(text.clone())),
                };
                upper.tokens.push(point.tokens(doc));
                upper.nodes.push(DagNode {
                    level: number,
                    span,
                    points: edus,
                    window: Some([
                        first_ids.0 + batch.start as u32,
                        first_ids.0 + batch.end as u32 - 1,
                    ]),
                    text,
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
        Ok((upper, windows, cost))
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
    let mut level = Level::default();
    let mut first = 0u32;
    let mut tokens = 0u32;
    for edu in &doc.edus {
        if tokens > 0 && tokens + edu.tokens > target {
            level.push_chunk(first, edu.id - 1, tokens);
            first = edu.id;
            tokens = 0;
        }
        tokens += edu.tokens.max(1);
    }
    if !doc.edus.is_empty() {
        level.push_chunk(first, doc.edus.len() as u32 - 1, tokens);
    }
    level
}

impl Level {
    /// Adds the chunk of EDUs `first..=last`, of `tokens` tokens.
    fn push_chunk(&mut self, first: u32, last: u32, tokens: u32) {
        self.nodes.push(DagNode {
            level: 1,
            span: Span::new(first, last),
            points: Vec::new(),
            window: None,
            text: None,
        });
        self.tokens.push(tokens);
    }
}
