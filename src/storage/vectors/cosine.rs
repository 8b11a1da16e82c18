//! The index's one similarity: the cosine of unit vectors, as the graph's
//! distance over stored 8-bit rows ([`CodeCosine`]) and as the score every
//! search reports ([`score`]), so exact scans and graph searches agree.

use hnsw_rs::anndists::dist::Distance;

/// Bytes a graph point holds after its row's codes: the little-endian
/// `f32` of `1 / |codes|` (0 for a zero row), so a distance costs one
/// product of codes rather than three.
const NORM_BYTES: usize = 4;

/// The graph point of a row of codes: the codes, then their inverse norm
/// ([`NORM_BYTES`]).
pub(super) fn point(codes: &[i8]) -> Vec<i8> {
    let squares = code_dot(codes, codes);
    let inverse_norm = if squares == 0 {
        0.0
    } else {
        1.0 / (squares as f32).sqrt()
    };
    let mut point = Vec::with_capacity(codes.len() + NORM_BYTES);
    point.extend_from_slice(codes);
    point.extend(inverse_norm.to_le_bytes().map(|b| b as i8));
    point
}

/// A graph point's codes and inverse norm (see [`point`]); a point too
/// short to hold a norm reads as a zero row. The norm's length is fixed,
/// so reading it is four byte loads, not a call to copy bytes of a length
/// known only at run time.
pub(super) fn split_point(point: &[i8]) -> (&[i8], f32) {
    match point.split_last_chunk::<NORM_BYTES>() {
        Some((codes, norm)) => (codes, f32::from_le_bytes(norm.map(|code| code as u8))),
        None => (&[], 0.0),
    }
}

/// Cosine distance of two graph points ([`point`]), `1 − cos`, clamped at
/// 0: the cosine of the rows' values, whatever their scales (a row's
/// values are its codes times its scale), so the graph compares the stored
/// rows without them. A zero row is at distance 1 from everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct CodeCosine;

impl Distance<i8> for CodeCosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let ((a, a_inverse), (b, b_inverse)) = (split_point(a), split_point(b));
        if a_inverse == 0.0 || b_inverse == 0.0 {
            return 1.0;
        }
        distance(code_dot(a, b) as f32 * a_inverse * b_inverse)
    }
}

/// The dot product of two rows of codes, exact in 32 bits (a row of 127s
/// has 16,129 per value: rows of up to 133,000 values fit), with AVX2
/// where the processor has it.
fn code_dot(a: &[i8], b: &[i8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        return unsafe { code_dot_avx2(a, b) };
    }
    code_dot_portable(a, b)
}

/// [`code_dot`] compiled for AVX2 (the same loop; the compiler vectorises
/// it 32 codes at a time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn code_dot_avx2(a: &[i8], b: &[i8]) -> i32 {
    code_dot_portable(a, b)
}

/// [`code_dot`] for any processor. Integer sums may be reordered, so the
/// compiler vectorises this loop as it is.
#[inline(always)]
fn code_dot_portable(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// The graph's distance for a cosine (a dot product of unit vectors).
fn distance(cosine: f32) -> f32 {
    (1.0 - cosine).max(0.0)
}

/// The score every search reports for a dot product with a unit query:
/// `1 − distance`, so a cosine above 1 (the rounding of stored 8-bit
/// rows) reads as 1.
pub(super) fn score(dot: f32) -> f32 {
    1.0 - distance(dot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The points' distance is the cosine distance of the rows'
        /// values, whatever the rows' scales, to `f32` rounding; a point
        /// gives its codes back.
        #[test]
        fn the_code_distance_is_the_values_cosine_distance(
            pairs in proptest::collection::vec((-127i8..=127, -127i8..=127), 1..400),
            a_scale in -8i32..0,
            b_scale in -8i32..0,
        ) {
            let (a, b): (Vec<i8>, Vec<i8>) = pairs.into_iter().unzip();
            let values = |codes: &[i8], exponent: i32| -> Vec<f32> {
                codes.iter().map(|&c| f32::from(c) * 2f32.powi(exponent)).collect()
            };
            let expected = 1.0 - crate::compute::vector::cosine(&values(&a, a_scale), &values(&b, b_scale));
            let (a_point, b_point) = (point(&a), point(&b));
            prop_assert_eq!(split_point(&a_point).0, a.as_slice());
            let found = CodeCosine.eval(&a_point, &b_point);
            if a.iter().all(|&c| c == 0) || b.iter().all(|&c| c == 0) {
                prop_assert_eq!(found, 1.0);
            } else {
                prop_assert!((found - expected.max(0.0)).abs() < 1e-5, "{} against {}", found, expected);
            }
        }
    }

    #[test]
    fn a_point_too_short_for_its_norm_reads_as_a_zero_row() {
        assert_eq!(split_point(&[1, 2, 3]), (&[][..], 0.0));
        assert_eq!(CodeCosine.eval(&[1, 2, 3], &point(&[5, 6])), 1.0);
    }

    #[test]
    fn a_row_is_at_distance_zero_from_itself_and_two_from_its_negation() {
        let row: Vec<i8> = (0..384).map(|i| ((i * 37) % 255 - 127) as i8).collect();
        let negated: Vec<i8> = row.iter().map(|&c| -c).collect();
        assert!(CodeCosine.eval(&point(&row), &point(&row)) < 1e-6);
        assert!((CodeCosine.eval(&point(&row), &point(&negated)) - 2.0).abs() < 1e-6);
    }
}
