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

    fn window(&self, doc: &Document, window: &Window) -> Result<WindowMatrix> {
        // A sequence holds a group of points, a node and three special
        // tokens; a node keeps what is left after the longest group.
        let positions = self.model.max_positions().saturating_sub(3);
        let group_limit = (positions / 2).max(1);
        let key_limit = positions.saturating_sub(group_limit);
        let points = (window.queries.iter())
            .map(|q| self.tokens(doc, q, POINT_TOKENS.min(group_limit)))
            .collect::<Result<Vec<_>>>()?;
        let nodes = (window.keys.iter())
            .map(|k| self.tokens(doc, k, key_limit))
            .collect::<Result<Vec<_>>>()?;
        let query_segments = Segments::from_lengths(points.iter().map(|p| p.len() as u32));
        let key_segments = Segments::from_lengths(nodes.iter().map(|n| n.len() as u32));
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
            for (node, range) in nodes.iter().zip(&key_segments.0) {
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

impl AttentionSource for ModelAttention {
    fn weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        let matrices = (windows.iter())
            .map(|w| self.window(doc, w))
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
