//! Vectors in 8 bits, the form the store keeps them in: each row becomes
//! signed codes and one scale (a power of two), a quarter of the size of
//! `f32` rows. The error of one value is at most half a scale step, under
//! 0.4% of the row's largest magnitude; on unit rows a dot product moves by
//! about 0.001.
//!
//! A power-of-two scale makes the round trip exact: [`snap`]ped values are
//! exactly the values [`quantize`] keeps, so ingest can build a document's
//! DAG from the very numbers the store will give back.

use crate::model::document::{DocVectors, PackedVectors, QuantizedRows};

/// The largest code magnitude.
const CODE_MAX: f32 = 127.0;

/// The scale of a row whose largest magnitude is `max`: the smallest power
/// of two `s` with `max ≤ 127 × s` (0 for a zero row). Products of a power
/// of two and a code are exact, and the row's largest code is then at
/// least 64, so quantising the rounded row again picks the same scale.
fn scale_for(max: f32) -> f32 {
    if max <= 0.0 || !max.is_finite() {
        return 0.0;
    }
    let mut scale = 2f32.powi((max / CODE_MAX).log2().ceil() as i32);
    while max > CODE_MAX * scale {
        scale *= 2.0;
    }
    while scale > 0.0 && max <= CODE_MAX * (scale / 2.0) {
        scale /= 2.0;
    }
    scale
}

/// The rows of a row-major matrix of `dimension` columns, in 8 bits. A
/// trailing partial row (none in a well-formed matrix) is dropped.
pub fn quantize(values: &[f32], dimension: usize) -> QuantizedRows {
    let rows = values.len().checked_div(dimension).unwrap_or(0);
    let mut codes = Vec::with_capacity(rows * dimension);
    let mut scales = Vec::with_capacity(rows);
    for row in values.chunks_exact(dimension.max(1)).take(rows) {
        let scale = scale_for(row.iter().fold(0f32, |m, x| m.max(x.abs())));
        scales.push(scale);
        codes.extend(row.iter().map(|&x| {
            if scale == 0.0 {
                0
            } else {
                (x / scale).round().clamp(-CODE_MAX, CODE_MAX) as i8
            }
        }));
    }
    QuantizedRows { codes, scales }
}

/// Rounds the rows of a row-major matrix of `dimension` columns, in place,
/// to exactly the values their [`quantize`]d form holds.
pub fn snap(values: &mut [f32], dimension: usize) {
    let quantized = quantize(values, dimension);
    for ((row, codes), scale) in (values.chunks_exact_mut(dimension.max(1)))
        .zip(quantized.codes.chunks_exact(dimension.max(1)))
        .zip(quantized.scales)
    {
        for (x, &code) in row.iter_mut().zip(codes) {
            *x = f32::from(code) * scale;
        }
    }
}

/// `vectors` in the stored 8-bit form.
pub fn pack(vectors: &DocVectors) -> PackedVectors {
    let dimension = vectors.dimension as usize;
    PackedVectors {
        dimension: vectors.dimension,
        nodes: quantize(&vectors.nodes, dimension),
        edus: quantize(&vectors.edus, dimension),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::compute::vector::{dot, normalise};

    fn dequantized(rows: &QuantizedRows, dimension: usize) -> Vec<f32> {
        (rows.codes.chunks_exact(dimension))
            .zip(&rows.scales)
            .flat_map(|(codes, &scale)| codes.iter().map(move |&c| f32::from(c) * scale))
            .collect()
    }

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
        assert_eq!(dequantized(&rows, 3), values);
    }

    proptest! {
        #[test]
        fn snapped_values_are_exactly_what_is_kept_and_close_to_the_input(
            (mut values, dimension) in (1usize..8).prop_flat_map(|d| {
                (prop::collection::vec(-1.0f32..1.0, 0..=d * 4), Just(d))
            }),
        ) {
            values.truncate(values.len() / dimension * dimension);
            let original = values.clone();
            snap(&mut values, dimension);
            let rows = quantize(&values, dimension);
            prop_assert_eq!(&rows, &quantize(&original, dimension));
            prop_assert_eq!(dequantized(&rows, dimension), values.clone());
            for (row, before) in values.chunks(dimension).zip(original.chunks(dimension)) {
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
            snap(&mut a, 256);
            prop_assert!((dot(&a, &b) - exact).abs() < 0.01, "{} vs {exact}", dot(&a, &b));
        }
    }
}
