//! Information points: what a batch of lower-level nodes is summarised
//! into. The built-in [`ExtractiveIpMaker`] needs no language model: it
//! picks salient EDUs of the batch (central, with redundancy removed in
//! the manner of maximal marginal relevance) and groups related picks into
//! points, so every IP is real source text with coordinates. An
//! LLM-written IP maker (PECAN's bullet-point prompt) implements the same
//! trait.

use crate::compute::embed::dot;
use crate::compute::embed::hashed::words;
use crate::model::document::Document;
use crate::model::edu::EduKind;

/// Makes the information points of one batch.
pub trait IpMaker: Send + Sync + std::fmt::Debug {
    /// The points summarising `batch` (each lower node given as its EDUs,
    /// in document order), using at most about `budget` tokens in all.
    /// Each point is a non-empty, sorted list of EDU ids taken from the
    /// batch; the result is non-empty when the batch has any text.
    fn make(
        &self,
        doc: &Document,
        vectors: &EduVectors,
        batch: &[Vec<u32>],
        budget: u32,
    ) -> Vec<Vec<u32>>;
}

/// A document's EDU vectors (unit length, row-major), as stored with it.
#[derive(Debug, Clone, Copy)]
pub struct EduVectors<'a> {
    /// `edus × dimension` values.
    pub values: &'a [f32],
    /// Row length.
    pub dimension: usize,
}

impl EduVectors<'_> {
    /// EDU `e`'s vector.
    pub fn row(&self, e: u32) -> &[f32] {
        &self.values[e as usize * self.dimension..][..self.dimension]
    }
}

/// Extractive IPs by centrality and maximal marginal relevance.
#[derive(Debug, Clone, Copy)]
pub struct ExtractiveIpMaker {
    /// Weight of centrality against redundancy with earlier picks (MMR's λ).
    pub lambda: f32,
    /// Most EDUs in one point.
    pub edus_per_point: usize,
    /// Least cosine similarity of a pick to a point's first EDU to join it.
    pub join_similarity: f32,
}

impl Default for ExtractiveIpMaker {
    fn default() -> ExtractiveIpMaker {
        ExtractiveIpMaker {
            lambda: 0.7,
            edus_per_point: 3,
            join_similarity: 0.3,
        }
    }
}

impl IpMaker for ExtractiveIpMaker {
    fn make(
        &self,
        doc: &Document,
        vectors: &EduVectors,
        batch: &[Vec<u32>],
        budget: u32,
    ) -> Vec<Vec<u32>> {
        let mut pool: Vec<u32> = batch.iter().flatten().copied().collect();
        pool.sort_unstable();
        pool.dedup();
        // Headings are titles, not information; an EDU larger than the
        // whole budget (a long code block) cannot be a point, nor can one
        // without words (attention would have no tokens to start from).
        let usable: Vec<u32> = pool
            .iter()
            .copied()
            .filter(|&e| {
                let edu = &doc.edus[e as usize];
                edu.kind != EduKind::Heading
                    && edu.tokens <= budget.max(1)
                    && !words(&doc.text[edu.start as usize..edu.end as usize]).is_empty()
            })
            .collect();
        let candidates = if usable.is_empty() { pool } else { usable };
        let picks = self.pick(doc, vectors, &candidates, budget);
        self.group(vectors, picks)
    }
}

impl ExtractiveIpMaker {
    /// Maximal marginal relevance: repeatedly the EDU maximising
    /// `λ·centrality − (1 − λ)·max similarity to the picks so far`, until
    /// the budget is spent (always at least one pick).
    fn pick(
        &self,
        doc: &Document,
        vectors: &EduVectors,
        candidates: &[u32],
        budget: u32,
    ) -> Vec<u32> {
        let d = vectors.dimension;
        let mut centroid = vec![0.0f32; d];
        for &e in candidates {
            centroid
                .iter_mut()
                .zip(vectors.row(e))
                .for_each(|(c, v)| *c += v);
        }
        crate::compute::embed::normalise(&mut centroid);
        let centrality: Vec<f32> = candidates
            .iter()
            .map(|&e| dot(vectors.row(e), &centroid))
            .collect();
        let mut redundancy = vec![f32::NEG_INFINITY; candidates.len()];
        let mut taken = vec![false; candidates.len()];
        let mut picks = Vec::new();
        let mut spent = 0u32;
        loop {
            let best = (0..candidates.len())
                .filter(|&i| !taken[i])
                .filter(|&i| {
                    picks.is_empty() || spent + doc.edus[candidates[i] as usize].tokens <= budget
                })
                .map(|i| {
                    let penalty = if redundancy[i].is_finite() {
                        redundancy[i]
                    } else {
                        0.0
                    };
                    (
                        i,
                        self.lambda * centrality[i] - (1.0 - self.lambda) * penalty,
                    )
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((i, _)) = best else { break };
            taken[i] = true;
            let e = candidates[i];
            spent += doc.edus[e as usize].tokens;
            picks.push(e);
            for (j, &other) in candidates.iter().enumerate() {
                if !taken[j] {
                    redundancy[j] = redundancy[j].max(dot(vectors.row(e), vectors.row(other)));
                }
            }
        }
        picks
    }

    /// Groups picks (in pick order) into points: each point starts at the
    /// best remaining pick and takes up to `edus_per_point − 1` later picks
    /// similar enough to it. Points are sorted in document order.
    fn group(&self, vectors: &EduVectors, picks: Vec<u32>) -> Vec<Vec<u32>> {
        let mut left = picks;
        let mut points = Vec::new();
        while !left.is_empty() {
            let head = left.remove(0);
            let mut point = vec![head];
            left.retain(|&e| {
                let joins = point.len() < self.edus_per_point
                    && dot(vectors.row(head), vectors.row(e)) >= self.join_similarity;
                if joins {
                    point.push(e);
                }
                !joins
            });
            point.sort_unstable();
            points.push(point);
        }
        points.sort_by_key(|p| p[0]);
        points
    }
}
