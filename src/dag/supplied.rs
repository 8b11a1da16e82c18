//! Supplied attention: token-level attention matrices a caller exported
//! from its own model (for example while it wrote a document's information
//! points), used instead of computed attention to weight a DAG's edges.
//!
//! # File format
//!
//! One [safetensors](https://huggingface.co/docs/safetensors) file per
//! document, holding for each window `n = 0, 1, …` (numbered without gaps):
//!
//! | tensor | dtype | shape | meaning |
//! |---|---|---|---|
//! | `window.n.attention` | F32 | `[Tq, Tk]` | attention of each query token to each key token |
//! | `window.n.query_nodes` | I64, I32 or U32 | `[Nq]` | DAG node ids of the nodes whose tokens are the rows |
//! | `window.n.query_segments` | same | `[Nq, 2]` | each query node's rows `[start, end)` |
//! | `window.n.key_nodes` | same | `[Nk]` | DAG node ids of the nodes whose tokens are the columns, one level below |
//! | `window.n.key_segments` | same | `[Nk, 2]` | each key node's columns `[start, end)` |
//!
//! Segments are ordered and disjoint; tokens in none (a prompt's own, say)
//! are ignored. Each query node's out-edges are replaced by its aggregated,
//! normalised attention to the window's key nodes; nodes in no window keep
//! theirs.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use super::aggregate::{AttentionWindow, Segments};
use super::build::normalised_rows;
use super::{Dag, DagNode};
use crate::device::Device;
use crate::error::{Error, Result};

/// One window of supplied attention.
#[derive(Debug, Clone, PartialEq)]
pub struct SuppliedWindow {
    /// `query_tokens × key_tokens` weights, row-major.
    pub attention: Vec<f32>,
    /// Rows.
    pub query_tokens: usize,
    /// Columns.
    pub key_tokens: usize,
    /// DAG node of each query segment.
    pub query_nodes: Vec<u32>,
    /// Rows of each query node.
    pub query_segments: Segments,
    /// DAG node of each key segment.
    pub key_nodes: Vec<u32>,
    /// Columns of each key node.
    pub key_segments: Segments,
}

/// All supplied windows of one document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SuppliedAttention {
    /// The windows, in file order.
    pub windows: Vec<SuppliedWindow>,
}

impl SuppliedAttention {
    /// Reads the file format above.
    pub fn read(path: &Path) -> Result<SuppliedAttention> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        SuppliedAttention::from_bytes(&bytes, &path.display().to_string())
    }

    /// Parses the file format above from `bytes`; `what` names the input in errors.
    pub fn from_bytes(bytes: &[u8], what: &str) -> Result<SuppliedAttention> {
        let fail = |message: String| Error::DagInput {
            what: what.to_owned(),
            message,
        };
        let file = SafeTensors::deserialize(bytes)
            .map_err(|e| fail(format!("not a safetensors file: {e}")))?;
        let mut windows = Vec::new();
        while file
            .names()
            .iter()
            .any(|n| n.starts_with(&format!("window.{}.", windows.len())))
        {
            let n = windows.len();
            let tensor = |field: &str| {
                let name = format!("window.{n}.{field}");
                file.tensor(&name)
                    .map_err(|_| fail(format!("tensor {name} is missing")))
            };
            let attention = tensor("attention")?;
            let [query_tokens, key_tokens] = attention.shape() else {
                return Err(fail(format!(
                    "window.{n}.attention has shape {:?}; expected [Tq, Tk]",
                    attention.shape()
                )));
            };
            if attention.dtype() != Dtype::F32 {
                return Err(fail(format!(
                    "window.{n}.attention is {:?}; expected F32",
                    attention.dtype()
                )));
            }
            let (query_tokens, key_tokens) = (*query_tokens, *key_tokens);
            let window = SuppliedWindow {
                attention: attention
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                query_tokens,
                key_tokens,
                query_nodes: integers(&tensor("query_nodes")?, 1)
                    .map_err(|m| fail(format!("window.{n}.query_nodes {m}")))?,
                query_segments: segments(&tensor("query_segments")?)
                    .map_err(|m| fail(format!("window.{n}.query_segments {m}")))?,
                key_nodes: integers(&tensor("key_nodes")?, 1)
                    .map_err(|m| fail(format!("window.{n}.key_nodes {m}")))?,
                key_segments: segments(&tensor("key_segments")?)
                    .map_err(|m| fail(format!("window.{n}.key_segments {m}")))?,
            };
            let checks = [
                window.query_segments.validate(query_tokens, "query"),
                window.key_segments.validate(key_tokens, "key"),
            ];
            for check in checks {
                check.map_err(|m| fail(format!("window {n}: {m}")))?;
            }
            if window.query_nodes.len() != window.query_segments.len()
                || window.key_nodes.len() != window.key_segments.len()
            {
                return Err(fail(format!(
                    "window {n}: one segment per node is needed on each side"
                )));
            }
            windows.push(window);
        }
        if windows.is_empty() {
            return Err(fail("no window.0.* tensors".into()));
        }
        Ok(SuppliedAttention { windows })
    }

    /// Writes the file format above (U32 integers).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        let u32s = |values: &mut dyn Iterator<Item = u32>| {
            values.flat_map(u32::to_le_bytes).collect::<Vec<u8>>()
        };
        let pairs = |s: &Segments| u32s(&mut s.0.iter().flat_map(|r| [r.start, r.end]));
        for (n, w) in self.windows.iter().enumerate() {
            let name = |field: &str| format!("window.{n}.{field}");
            buffers.push((
                name("attention"),
                Dtype::F32,
                vec![w.query_tokens, w.key_tokens],
                w.attention.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ));
            buffers.push((
                name("query_nodes"),
                Dtype::U32,
                vec![w.query_nodes.len()],
                u32s(&mut w.query_nodes.iter().copied()),
            ));
            buffers.push((
                name("query_segments"),
                Dtype::U32,
                vec![w.query_segments.len(), 2],
                pairs(&w.query_segments),
            ));
            buffers.push((
                name("key_nodes"),
                Dtype::U32,
                vec![w.key_nodes.len()],
                u32s(&mut w.key_nodes.iter().copied()),
            ));
            buffers.push((
                name("key_segments"),
                Dtype::U32,
                vec![w.key_segments.len(), 2],
                pairs(&w.key_segments),
            ));
        }
        let views = buffers
            .iter()
            .map(|(name, dtype, shape, data)| {
                TensorView::new(*dtype, shape.clone(), data).map(|view| (name.clone(), view))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::DagInput {
                what: "supplied attention".into(),
                message: e.to_string(),
            })?;
        safetensors::serialize(views, None).map_err(|e| Error::DagInput {
            what: "supplied attention".into(),
            message: e.to_string(),
        })
    }

    /// `dag` with the out-edges of every query node replaced by its
    /// aggregated, normalised supplied attention (aggregated on `device`).
    /// Node ids must exist, each key node must be one level below every
    /// query node of its window, and a query node may appear in one window only.
    pub fn apply(&self, dag: &Dag, device: &Device, doc: &str) -> Result<Dag> {
        let fail = |message: String| Error::DagInput {
            what: format!("supplied attention for '{doc}'"),
            message,
        };
        let level = |id: u32, n: usize| -> Result<u16> {
            dag.nodes
                .get(id as usize)
                .map(|node: &DagNode| node.level)
                .ok_or_else(|| {
                    fail(format!(
                        "window {n} names node {id}, but the DAG has nodes 0..{}",
                        dag.nodes.len()
                    ))
                })
        };
        let mut replaced: HashMap<u32, usize> = HashMap::new();
        for (n, w) in self.windows.iter().enumerate() {
            for &q in &w.query_nodes {
                if let Some(previous) = replaced.insert(q, n) {
                    return Err(fail(format!(
                        "node {q} is a query node in windows {previous} and {n}"
                    )));
                }
                for &k in &w.key_nodes {
                    if level(k, n)? + 1 != level(q, n)? {
                        return Err(fail(format!(
                            "window {n}: key node {k} is not one level below query node {q}"
                        )));
                    }
                }
            }
        }
        let windows: Vec<AttentionWindow> = self
            .windows
            .iter()
            .map(|w| AttentionWindow {
                attention: &w.attention,
                query_tokens: w.query_tokens,
                key_tokens: w.key_tokens,
                query_segments: &w.query_segments,
                key_segments: &w.key_segments,
            })
            .collect();
        let weights = device.segment_mean(&windows)?;
        let mut edges: Vec<Vec<(u32, f32)>> = (0..dag.nodes.len())
            .map(|i| dag.edges_of(i).collect())
            .collect();
        for (w, window_weights) in self.windows.iter().zip(&weights) {
            for (row, &q) in normalised_rows(window_weights)
                .into_iter()
                .zip(&w.query_nodes)
            {
                edges[q as usize] = row
                    .into_iter()
                    .map(|(j, weight)| (w.key_nodes[j], weight))
                    .collect();
            }
        }
        Ok(Dag::from_edges(dag.nodes.clone(), edges))
    }
}

/// A tensor of integers (I64, I32 or U32) of rank `rank`, as u32s.
fn integers(view: &TensorView, rank: usize) -> std::result::Result<Vec<u32>, String> {
    if view.shape().len() != rank {
        return Err(format!(
            "has shape {:?}; expected rank {rank}",
            view.shape()
        ));
    }
    let data = view.data();
    let values: Vec<i64> = match view.dtype() {
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect(),
        Dtype::I32 => data
            .chunks_exact(4)
            .map(|b| i64::from(i32::from_le_bytes(b.try_into().unwrap_or_default())))
            .collect(),
        Dtype::U32 => data
            .chunks_exact(4)
            .map(|b| i64::from(u32::from_le_bytes(b.try_into().unwrap_or_default())))
            .collect(),
        other => return Err(format!("is {other:?}; expected I64, I32 or U32")),
    };
    values
        .into_iter()
        .map(|v| u32::try_from(v).map_err(|_| format!("holds {v}, which is not a valid index")))
        .collect()
}

/// A `[N, 2]` integer tensor as segments.
fn segments(view: &TensorView) -> std::result::Result<Segments, String> {
    if view.shape().len() != 2 || view.shape()[1] != 2 {
        return Err(format!("has shape {:?}; expected [N, 2]", view.shape()));
    }
    let flat = integers(view, 2)?;
    Ok(Segments(flat.chunks_exact(2).map(|p| p[0]..p[1]).collect()))
}
