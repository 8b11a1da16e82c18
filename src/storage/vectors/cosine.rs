//! The index's one similarity: the cosine of unit vectors, as the graph's
//! distance over stored 8-bit rows ([`CodeCosine`]) and as the score every
//! search reports ([`score`]), so exact scans and graph searches agree.

use hnsw_rs::anndists::dist::Distance;

/// Cosine distance of two rows of 8-bit codes, `1 − cos`, clamped at 0:
/// the cosine of the rows' values, whatever their scales (a row's values
/// are its codes times its scale), so the graph compares the stored rows
/// without them. A zero row is at distance 1 from everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct CodeCosine;

impl Distance<i8> for CodeCosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let (ab, aa, bb) = code_products(a, b);
        if aa == 0 || bb == 0 {
            return 1.0;
        }
        distance(ab as f32 / ((aa as f32).sqrt() * (bb as f32).sqrt()))
    }
}

/// `(a·b, a·a, b·b)` of two rows of codes, summed exactly in 32 bits
/// (a row of 127s has `a·a` = 16,129 per value: rows of up to 133,000
/// values fit), with AVX2 where the processor has it.
fn code_products(a: &[i8], b: &[i8]) -> (i32, i32, i32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        return unsafe { code_products_avx2(a, b) };
    }
    code_products_portable(a, b)
}

/// [`code_products`] compiled for AVX2 (the same loop; the compiler
/// vectorises it 32 codes at a time).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn code_products_avx2(a: &[i8], b: &[i8]) -> (i32, i32, i32) {
    code_products_portable(a, b)
}

/// [`code_products`] for any processor. Integer sums may be reordered, so
/// the compiler vectorises this loop as it is.
#[inline(always)]
fn code_products_portable(a: &[i8], b: &[i8]) -> (i32, i32, i32) {
    a.iter()
        .zip(b)
        .fold((0i32, 0i32, 0i32), |(ab, aa, bb), (&x, &y)| {
            let (x, y) = (i32::from(x), i32::from(y));
            (ab + x * y, aa + x * x, bb + y * y)
        })
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
        /// The codes' cosine is the cosine of the rows' values, whatever
        /// the rows' scales, to `f32` rounding.
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
            let found = CodeCosine.eval(&a, &b);
            if a.iter().all(|&c| c == 0) || b.iter().all(|&c| c == 0) {
                prop_assert_eq!(found, 1.0);
            } else {
                prop_assert!((found - expected.max(0.0)).abs() < 1e-5, "{} against {}", found, expected);
            }
        }
    }

    #[test]
    fn a_row_is_at_distance_zero_from_itself_and_two_from_its_negation() {
        let row: Vec<i8> = (0..384).map(|i| ((i * 37) % 255 - 127) as i8).collect();
        let negated: Vec<i8> = row.iter().map(|&c| -c).collect();
        assert_eq!(CodeCosine.eval(&row, &row), 0.0);
        assert!((CodeCosine.eval(&row, &negated) - 2.0).abs() < 1e-6);
    }
}
