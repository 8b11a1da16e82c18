//! The DAGs of a whole store as one graph, for batched propagation: every
//! document's nodes numbered globally, one target-grouped CSR over all
//! edges, and a unit vector per node (the normalised mean of its EDUs'
//! stored vectors) so text queries get a direct similarity for every node.
//! Built from the store on first use and rebuilt after any change.

use crate::compute::propagate::PropagationGraph;
use std::sync::Arc;

use crate::compute::propagate::PropagateOptions;
use crate::engine::Engine;
use crate::error::{Error, Result};
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
/// One node found by batched propagation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DagHit {
    /// Document id.
    pub doc: String,
    /// The node's id in the document's DAG.
    pub node: u32,
    /// Its level (1: chunk).
    pub level: u16,
    /// The EDUs it stands for.
    pub edus: Span,
    /// Its propagated score.
    pub score: f32,
}

impl Engine {
    /// The work of [`crate::Engine::dag_index`].
    pub(crate) fn dag_index(&self) -> Result<Arc<DagIndex>> {
        let mut cached = self
            .dag_index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seq = self.store.last_seq()?;
        if let Some(index) = cached.as_ref().filter(|index| index.seq == seq) {
            return Ok(index.clone());
        }
        let dimension = self.embedder.dimension();
        let metas = self.documents()?;
        let index = Arc::new(DagIndex::build(
            dimension,
            seq,
            metas.iter().map(|meta| -> Result<(String, Dag, Vec<f32>)> {
                let dag = self.read_dag(&meta.id, meta.edus)?;
                let (edus, _) = self.edu_vectors(&meta.id)?;
                Ok((meta.id.clone(), dag, edus))
            }),
        )?);
        *cached = Some(index.clone());
        Ok(index)
    }

    /// The work of [`crate::Engine::propagate_batch`].
    pub(crate) fn propagate_batch(
        &self,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        let index = self.dag_index()?;
        if seeds.len() != index.nodes.len() * batch {
            return Err(Error::DagInput {
                what: "propagation seeds".into(),
                message: format!(
                    "{} values given; the store's DAG has {} nodes, so {batch} queries need {}",
                    seeds.len(),
                    index.nodes.len(),
                    index.nodes.len() * batch
                ),
            });
        }
        let top = self
            .device()
            .propagate_top_k(&index.graph, seeds, batch, options, k)?;
        Ok(top
            .into_iter()
            .map(|hits| {
                hits.into_iter()
                    .map(|(global, score)| {
                        let node = index.nodes[global as usize];
                        DagHit {
                            doc: index.documents[node.doc as usize].clone(),
                            node: node.node,
                            level: node.level,
                            edus: node.span,
                            score,
                        }
                    })
                    .collect()
            })
            .collect())
    }

    /// The work of [`crate::Engine::propagate_texts`].
    pub(crate) fn propagate_texts(
        &self,
        queries: &[&str],
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        let vectors = queries
            .iter()
            .map(|q| self.embed_query(q))
            .collect::<Result<Vec<_>>>()?;
        let seeds = self.dag_index()?.similarities(&vectors);
        self.propagate_batch(&seeds, queries.len(), options, k)
    }
}
