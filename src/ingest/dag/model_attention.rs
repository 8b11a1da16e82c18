//! [`ModelAttention`]: the DAG's edge weights from a real transformer's
//! attention ([`LocalModel::cross_attentions`]).
//!
//! For each window the model reads the window's information points
//! (grouped so a group fits beside one lower node) followed by one lower
//! node, `[CLS] points [SEP] node [SEP]`, once per group and node. The
//! points' rows over the node's columns, averaged over heads and layers,
//! fill the window's token-level matrix, which goes through the same
//! aggregation as every other source ([`Device::segment_mean`]: mean over
//! the node's tokens, then over the point's tokens). The passes of many
//! windows are read together, in batches of similar lengths, and windows
//! are taken a bounded number of matrix cells at a time.

use std::ops::Range;
use std::sync::Arc;

use super::attention::{AttentionSource, NodeText, Window};
use crate::compute::aggregate::{AttentionWindow, NodeWeights, Segments};
use crate::compute::device::Device;
use crate::compute::transformer::LocalModel;
use crate::error::Result;
use crate::model::document::Document;
use crate::model::tokens::token_batches;
use crate::progress::{Stage, Steps};

/// Most model tokens of one information point that attend (a longer point
/// is cut).
const POINT_TOKENS: usize = 128;

/// Most token-level matrix cells (f32) held at once: windows are read
/// and aggregated in runs that stay within it (a larger window alone).
const CELLS_PER_RUN: usize = 1 << 22;

/// Attention from a local transformer, aggregated on a [`Device`].
#[derive(Debug, Clone)]
pub struct ModelAttention<'a> {
    model: Arc<LocalModel>,
    device: Device,
    /// Told each run of windows read ([`Stage::Attention`]), and checked
    /// for cancellation between runs.
    steps: Option<Steps<'a>>,
}

/// One window's tokens, as the model reads them.
struct WindowTokens {
    /// The points' tokens joined by group: a group is read beside each
    /// node at once.
    groups: Vec<Vec<u32>>,
    /// First matrix row of each group.
    group_rows: Vec<usize>,
    /// Each lower node's tokens.
    nodes: Vec<Vec<u32>>,
    /// Each node's first matrix column.
    node_columns: Vec<usize>,
    query_segments: Segments,
    key_segments: Segments,
}

impl WindowTokens {
    fn rows(&self) -> usize {
        self.query_segments.0.last().map_or(0, |r| r.end as usize)
    }

    fn columns(&self) -> usize {
        self.key_segments.0.last().map_or(0, |r| r.end as usize)
    }
}

impl ModelAttention<'static> {
    /// Attention read from `model`, aggregated on `device`.
    pub fn new(model: Arc<LocalModel>, device: Device) -> ModelAttention<'static> {
        ModelAttention {
            model,
            device,
            steps: None,
        }
    }
}

impl<'a> ModelAttention<'a> {
    /// The same, telling `steps` the windows read (a level's windows are
    /// read in runs, each run told) and stopping between runs when they
    /// are cancelled.
    pub fn reporting(self, steps: Steps<'a>) -> ModelAttention<'a> {
        ModelAttention {
            steps: Some(steps),
            ..self
        }
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

    /// One window's tokens: its points in groups, its nodes, and the
    /// segments of its matrix (key columns by node, or with `by_edu` by
    /// EDU).
    fn window_tokens(&self, doc: &Document, window: &Window, by_edu: bool) -> Result<WindowTokens> {
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
        let node_columns = (Segments::from_lengths(nodes.iter().map(|n| n.len() as u32)).0)
            .iter()
            .map(|r| r.start as usize)
            .collect();
        let point_lengths: Vec<u32> = points.iter().map(|p| p.len() as u32).collect();
        let groups: Vec<Range<usize>> = token_batches(&point_lengths, group_limit as u32);
        Ok(WindowTokens {
            group_rows: (groups.iter())
                .map(|g| query_segments.0[g.start].start as usize)
                .collect(),
            groups: groups.into_iter().map(|g| points[g].concat()).collect(),
            nodes,
            node_columns,
            query_segments,
            key_segments: Segments::from_lengths(segment_lengths.concat()),
        })
    }

    /// The token-level matrices of `windows`, every pass of theirs read in
    /// one call to the model.
    fn matrices(&self, windows: &[WindowTokens]) -> Result<Vec<Vec<f32>>> {
        let mut pairs: Vec<(&[u32], &[u32])> = Vec::new();
        // Where each pass's rows land: window, first row, first column.
        let mut places: Vec<(usize, usize, usize)> = Vec::new();
        for (w, window) in windows.iter().enumerate() {
            for (group, &row) in window.groups.iter().zip(&window.group_rows) {
                for (node, &column) in window.nodes.iter().zip(&window.node_columns) {
                    if !group.is_empty() && !node.is_empty() {
                        pairs.push((group, node));
                        places.push((w, row, column));
                    }
                }
            }
        }
        let mut matrices: Vec<Vec<f32>> = (windows.iter())
            .map(|w| vec![0.0; w.rows() * w.columns()])
            .collect();
        let read = self.model.cross_attentions(&pairs)?;
        for (cross, (w, first_row, first_column)) in read.iter().zip(places) {
            let columns = windows[w].columns();
            for (r, row) in cross.weights.chunks(cross.key_tokens).enumerate() {
                let at = (first_row + r) * columns + first_column;
                matrices[w][at..at + row.len()].copy_from_slice(row);
            }
        }
        Ok(matrices)
    }

    /// The weights of `windows`, with key columns by node or by EDU.
    fn weights_by(
        &self,
        doc: &Document,
        windows: &[Window],
        by_edu: bool,
    ) -> Result<Vec<NodeWeights>> {
        let tokens = (windows.iter())
            .map(|w| self.window_tokens(doc, w, by_edu))
            .collect::<Result<Vec<_>>>()?;
        let cells: Vec<u32> = (tokens.iter())
            .map(|w| (w.rows() * w.columns()).min(u32::MAX as usize) as u32)
            .collect();
        let mut weights = Vec::with_capacity(windows.len());
        for run in token_batches(&cells, CELLS_PER_RUN as u32) {
            let done = run.end;
            let run = &tokens[run];
            let matrices = self.matrices(run)?;
            let views: Vec<AttentionWindow> = (run.iter().zip(&matrices))
                .map(|(w, attention)| AttentionWindow {
                    attention,
                    query_tokens: w.rows(),
                    key_tokens: w.columns(),
                    query_segments: &w.query_segments,
                    key_segments: &w.key_segments,
                })
                .collect();
            weights.extend(self.device.segment_mean(&views)?);
            if let Some(steps) = &self.steps {
                steps.step(Stage::Attention, done, windows.len())?;
            }
        }
        Ok(weights)
    }
}

impl AttentionSource for ModelAttention<'_> {
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
