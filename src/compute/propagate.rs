//! Score propagation down the weighted DAG: the CPU reference
//! implementation, and the oracle the CUDA kernels (`kernels/propagate.cu`)
//! are tested against.
//!
//! PECAN scores a lower node by the relevance of the information points
//! that point at it: `z = Eᵀ r`. Here that runs for `B` queries at once
//! over a [`PropagationGraph`] (the DAG's edges by target: for every node,
//! its parents and the parents' edge weights), level by level:
//!
//! ```text
//! Z₀ = S
//! Zₜ₊₁[j] = S[j]                                   if j has no parents
//!         = (1 − α)·S[j] + α·Σ_{p → j} w_pj·Zₜ[p]   otherwise
//! ```
//!
//! `S` is each node's direct (seed) similarity, `α` weighs propagated
//! against direct score, and each step carries scores one level further
//! down, so `steps` bounds the depth reached. Scores are node-major
//! (`N × B`: node `j`'s `B` scores are contiguous), the layout the kernel
//! reads coalesced.

use crate::model::dag::Dag;

/// The DAG's edges grouped by target (the CSR of `Eᵀ`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PropagationGraph {
    /// `nodes + 1` offsets: node `j`'s parents are `parents[offsets[j]..offsets[j + 1]]`.
    pub offsets: Vec<u32>,
    /// Parent node of each in-edge.
    pub parents: Vec<u32>,
    /// Weight of each in-edge (the parent's normalised out-weight).
    pub weights: Vec<f32>,
}

impl PropagationGraph {
    /// Builds the target-grouped form from out-edges `(from, to, weight)`
    /// over `nodes` nodes; edges to each target keep their input order.
    pub fn from_edges(nodes: usize, edges: impl IntoIterator<Item = (u32, u32, f32)>) -> Self {
        let edges: Vec<(u32, u32, f32)> = edges.into_iter().collect();
        let mut offsets = vec![0u32; nodes + 1];
        for &(_, to, _) in &edges {
            offsets[to as usize + 1] += 1;
        }
        for j in 0..nodes {
            offsets[j + 1] += offsets[j];
        }
        let mut next = offsets.clone();
        let mut parents = vec![0u32; edges.len()];
        let mut weights = vec![0f32; edges.len()];
        for (from, to, weight) in edges {
            let at = &mut next[to as usize];
            parents[*at as usize] = from;
            weights[*at as usize] = weight;
            *at += 1;
        }
        PropagationGraph {
            offsets,
            parents,
            weights,
        }
    }

    /// Several DAGs as one graph, their nodes numbered end to end in order
    /// (the first DAG's nodes first).
    pub fn of_dags<'a>(dags: impl IntoIterator<Item = &'a Dag>) -> Self {
        let mut nodes = 0u32;
        let mut edges = Vec::new();
        for dag in dags {
            edges.extend(
                dag.edges()
                    .map(|(from, to, w)| (nodes + from, nodes + to, w)),
            );
            nodes += dag.nodes.len() as u32;
        }
        PropagationGraph::from_edges(nodes as usize, edges)
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Number of edges.
    pub fn edges(&self) -> usize {
        self.parents.len()
    }

    /// Node `j`'s in-edges as `(parent, weight)`.
    pub fn in_edges(&self, j: usize) -> impl Iterator<Item = (u32, f32)> + '_ {
        let range = self.offsets[j] as usize..self.offsets[j + 1] as usize;
        self.parents[range.clone()]
            .iter()
            .copied()
            .zip(self.weights[range].iter().copied())
    }

    /// Checks the CSR's shape: offsets start at 0, never decrease and end
    /// at the edge count; every parent is a node.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.nodes();
        if self.offsets.first() != Some(&0)
            || self.offsets.windows(2).any(|w| w[0] > w[1])
            || *self.offsets.last().unwrap_or(&0) as usize != self.parents.len()
            || self.parents.len() != self.weights.len()
        {
            return Err("offsets must start at 0, never decrease and end at the edge count".into());
        }
        match self.parents.iter().find(|&&p| p as usize >= n) {
            Some(p) => Err(format!("edge from node {p}, but there are {n} nodes")),
            None => Ok(()),
        }
    }
}

/// How far and how strongly scores propagate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PropagateOptions {
    /// Levels carried down.
    pub steps: u32,
    /// Weight of propagated against direct score, 0..=1.
    pub alpha: f32,
}

/// One propagation step for all `batch` queries, over nodes
/// `first..first + out.len() / batch` (so callers can split the work).
fn step_rows(
    graph: &PropagationGraph,
    seeds: &[f32],
    current: &[f32],
    batch: usize,
    alpha: f32,
    first: usize,
    out: &mut [f32],
) {
    let mut sums = vec![0f32; batch];
    for (row, out) in out.chunks_exact_mut(batch).enumerate() {
        let j = first + row;
        let seed = &seeds[j * batch..][..batch];
        if graph.offsets[j] == graph.offsets[j + 1] {
            out.copy_from_slice(seed);
            continue;
        }
        sums.fill(0.0);
        for (parent, weight) in graph.in_edges(j) {
            let from = &current[parent as usize * batch..][..batch];
            sums.iter_mut()
                .zip(from)
                .for_each(|(s, &z)| *s += weight * z);
        }
        for ((o, &s), &sum) in out.iter_mut().zip(seed).zip(&sums) {
            *o = (1.0 - alpha) * s + alpha * sum;
        }
    }
}

/// Propagates `batch` score vectors (`seeds`, node-major `N × batch`) down
/// the graph; returns the final scores in the same layout. Runs on all
/// cores.
pub fn propagate(
    graph: &PropagationGraph,
    seeds: &[f32],
    batch: usize,
    options: PropagateOptions,
) -> Vec<f32> {
    use rayon::prelude::*;
    assert_eq!(
        seeds.len(),
        graph.nodes() * batch,
        "seeds must be N × batch"
    );
    let mut current = seeds.to_vec();
    let mut next = vec![0f32; current.len()];
    let rows_per_task = (16_384 / batch.max(1)).max(64);
    for _ in 0..options.steps {
        next.par_chunks_mut(rows_per_task * batch.max(1))
            .enumerate()
            .for_each(|(task, out)| {
                step_rows(
                    graph,
                    seeds,
                    &current,
                    batch,
                    options.alpha,
                    task * rows_per_task,
                    out,
                );
            });
        std::mem::swap(&mut current, &mut next);
    }
    current
}

/// The `k` best `(node, score)` of each of the `batch` queries in
/// node-major `scores`: best first, ties to the lower node id, scores of 0
/// or less (and NaN) left out.
pub fn top_k(scores: &[f32], batch: usize, k: usize) -> Vec<Vec<(u32, f32)>> {
    use rayon::prelude::*;
    let nodes = scores.len().checked_div(batch).unwrap_or(0);
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let mut best: Vec<(u32, f32)> = (0..nodes)
                .map(|j| (j as u32, scores[j * batch + b]))
                .filter(|&(_, s)| s > 0.0)
                .collect();
            let by_rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            if best.len() > k {
                best.select_nth_unstable_by(k, by_rank);
                best.truncate(k);
            }
            best.sort_by(by_rank);
            best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 0 → {1: 0.75, 2: 0.25}; 1 → {3: 1.0}; 2 → {3: 0.5, 4: 0.5}.
    fn diamond() -> PropagationGraph {
        PropagationGraph::from_edges(
            5,
            [
                (0, 1, 0.75),
                (0, 2, 0.25),
                (1, 3, 1.0),
                (2, 3, 0.5),
                (2, 4, 0.5),
            ],
        )
    }

    #[test]
    fn target_grouped_csr_lists_each_nodes_parents() {
        let g = diamond();
        g.validate().unwrap();
        assert_eq!(g.offsets, [0, 0, 1, 2, 4, 5]);
        assert_eq!(g.in_edges(3).collect::<Vec<_>>(), [(1, 1.0), (2, 0.5)]);
        assert_eq!(g.edges(), 5);
    }

    #[test]
    fn scores_flow_down_one_level_per_step() {
        let g = diamond();
        let seeds = [1.0, 0.0, 0.0, 0.0, 0.2];
        let options = |steps| PropagateOptions { steps, alpha: 0.5 };
        let one = propagate(&g, &seeds, 1, options(1));
        assert_eq!(one, [1.0, 0.375, 0.125, 0.0, 0.1]);
        let two = propagate(&g, &seeds, 1, options(2));
        // Node 3: 0.5·(1.0·0.375 + 0.5·0.125); node 4: 0.5·0.2 + 0.5·0.5·0.125.
        assert!((two[3] - 0.21875).abs() < 1e-6);
        assert!((two[4] - 0.13125).abs() < 1e-6);
        assert_eq!(
            propagate(&g, &seeds, 1, options(2)),
            propagate(&g, &seeds, 1, options(9))
        );
    }

    #[test]
    fn a_batch_equals_its_queries_run_alone() {
        let g = diamond();
        let a = [1.0, 0.0, 0.5, 0.0, 0.0];
        let b = [0.0, 0.3, 0.0, 0.9, 0.1];
        let batched: Vec<f32> = a.iter().zip(&b).flat_map(|(&x, &y)| [x, y]).collect();
        let options = PropagateOptions {
            steps: 3,
            alpha: 0.7,
        };
        let together = propagate(&g, &batched, 2, options);
        let (alone_a, alone_b) = (propagate(&g, &a, 1, options), propagate(&g, &b, 1, options));
        for j in 0..5 {
            assert_eq!(together[j * 2], alone_a[j]);
            assert_eq!(together[j * 2 + 1], alone_b[j]);
        }
    }

    #[test]
    fn top_k_is_best_first_with_ties_to_the_lower_id() {
        let scores = [0.5, 0.1, 0.9, 0.0, 0.5, 0.3, -1.0, 0.2];
        // Two queries: [0.5, 0.9, 0.5, -1.0] and [0.1, 0.0, 0.3, 0.2].
        let top = top_k(&scores, 2, 2);
        assert_eq!(top[0], [(1, 0.9), (0, 0.5)]);
        assert_eq!(top[1], [(2, 0.3), (3, 0.2)]);
        assert_eq!(top_k(&scores, 2, 10)[0].len(), 3);
    }
}
