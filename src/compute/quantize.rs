//! Vectors in 8 bits, the form the store keeps them in and ingest holds
//! them in: each row becomes signed codes and one scale (a power of two), a
//! quarter of the size of `f32` rows. The error of one value is at most
//! half a scale step, under 0.8% of the row's largest magnitude (the scale
//! is rounded up to a power of two); on unit rows a dot product moves by
//! about 0.001.
//!
//! A power-of-two scale makes every code times its scale exact in `f32`,
//! and quantising those values again gives the same codes.

use crate::model::document::{DocVectors, PackedVectors, QuantizedRows};

/// The largest code magnitude.
const CODE_MAX: f32 = 127.0;

/// The scale of a row whose largest magnitude is `max`: the smallest power
/// of two `s` with `max ≤ 127 × s` (0 for a zero row). The row's largest
/// code is then at least 64, so quantising the rounded row again picks the
/// same scale. Rows of subnormal values get the smallest scales `f32`
/// has; the first guess is kept within normal powers of two, so both
/// loops end.
fn scale_for(max: f32) -> f32 {
    if max <= 0.0 || !max.is_finite() {
        return 0.0;
    }
    let exponent = ((max / CODE_MAX).log2().ceil() as i32).clamp(-126, 127);
    let mut scale = 2f32.powi(exponent);
    while max > CODE_MAX * scale {
        scale *= 2.0;
    }
    while scale > 0.0 && max <= CODE_MAX * (scale / 2.0) {
        scale /= 2.0;
    }
    scale
}

/// Appends `row`, in 8 bits, to `rows`.
pub fn push_row(rows: &mut QuantizedRows, row: &[f32]) {
    let scale = scale_for(row.iter().fold(0f32, |m, x| m.max(x.abs())));
    rows.scales.push(scale);
    rows.codes.extend(row.iter().map(|&x| {
        if scale == 0.0 {
            0
        } else {
            (x / scale).round().clamp(-CODE_MAX, CODE_MAX) as i8
        }
    }));
}

/// The rows of a row-major matrix of `dimension` columns, in 8 bits. A
/// trailing partial row (none in a well-formed matrix) is dropped.
pub fn quantize(values: &[f32], dimension: usize) -> QuantizedRows {
    let mut rows = QuantizedRows::default();
    if dimension > 0 {
        for row in values.chunks_exact(dimension) {
            push_row(&mut rows, row);
        }
    }
    rows
}

/// `f32` vectors (a record of store format 6 or older) in 8 bits.
pub fn pack(vectors: &DocVectors) -> PackedVectors {
    let dimension = vectors.dimension as usize;
    PackedVectors {
        dimension: vectors.dimension,
        nodes: quantize(&vectors.nodes, dimension),
        edus: quantize(&vectors.edus, dimension),
    }
}

/// The dot product of two rows of codes (scales not applied): exact in
/// integers, whatever the order of the sum.
pub fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::compute::vector::{dot, normalise};

    #[test]
    fn a_zero_row_stays_zero_and_scales_are_powers_of_two() {
        let values = [0.0, 0.0, 0.0, 0.5, -0.25, 0.125];
        let rows = quantize(&values, 3);
        assert_eq!(rows.scales[0], 0.0);
        assert_eq!(&rows.codes[..3], &[0, 0, 0]);
        assert_eq!(
            rows.scales[1],
            2f32.powi(-7),
            "127 × 2^-8 < 0.5 ≤ 127 × 2^-7"
        );
        assert_eq!(&rows.codes[3..], &[64, -32, 16]);
        assert_eq!(rows.to_f32(3), values);
    }

    #[test]
    fn rows_of_tiny_or_huge_values_quantise_and_end() {
        for max in [1e-45f32, 1e-40, 3.7e-37, 1e-30, 1e30, 1e38] {
            let row = [max, -max / 2.0, 0.0];
            let rows = quantize(&row, 3);
            assert!(rows.scales[0] > 0.0, "{max}");
            assert_eq!(quantize(&rows.to_f32(3), 3), rows, "{max}");
            let kept = rows.to_f32(3);
            assert!(
                (kept[0] - max).abs() <= max / 64.0 + 1e-45,
                "{max}: {kept:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn kept_values_quantise_to_themselves_and_are_close_to_the_input(
            (mut values, dimension) in (1usize..8).prop_flat_map(|d| {
                (prop::collection::vec(-1.0f32..1.0, 0..=d * 4), Just(d))
            }),
        ) {
            values.truncate(values.len() / dimension * dimension);
            let rows = quantize(&values, dimension);
            let kept = rows.to_f32(dimension);
            prop_assert_eq!(&quantize(&kept, dimension), &rows);
            for (row, before) in kept.chunks(dimension).zip(values.chunks(dimension)) {
                let max = before.iter().fold(0f32, |m, x| m.max(x.abs()));
                for (x, y) in row.iter().zip(before) {
                    prop_assert!((x - y).abs() <= max / 127.0 + f32::EPSILON, "{x} vs {y}");
                }
            }
        }

        #[test]
        fn dot_products_of_unit_rows_move_by_little(
            a in prop::collection::vec(-1.0f32..1.0, 256),
            b in prop::collection::vec(-1.0f32..1.0, 256),
        ) {
            let (mut a, mut b) = (a, b);
            normalise(&mut a);
            normalise(&mut b);
            let exact = dot(&a, &b);
            let (qa, qb) = (quantize(&a, 256), quantize(&b, 256));
            prop_assert!((dot(&qa.to_f32(256), &b) - exact).abs() < 0.01);
            let both = dot_codes(&qa.codes, &qb.codes) as f32 * qa.scales[0] * qb.scales[0];
            prop_assert!((both - exact).abs() < 0.01, "{both} vs {exact}");
            prop_assert!((both - dot(&qa.to_f32(256), &qb.to_f32(256))).abs() < 1e-5);
        }
    }
}
