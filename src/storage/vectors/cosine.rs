//! The index's one similarity: the cosine of unit vectors, as the graph's
//! distance ([`UnitCosine`]) and as the score every search reports
//! ([`score`]), so exact scans and graph searches agree.

use hnsw_rs::anndists::dist::Distance;

/// Cosine distance of unit vectors, `1 − a·b`, clamped at 0 (hnsw_rs's own
/// `DistDot` asserts on the rounding error of a vector against itself).
#[derive(Debug, Default, Clone, Copy)]
pub struct UnitCosine;

impl Distance<f32> for UnitCosine {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        distance(crate::compute::embed::dot(a, b))
    }
}

/// The graph's distance for a dot product of unit vectors.
fn distance(dot: f32) -> f32 {
    (1.0 - dot).max(0.0)
}

/// The score every search reports for a dot product with a unit query:
/// the graph's `1 − distance`, to the same bits, so exact and graph
/// searches agree, and a cosine above 1 (the rounding of stored 8-bit
/// rows) reads as 1.
pub(super) fn score(dot: f32) -> f32 {
    1.0 - distance(dot)
}
