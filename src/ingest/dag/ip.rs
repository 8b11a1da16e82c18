//! Information points: what a batch of lower-level nodes is summarised
//! into. The built-in [`ExtractiveIpMaker`] needs no language model: it
//! picks salient EDUs of the batch (central, with redundancy removed in
//! the manner of maximal marginal relevance) and groups related picks into
//! points, so every IP is real source text with coordinates. An
//! LLM-written IP maker (PECAN's bullet-point prompt) implements the same
//! trait.

use crate::compute::embed::dot;
use crate::compute::embed::hashed::words;
use crate::compute::quantize::dot_codes;
use crate::model::document::{Document, QuantizedRows};
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

/// A document's EDU vectors (unit length, row-major), as stored with it:
/// `f32` rows (a store of format 6 or older) or 8-bit rows. Rows are read
/// through the products the makers need, so neither layout is widened
/// whole.
#[derive(Debug, Clone, Copy)]
pub enum EduVectors<'a> {
    /// `edus × dimension` values.
    Full {
        /// The values, row-major.
        values: &'a [f32],
        /// Row length.
        dimension: usize,
    },
    /// `edus × dimension` codes and one scale per EDU.
    Packed {
        /// The codes, row-major.
        codes: &'a [i8],
        /// One scale per row.
        scales: &'a [f32],
        /// Row length.
        dimension: usize,
    },
}

impl<'a> EduVectors<'a> {
    /// The EDU rows of packed vectors.
    pub fn packed(rows: &'a QuantizedRows, dimension: usize) -> EduVectors<'a> {
        EduVectors::Packed {
            codes: &rows.codes,
            scales: &rows.scales,
            dimension,
        }
    }

    /// Row length.
    pub fn dimension(&self) -> usize {
        match *self {
            EduVectors::Full { dimension, .. } | EduVectors::Packed { dimension, .. } => dimension,
        }
    }

    /// Adds EDU `e`'s vector into `sum`.
    pub fn add_into(&self, e: u32, sum: &mut [f32]) {
        match *self {
            EduVectors::Full { values, dimension } => {
                let row = &values[e as usize * dimension..][..dimension];
                sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
            }
            EduVectors::Packed {
                codes,
                scales,
                dimension,
            } => {
                let (row, scale) = (
                    &codes[e as usize * dimension..][..dimension],
                    scales[e as usize],
                );
                (sum.iter_mut().zip(row)).for_each(|(s, &c)| *s += f32::from(c) * scale);
            }
        }
    }

    /// The dot product of EDU `e`'s vector with `v`.
    pub fn dot(&self, e: u32, v: &[f32]) -> f32 {
        match *self {
            EduVectors::Full { values, dimension } => {
                dot(&values[e as usize * dimension..][..dimension], v)
            }
            EduVectors::Packed {
                codes,
                scales,
                dimension,
            } => dot(&codes[e as usize * dimension..][..dimension], v) * scales[e as usize],
        }
    }

    /// The cosine similarity of EDUs `a` and `b` (their dot product).
    pub fn similarity(&self, a: u32, b: u32) -> f32 {
        match *self {
            EduVectors::Full { values, dimension } => dot(
                &values[a as usize * dimension..][..dimension],
                &values[b as usize * dimension..][..dimension],
            ),
            EduVectors::Packed {
                codes,
                scales,
                dimension,
            } => {
                let row = |e: u32| &codes[e as usize * dimension..][..dimension];
                dot_codes(row(a), row(b)) as f32 * scales[a as usize] * scales[b as usize]
            }
        }
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
        let mut centroid = vec![0.0f32; vectors.dimension()];
        for &e in candidates {
            vectors.add_into(e, &mut centroid);
        }
        crate::compute::embed::normalise(&mut centroid);
        let centrality: Vec<f32> = candidates
            .iter()
            .map(|&e| vectors.dot(e, &centroid))
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
                    redundancy[j] = redundancy[j].max(vectors.similarity(e, other));
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
                    && vectors.similarity(head, e) >= self.join_similarity;
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
