//! The weighted DAG record of a document (PECAN's hierarchical weighted
//! graph): level-1 chunks tiling the document, information points above
//! them, and each node's out-edges to the nodes of the window it was made
//! from, weights normalised to sum 1. A CSR of out-edges archived with
//! rkyv, read in place; [`Dag::validate`] holds its invariants. Building
//! it is ingest's (`ingest::dag`); propagating over it is `compute`'s.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::document::Document;
use crate::model::edu::Span;

/// Out-weights of a node are normalised to sum to 1 within this tolerance.
pub const WEIGHT_SUM_TOLERANCE: f32 = 1e-4;

/// One node of the DAG.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[rkyv(derive(Debug))]
pub struct DagNode {
    /// 1 for chunks; 2 and up for information points.
    pub level: u16,
    /// The EDUs the node stands for: a chunk's run, or an IP's whole batch.
    pub span: Span,
    /// An IP's EDUs in document order: an extractive point's text, or the
    /// EDUs a written point attends to most (its coordinates); empty for
    /// a chunk, whose text is its whole span.
    pub points: Vec<u32>,
    /// An IP's window: the ids `[first, last]` of the lower-level nodes it
    /// was made from (its edges point only there); `None` for a chunk.
    pub window: Option<[u32; 2]>,
    /// A written point's text, in a language model's own words (PECAN's
    /// abstractive information points); `None` for chunks and extractive
    /// points, whose text is their EDUs'.
    pub text: Option<String>,
}

impl DagNode {
    /// The EDUs whose text is the node's text, in document order.
    pub fn edus(&self) -> Vec<u32> {
        if self.points.is_empty() {
            (self.span.first..=self.span.last).collect()
        } else {
            self.points.clone()
        }
    }
}

/// A document's weighted DAG: nodes by level (chunks first, in document
/// order), and out-edges in CSR form.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[rkyv(derive(Debug))]
pub struct Dag {
    /// Nodes; a node's id is its index.
    pub nodes: Vec<DagNode>,
    /// `nodes + 1` offsets: node `i`'s edges are `targets[offsets[i]..offsets[i + 1]]`.
    pub offsets: Vec<u32>,
    /// Lower-level node each edge points to.
    pub targets: Vec<u32>,
    /// Each edge's weight; a node's out-weights sum to 1.
    pub weights: Vec<f32>,
}

impl Dag {
    /// The DAG of `nodes` with `edges[i]` as node `i`'s out-edges
    /// `(target, weight)` (missing lists mean no edges).
    pub fn from_edges(nodes: Vec<DagNode>, edges: Vec<Vec<(u32, f32)>>) -> Dag {
        let mut offsets = Vec::with_capacity(nodes.len() + 1);
        offsets.push(0u32);
        let (mut targets, mut weights) = (Vec::new(), Vec::new());
        for i in 0..nodes.len() {
            for &(t, w) in edges.get(i).map_or(&[][..], Vec::as_slice) {
                targets.push(t);
                weights.push(w);
            }
            offsets.push(targets.len() as u32);
        }
        Dag {
            nodes,
            offsets,
            targets,
            weights,
        }
    }

    /// Node `i`'s out-edges as `(target, weight)`.
    pub fn edges_of(&self, i: usize) -> impl Iterator<Item = (u32, f32)> + '_ {
        let range = self.offsets[i] as usize..self.offsets[i + 1] as usize;
        self.targets[range.clone()]
            .iter()
            .copied()
            .zip(self.weights[range].iter().copied())
    }

    /// Every edge as `(from, to, weight)`.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32, f32)> + '_ {
        (0..self.nodes.len())
            .flat_map(move |i| self.edges_of(i).map(move |(t, w)| (i as u32, t, w)))
    }

    /// The highest level (0 for an empty DAG).
    pub fn top_level(&self) -> u16 {
        self.nodes.last().map_or(0, |n| n.level)
    }

    /// Node `i`'s text: a chunk's run of the document, a written point's
    /// own text, or an extractive point's EDUs joined by single spaces.
    pub fn node_text(&self, doc: &Document, i: usize) -> String {
        let node = &self.nodes[i];
        if let Some(text) = &node.text {
            return text.clone();
        }
        let slice = |first: u32, last: u32| {
            let (a, b) = (&doc.edus[first as usize], &doc.edus[last as usize]);
            &doc.text[a.start as usize..b.end as usize]
        };
        if node.points.is_empty() {
            slice(node.span.first, node.span.last).to_owned()
        } else {
            let parts: Vec<&str> = node.points.iter().map(|&e| slice(e, e)).collect();
            parts.join(" ")
        }
    }

    /// Checks the invariants for a document of `edus` EDUs: levels start
    /// at 1 and never decrease; chunks tile `0..edus` in order; every IP's
    /// points are sorted, distinct and inside its span; edges run from a
    /// node to the level just below it; weights are positive and finite
    /// and each node's out-weights sum to 1; only IPs have written text,
    /// and it is not blank.
    pub fn validate(&self, edus: u32) -> Result<(), String> {
        let n = self.nodes.len();
        if self.offsets.len() != n + 1
            || self.offsets.first() != Some(&0)
            || self.offsets.windows(2).any(|w| w[0] > w[1])
            || *self.offsets.last().unwrap_or(&0) as usize != self.targets.len()
            || self.targets.len() != self.weights.len()
        {
            return Err("DAG edge offsets are malformed".into());
        }
        let mut next_edu = 0u32;
        let mut previous_level = 1u16;
        for (i, node) in self.nodes.iter().enumerate() {
            if node.level < previous_level
                || node.span.first > node.span.last
                || node.span.last >= edus
            {
                return Err(format!(
                    "DAG node {i} (level {}, EDUs {}) is out of order or outside the document",
                    node.level, node.span
                ));
            }
            previous_level = node.level;
            if node
                .text
                .as_ref()
                .is_some_and(|t| node.level == 1 || t.trim().is_empty())
            {
                return Err(format!(
                    "DAG node {i} (level {}) has written text but is a chunk, or the text is blank",
                    node.level
                ));
            }
            if node.level == 1 {
                if node.span.first != next_edu || !node.points.is_empty() {
                    return Err(format!(
                        "DAG chunk {i} {} does not continue the tiling at EDU {next_edu}",
                        node.span
                    ));
                }
                next_edu = node.span.last + 1;
            } else if node.points.is_empty()
                || node.points.windows(2).any(|w| w[0] >= w[1])
                || node
                    .points
                    .iter()
                    .any(|&e| !node.span.contains(&Span::new(e, e)))
            {
                return Err(format!(
                    "DAG node {i}'s points are empty, unsorted or outside its span {}",
                    node.span
                ));
            }
            let window = match node.window {
                None if node.level == 1 => 0..0,
                Some([a, b])
                    if a <= b
                        && (b as usize) < i
                        && [a, b].iter().all(|&k| {
                            let key = &self.nodes[k as usize];
                            key.level + 1 == node.level && node.span.contains(&key.span)
                        }) =>
                {
                    a..b + 1
                }
                _ => {
                    return Err(format!(
                        "DAG node {i}'s window {:?} is not a run of nodes on the level below inside its span",
                        node.window
                    ));
                }
            };
            let mut sum = 0.0f32;
            let mut previous = None;
            for (target, weight) in self.edges_of(i) {
                if !window.contains(&target)
                    || previous.is_some_and(|p| p >= target)
                    || !(weight > 0.0 && weight.is_finite())
                {
                    return Err(format!(
                        "DAG edge {i} → {target} (weight {weight}) is outside the node's window, out of order or not positive"
                    ));
                }
                previous = Some(target);
                sum += weight;
            }
            let has_edges = self.offsets[i] < self.offsets[i + 1];
            if has_edges && (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
                return Err(format!("DAG node {i}'s out-weights sum to {sum}, not 1"));
            }
        }
        if n > 0 && next_edu != edus {
            return Err(format!("DAG chunks cover EDUs 0..{next_edu} of {edus}"));
        }
        Ok(())
    }
}

/// A DAG as listings and exports show it: nodes with their text, and edges.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DagListing {
    /// Document id.
    pub doc: String,
    /// The level shown, or `None` for every level.
    pub level: Option<u16>,
    /// The DAG's highest level.
    pub top_level: u16,
    /// Nodes shown.
    pub nodes: Vec<ListedNode>,
    /// Out-edges of the nodes shown, strongest first per node.
    pub edges: Vec<ListedEdge>,
}

/// One node of a [`DagListing`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListedNode {
    /// Node id.
    pub id: u32,
    /// Level (1: chunk).
    pub level: u16,
    /// The EDUs the node stands for, `[first, last]`.
    pub edus: [u32; 2],
    /// An IP's EDUs: an extractive point's text, a written point's
    /// coordinates (empty for a chunk).
    pub points: Vec<u32>,
    /// An IP's window: the lower nodes `[first, last]` it was made from
    /// (`null` for a chunk).
    pub window: Option<[u32; 2]>,
    /// The node's text.
    pub text: String,
    /// Whether the text is a language model's (a written point) rather
    /// than the document's.
    pub written: bool,
}

/// One edge of a [`DagListing`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListedEdge {
    /// The higher node.
    pub from: u32,
    /// The lower node.
    pub to: u32,
    /// Its normalised weight.
    pub weight: f32,
}

impl Dag {
    /// The listing of the nodes at `level` (every level when `None`) of
    /// document `doc`'s DAG, with their out-edges.
    pub fn listing(&self, doc: &Document, level: Option<u16>) -> DagListing {
        let shown: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| level.is_none_or(|l| self.nodes[i].level == l))
            .collect();
        let mut edges = Vec::new();
        for &i in &shown {
            let mut out: Vec<ListedEdge> = self
                .edges_of(i)
                .map(|(to, weight)| ListedEdge {
                    from: i as u32,
                    to,
                    weight,
                })
                .collect();
            out.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.to.cmp(&b.to)));
            edges.extend(out);
        }
        DagListing {
            doc: doc.meta.id.clone(),
            level,
            top_level: self.top_level(),
            nodes: shown
                .iter()
                .map(|&i| {
                    let node = &self.nodes[i];
                    ListedNode {
                        id: i as u32,
                        level: node.level,
                        edus: [node.span.first, node.span.last],
                        points: node.points.clone(),
                        window: node.window,
                        text: self.node_text(doc, i),
                        written: node.text.is_some(),
                    }
                })
                .collect(),
            edges,
        }
    }
}
