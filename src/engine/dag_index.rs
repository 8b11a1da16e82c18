//! Batched propagation over the whole store: [`Engine::dag_index`] (every
//! document's DAG as one [`DagIndex`], built on first use and rebuilt after
//! any change) and the many-queries-at-once propagation over it.

use std::sync::Arc;

use crate::compute::dag_index::DagIndex;
use crate::compute::propagate::PropagateOptions;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::model::dag::Dag;
use crate::model::edu::Span;

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
    /// The work of [`crate::Db::dag_index`].
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

    /// The work of [`crate::Db::propagate_batch`].
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

    /// The work of [`crate::Db::propagate_texts`].
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
