//! [`ModelAttention`]: the DAG's edge weights from a real transformer's
//! attention ([`LocalModel::cross_attention`]).
//!
//! For each window the model reads the window's information points
//! (grouped so a group fits beside one lower node) followed by one lower
//! node, `[CLS] points [SEP] node [SEP]`, once per group and node. The
//! points' rows over the node's columns, averaged over heads and layers,
//! fill the window's token-level matrix, which goes through the same
//! aggregation as every other source ([`Device::segment_mean`]: mean over
//! the node's tokens, then over the point's tokens).

use std::sync::Arc;

use super::attention::{AttentionSource, NodeText, Window};
use crate::compute::aggregate::{AttentionWindow, NodeWeights, Segments};
use crate::compute::device::Device;
use crate::compute::transformer::LocalModel;
use crate::error::Result;
use crate::model::document::Document;
use crate::model::tokens::token_batches;

/// Most model tokens of one information point that attend (a longer point
/// is cut).
const POINT_TOKENS: usize = 128;

/// Attention from a local transformer, aggregated on a [`Device`].
#[derive(Debug, Clone)]
pub struct ModelAttention {
    model: Arc<LocalModel>,
    device: Device,
}

/// One window's token-level attention and its segments.
struct WindowMatrix {
    attention: Vec<f32>,
    query_segments: Segments,
    key_segments: Segments,
}

impl ModelAttention {
    /// Attention read from `model`, aggregated on `device`.
    pub fn new(model: Arc<LocalModel>, device: Device) -> ModelAttention {
        ModelAttention { model, device }
    }

    /// The model's tokens of a node's text, at most `limit`.
    fn tokens(&self, doc: &Document, node: &NodeText, limit: usize) -> Result<Vec<u32>> {
        let mut tokens = self.model.tokens(&node.text(doc))?;
        tokens.truncate(limit);
        Ok(tokens)
    }

    /// A key node's tokens (at most `limit`) and the lengths of its
    /// segments: the whole node, or with `by_edu` each of its EDUs (a
    /// written node is one segment either way).
    fn key_tokens(
        &self,
        doc: &Document,
        node: &NodeText,
        limit: usize,
        by_edu: bool,
    ) -> Result<(Vec<u32>, Vec<u32>)> {
        let edus = match node {
            NodeText::Edus(edus) if by_edu => edus,
            _ => {
                let tokens = self.tokens(doc, node, limit)?;
                let length = tokens.len() as u32;
                return Ok((tokens, vec![length]));
            }
        };
        let mut tokens = Vec::new();
        let mut lengths = Vec::with_capacity(edus.len());
        for &e in edus {
            let room = limit - tokens.len();
            let mut edu = self.tokens(doc, &NodeText::Edus(vec![e]), room)?;
            lengths.push(edu.len() as u32);
            tokens.append(&mut edu);
        }
        Ok((tokens, lengths))
    }

    /// One window's token-level attention, its key columns segmented by
    /// node, or with `by_edu` by EDU.
    fn window(&self, doc: &Document, window: &Window, by_edu: bool) -> Result<WindowMatrix> {
        // A sequence holds a group of points, a node and three special
        // tokens; a node keeps what is left after the longest group.
        let positions = self.model.max_positions().saturating_sub(3);
        let group_limit = (positions / 2).max(1);
        let key_limit = positions.saturating_sub(group_limit);
        let points = (window.queries.iter())
            .map(|q| self.tokens(doc, q, POINT_TOKENS.min(group_limit)))
            .collect::<Result<Vec<_>>>()?;
        let (nodes, segment_lengths): (Vec<Vec<u32>>, Vec<Vec<u32>>) = (window.keys.iter())
            .map(|k| self.key_tokens(doc, k, key_limit, by_edu))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let query_segments = Segments::from_lengths(points.iter().map(|p| p.len() as u32));
        let node_ranges = Segments::from_lengths(nodes.iter().map(|n| n.len() as u32));
        let key_segments = Segments::from_lengths(segment_lengths.concat());
        let rows: usize = points.iter().map(Vec::len).sum();
        let columns: usize = nodes.iter().map(Vec::len).sum();
        let mut attention = vec![0.0f32; rows * columns];
        let point_lengths: Vec<u32> = points.iter().map(|p| p.len() as u32).collect();
        for group in token_batches(&point_lengths, group_limit as u32) {
            let first_row = query_segments.0[group.start].start as usize;
            let joined: Vec<u32> = points[group].concat();
            if joined.is_empty() {
                continue;
            }
            for (node, range) in nodes.iter().zip(&node_ranges.0) {
                if node.is_empty() {
                    continue;
                }
                let cross = self.model.cross_attention(&joined, node)?;
                for (r, row) in cross.weights.chunks(cross.key_tokens).enumerate() {
                    let at = (first_row + r) * columns + range.start as usize;
                    attention[at..at + row.len()].copy_from_slice(row);
                }
            }
        }
        Ok(WindowMatrix {
            attention,
            query_segments,
            key_segments,
        })
    }
}

impl ModelAttention {
    /// The weights of `windows`, with key columns by node or by EDU.
    fn weights_by(
        &self,
        doc: &Document,
        windows: &[Window],
        by_edu: bool,
    ) -> Result<Vec<NodeWeights>> {
        let matrices = (windows.iter())
            .map(|w| self.window(doc, w, by_edu))
            .collect::<Result<Vec<_>>>()?;
        let views: Vec<AttentionWindow> = matrices
            .iter()
            .map(|m| AttentionWindow {
                attention: &m.attention,
                query_tokens: m.query_segments.0.last().map_or(0, |r| r.end as usize),
                key_tokens: m.key_segments.0.last().map_or(0, |r| r.end as usize),
                query_segments: &m.query_segments,
                key_segments: &m.key_segments,
            })
            .collect();
        self.device.segment_mean(&views)
    }
}

impl AttentionSource for ModelAttention {
    fn weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        self.weights_by(doc, windows, false)
    }

    /// The model reads the points beside each whole lower node, as for
    /// [`Self::weights`], so a node's EDUs compete for the points'
    /// attention (one pass per node, not per EDU); the token matrix is
    /// then averaged by EDU.
    fn edu_weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        self.weights_by(doc, windows, true)
    }
}
