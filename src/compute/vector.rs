//! Vector arithmetic shared by the embedders, the DAG and agent memory.

/// `v` scaled to unit length (left as is when it is all zeros).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product: the cosine similarity of two unit vectors. `a` may hold
/// any values that read as `f32` (such as the little-endian floats of an
/// rkyv archive).
///
/// Sums into 16 independent lanes so the compiler can keep them in SIMD
/// registers; a single running sum is one long dependency chain, which made
/// this the bottleneck of every graph insert and search.
pub fn dot<A: Copy + Into<f32>>(a: &[A], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = (a_chunks.remainder().iter())
        .zip(b_chunks.remainder())
        .map(|(&x, y)| x.into() * y)
        .sum();
    let mut lanes = [0f32; LANES];
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            lanes[lane] += x[lane].into() * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na <= 0.0 || nb <= 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The unit-length mean of rows `first..=last` of a row-major matrix of
/// `dimension` columns (zeros when they sum to zero).
pub fn mean_unit(rows: &[f32], dimension: usize, first: usize, last: usize) -> Vec<f32> {
    let mut mean = vec![0.0f32; dimension];
    for row in first..=last {
        if let Some(values) = rows.get(row * dimension..(row + 1) * dimension) {
            add_into(&mut mean, values);
        }
    }
    normalise(&mut mean);
    mean
}

/// The centroid of a row-major matrix of `dimension` columns: the
/// unit-length mean of all its whole rows ([`mean_unit`]).
pub fn centroid(rows: &[f32], dimension: usize) -> Vec<f32> {
    let count = rows.len().checked_div(dimension).unwrap_or(0);
    mean_unit(rows, dimension, 0, count.saturating_sub(1))
}

/// Adds `v` into `sum` (which may be longer or shorter; extra values are ignored).
pub fn add_into(sum: &mut [f32], v: &[f32]) {
    for (s, x) in sum.iter_mut().zip(v) {
        *s += x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum_at_every_length() {
        for len in [0, 1, 15, 16, 17, 100, 256, 385] {
            let a: Vec<f32> = (0..len)
                .map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let b: Vec<f32> = (0..len)
                .map(|i| ((i * 5 % 13) as f32 - 6.0) / 4.0)
                .collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            let got = f64::from(dot(&a, &b));
            assert!(
                (got - plain).abs() <= 1e-4 * plain.abs().max(1.0),
                "{len}: {got} vs {plain}"
            );
        }
    }
}
