//! The DAGs of a whole store as one graph, for batched propagation: every
//! document's nodes numbered globally, one target-grouped CSR over all
//! edges, and a unit vector per node (the normalised mean of its EDUs'
//! stored vectors) so text queries get a direct similarity for every node.
//! The engine builds it from the store and rebuilds it after any change.

use crate::compute::propagate::PropagationGraph;
use crate::error::Result;
use crate::model::dag::Dag;
use crate::model::edu::Span;

/// Where a global node lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRef {
    /// Index into [`DagIndex::documents`].
    pub doc: u32,
    /// The node's id in its document's DAG.
    pub node: u32,
    /// Its level.
    pub level: u16,
    /// Its EDU span.
    pub span: Span,
}

/// All documents' DAGs as one graph.
#[derive(Debug, Clone, Default)]
pub struct DagIndex {
    /// Document ids, in store order.
    pub documents: Vec<String>,
    /// Each global node.
    pub nodes: Vec<NodeRef>,
    /// All edges, grouped by target, over global node ids.
    pub graph: PropagationGraph,
    /// Unit vector of each node, `nodes × dimension`.
    pub vectors: Vec<f32>,
    /// Vector length.
    pub dimension: usize,
    /// The store change it reflects.
    pub seq: u64,
}

impl DagIndex {
    /// The index over `documents` (id, DAG, EDU vectors `edus × dimension`),
    /// reflecting store change `seq`.
    pub fn build<E>(
        dimension: usize,
        seq: u64,
        documents: impl IntoIterator<Item = Result<(String, Dag, Vec<f32>), E>>,
    ) -> Result<DagIndex, E> {
        let mut index = DagIndex {
            dimension,
            seq,
            ..DagIndex::default()
        };
        let mut dags = Vec::new();
        for entry in documents {
            let (id, dag, edu_vectors) = entry?;
            let doc = index.documents.len() as u32;
            index.documents.push(id);
            for (i, node) in dag.nodes.iter().enumerate() {
                index.nodes.push(NodeRef {
                    doc,
                    node: i as u32,
                    level: node.level,
                    span: node.span,
                });
                let mut mean = vec![0.0f32; dimension];
                for e in node.edus() {
                    let row = &edu_vectors[e as usize * dimension..][..dimension];
                    mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
                }
                crate::compute::embed::normalise(&mut mean);
                index.vectors.extend(mean);
            }
            dags.push(dag);
        }
        index.graph = PropagationGraph::of_dags(&dags);
        Ok(index)
    }

    /// Direct similarities of every node to each query vector, node-major
    /// (`nodes × queries`), negative cosines as 0.
    pub fn similarities(&self, queries: &[Vec<f32>]) -> Vec<f32> {
        let d = self.dimension;
        let mut out = vec![0.0f32; self.nodes.len() * queries.len()];
        for (j, row) in out.chunks_exact_mut(queries.len().max(1)).enumerate() {
            let node = &self.vectors[j * d..(j + 1) * d];
            for (o, q) in row.iter_mut().zip(queries) {
                *o = crate::compute::embed::dot(node, q).max(0.0);
            }
        }
        out
    }
}
