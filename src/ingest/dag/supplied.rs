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
//! are ignored. The windows are the DAG's own (see [`SuppliedSource`]):
//! the information points with the same `window` `[a, b]` (in `edudb dag
//! DOC --json`) are one window's query nodes, in id order, and nodes `a`
//! to `b` are its key nodes. The DAG is rebuilt with these weights in
//! place of computed attention.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use super::attention::{AttentionSource, Window};
use crate::compute::aggregate::{AttentionWindow, NodeWeights, Segments};
use crate::compute::device::Device;
use crate::error::{Error, Result};
use crate::model::document::Document;

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
        let unwritable = |e: safetensors::SafeTensorError| Error::DagInput {
            what: "supplied attention".into(),
            message: e.to_string(),
        };
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
            let sides = [
                ("query", &w.query_nodes, &w.query_segments),
                ("key", &w.key_nodes, &w.key_segments),
            ];
            for (side, nodes, segments) in sides {
                buffers.push((
                    name(&format!("{side}_nodes")),
                    Dtype::U32,
                    vec![nodes.len()],
                    u32s(&mut nodes.iter().copied()),
                ));
                buffers.push((
                    name(&format!("{side}_segments")),
                    Dtype::U32,
                    vec![segments.len(), 2],
                    pairs(segments),
                ));
            }
        }
        let views = buffers
            .iter()
            .map(|(name, dtype, shape, data)| {
                TensorView::new(*dtype, shape.clone(), data).map(|view| (name.clone(), view))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(unwritable)?;
        safetensors::serialize(views, None).map_err(unwritable)
    }

    /// This attention as an [`AttentionSource`] for rebuilding a DAG,
    /// aggregated on `device`.
    pub fn source<'a>(&'a self, device: &'a Device) -> SuppliedSource<'a> {
        SuppliedSource {
            attention: self,
            device,
            used: std::sync::Mutex::new(vec![false; self.windows.len()]),
        }
    }
}

/// Supplied attention serving [`super::build`] (which asks once per
/// level): every window of the DAG must have exactly one supplied window
/// with the same query nodes and key nodes, in the same order, and after
/// the build [`SuppliedSource::check_all_used`] refuses leftovers.
#[derive(Debug)]
pub struct SuppliedSource<'a> {
    attention: &'a SuppliedAttention,
    device: &'a Device,
    used: std::sync::Mutex<Vec<bool>>,
}

impl SuppliedSource<'_> {
    /// Fails, naming it, when a supplied window served no window of the DAG.
    pub fn check_all_used(&self, doc: &str) -> Result<()> {
        let used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match used.iter().position(|&u| !u) {
            Some(n) => Err(Error::DagInput {
                what: format!("supplied attention for '{doc}'"),
                message: format!("window {n} matches no window of the DAG"),
            }),
            None => Ok(()),
        }
    }
}

impl AttentionSource for SuppliedSource<'_> {
    fn weights(&self, doc: &Document, windows: &[Window]) -> Result<Vec<NodeWeights>> {
        let fail = |message: String| Error::DagInput {
            what: format!("supplied attention for '{}'", doc.meta.id),
            message,
        };
        let mut by_query: HashMap<u32, usize> = HashMap::new();
        for (n, w) in self.attention.windows.iter().enumerate() {
            for &q in &w.query_nodes {
                if let Some(previous) = by_query.insert(q, n) {
                    return Err(fail(format!(
                        "node {q} is a query node in windows {previous} and {n}"
                    )));
                }
            }
        }
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut matched = Vec::with_capacity(windows.len());
        for window in windows.iter().filter(|w| !w.query_nodes.is_empty()) {
            let first = window.query_nodes[0];
            let Some(&n) = by_query.get(&first) else {
                return Err(fail(format!(
                    "no window supplies attention for nodes {:?} over nodes {:?}",
                    window.query_nodes, window.key_nodes
                )));
            };
            let supplied = &self.attention.windows[n];
            if supplied.query_nodes != window.query_nodes || supplied.key_nodes != window.key_nodes
            {
                return Err(fail(format!(
                    "window {n} has query nodes {:?} and key nodes {:?}; the DAG's window is {:?} over {:?}",
                    supplied.query_nodes, supplied.key_nodes, window.query_nodes, window.key_nodes
                )));
            }
            used[n] = true;
            matched.push(AttentionWindow {
                attention: &supplied.attention,
                query_tokens: supplied.query_tokens,
                key_tokens: supplied.key_tokens,
                query_segments: &supplied.query_segments,
                key_segments: &supplied.key_segments,
            });
        }
        drop(used);
        let mut weights = self.device.segment_mean(&matched)?.into_iter();
        windows
            .iter()
            .map(|window| match window.query_nodes.is_empty() {
                true => Ok(NodeWeights {
                    rows: 0,
                    columns: window.keys.len(),
                    weights: Vec::new(),
                }),
                false => weights
                    .next()
                    .ok_or_else(|| fail("window count changed".into())),
            })
            .collect()
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
