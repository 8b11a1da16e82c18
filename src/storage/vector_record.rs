//! A document's stored vectors, read in place in either layout: 8-bit rows
//! ([`PackedVectors`], written since store format 7) or the `f32` rows of
//! [`DocVectors`] that stores of format 6 and older hold until the
//! document is written again. Everything that reads stored vectors goes
//! through [`Rows`] and [`Row`], so it never depends on the layout.

use rkyv::rend::unaligned::f32_ule;

use crate::compute::vector::dot;
use crate::model::document::{ArchivedDocVectors, ArchivedPackedVectors};
use crate::model::rank::Target;

/// One document's vectors record, read in place.
#[derive(Debug, Clone, Copy)]
pub enum VectorRecord<'a> {
    /// `f32` rows (format 6 and older).
    Full(&'a ArchivedDocVectors),
    /// 8-bit rows.
    Packed(&'a ArchivedPackedVectors),
}

impl<'a> VectorRecord<'a> {
    /// Length of every row.
    pub fn dimension(self) -> usize {
        match self {
            VectorRecord::Full(v) => v.dimension.to_native() as usize,
            VectorRecord::Packed(v) => v.dimension.to_native() as usize,
        }
    }

    /// The rows of the nodes or of the EDUs.
    pub fn rows(self, target: Target) -> Rows<'a> {
        let dimension = self.dimension();
        match (self, target) {
            (VectorRecord::Full(v), Target::Nodes) => Rows::Full(&v.nodes, dimension),
            (VectorRecord::Full(v), Target::Edus) => Rows::Full(&v.edus, dimension),
            (VectorRecord::Packed(v), target) => {
                let rows = match target {
                    Target::Nodes => &v.nodes,
                    Target::Edus => &v.edus,
                };
                Rows::Packed(&rows.codes, &rows.scales, dimension)
            }
        }
    }
}

/// The rows of one target of a vectors record.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    /// Row-major values and the row length.
    Full(&'a [f32_ule], usize),
    /// Row-major codes, one scale per row, and the row length.
    Packed(&'a [i8], &'a [f32_ule], usize),
}

impl<'a> Rows<'a> {
    /// Whether the record holds exactly `rows` whole rows.
    pub fn holds(self, rows: usize) -> bool {
        match self {
            Rows::Full(values, d) => values.len() == rows * d,
            Rows::Packed(codes, scales, d) => codes.len() == rows * d && scales.len() == rows,
        }
    }

    /// How many values the record holds, for an error message.
    pub fn values_len(self) -> usize {
        match self {
            Rows::Full(values, _) => values.len(),
            Rows::Packed(codes, ..) => codes.len(),
        }
    }

    /// Row `i`, if the record holds it whole.
    pub fn row(self, i: usize) -> Option<Row<'a>> {
        match self {
            Rows::Full(values, d) => values.get(i * d..(i + 1) * d).map(Row::Full),
            Rows::Packed(codes, scales, d) => {
                let scale = scales.get(i)?.to_native();
                codes.get(i * d..(i + 1) * d).map(|c| Row::Packed(c, scale))
            }
        }
    }

    /// Every whole row's values, row-major.
    pub fn values(self) -> Vec<f32> {
        let (d, rows) = match self {
            Rows::Full(values, d) => (d, values.len().checked_div(d).unwrap_or(0)),
            Rows::Packed(codes, scales, d) => {
                (d, scales.len().min(codes.len().checked_div(d).unwrap_or(0)))
            }
        };
        let mut out = Vec::with_capacity(rows * d);
        for i in 0..rows {
            if let Some(row) = self.row(i) {
                row.extend_into(&mut out);
            }
        }
        out
    }
}

/// One stored row.
#[derive(Debug, Clone, Copy)]
pub enum Row<'a> {
    /// `f32` values.
    Full(&'a [f32_ule]),
    /// Codes and the row's scale.
    Packed(&'a [i8], f32),
}

impl Row<'_> {
    /// The dot product with `query` (the cosine, for unit rows).
    pub fn dot(self, query: &[f32]) -> f32 {
        match self {
            Row::Full(values) => dot(values, query),
            Row::Packed(codes, scale) => dot(codes, query) * scale,
        }
    }

    /// Whether every value is zero (a row the index leaves out).
    pub fn is_zero(self) -> bool {
        match self {
            Row::Full(values) => values.iter().all(|x| x.to_native() == 0.0),
            Row::Packed(codes, scale) => scale == 0.0 || codes.iter().all(|&c| c == 0),
        }
    }

    /// Appends the row's values to `out`.
    pub fn extend_into(self, out: &mut Vec<f32>) {
        match self {
            Row::Full(values) => out.extend(values.iter().map(|x| x.to_native())),
            Row::Packed(codes, scale) => out.extend(codes.iter().map(|&c| f32::from(c) * scale)),
        }
    }

    /// The row's values.
    pub fn to_vec(self) -> Vec<f32> {
        let mut out = Vec::new();
        self.extend_into(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::quantize::{pack, quantize};
    use crate::model::document::{DocVectors, PackedVectors};

    /// Two node rows (the second all zeros) and three EDU rows of
    /// dimension 4, rounded to what 8 bits hold.
    fn snapped() -> DocVectors {
        let round = |values: &[f32]| quantize(values, 4).to_f32(4);
        DocVectors {
            dimension: 4,
            nodes: round(&[0.5, -0.5, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0]),
            edus: round(
                &(0..12)
                    .map(|i| (i as f32 * 0.7).sin())
                    .collect::<Vec<f32>>(),
            ),
        }
    }

    #[test]
    fn both_layouts_read_as_the_same_rows() {
        let vectors = snapped();
        let full = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&vectors).unwrap();
        let packed = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&pack(&vectors)).unwrap();
        let full = VectorRecord::Full(
            rkyv::access::<ArchivedDocVectors, rkyv::rancor::BoxedError>(&full).unwrap(),
        );
        let packed = VectorRecord::Packed(
            rkyv::access::<ArchivedPackedVectors, rkyv::rancor::BoxedError>(&packed).unwrap(),
        );
        let query = [0.5, 0.5, -0.5, 0.5];
        for record in [full, packed] {
            assert_eq!(record.dimension(), 4);
            assert_eq!(record.rows(Target::Nodes).values(), vectors.nodes);
            assert_eq!(record.rows(Target::Edus).values(), vectors.edus);
            let (nodes, edus) = (record.rows(Target::Nodes), record.rows(Target::Edus));
            assert!(nodes.holds(2) && !nodes.holds(3) && edus.holds(3));
            assert_eq!(edus.values_len(), 12);
            assert!(!nodes.row(0).unwrap().is_zero());
            assert!(nodes.row(1).unwrap().is_zero());
            assert!(nodes.row(2).is_none());
            for i in 0..3 {
                let row = edus.row(i).unwrap();
                let expected: f32 = (row.to_vec().iter().zip(&query)).map(|(x, q)| x * q).sum();
                assert!((row.dot(&query) - expected).abs() < 1e-6);
                assert_eq!(row.to_vec(), vectors.edus[i * 4..(i + 1) * 4]);
            }
        }
    }

    #[test]
    fn a_packed_record_with_a_scale_missing_holds_no_such_row() {
        let mut packed: PackedVectors = pack(&snapped());
        packed.edus.scales.pop();
        let bytes = rkyv::to_bytes::<rkyv::rancor::BoxedError>(&packed).unwrap();
        let record = VectorRecord::Packed(
            rkyv::access::<ArchivedPackedVectors, rkyv::rancor::BoxedError>(&bytes).unwrap(),
        );
        let edus = record.rows(Target::Edus);
        assert!(!edus.holds(3));
        assert!(edus.row(2).is_none());
        assert_eq!(edus.values().len(), 8);
    }
}
