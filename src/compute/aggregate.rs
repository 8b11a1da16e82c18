//! Attention aggregation from token level to node level: the CPU reference
//! implementation, and the oracle the CUDA kernels
//! (`kernels/attention_aggregate.cu`) are tested against.
//!
//! A window is one summarisation step: query tokens (the information
//! points being made) attend to key tokens (the lower-level nodes they are
//! made from). Each side's tokens are grouped into nodes by [`Segments`].
//! The node-level weight from query node `i` to key node `j` is PECAN's
//! aggregate: the attention of each of `i`'s tokens to `j`'s tokens,
//! averaged over `j`'s tokens, then averaged over `i`'s tokens. Tokens in
//! no segment are ignored (for example a prompt's own tokens), and so is
//! attention within one side, because the two sides are separate
//! sequences. An empty segment gives weights of 0.

use std::ops::Range;

/// Contiguous, ordered, non-overlapping token ranges, one per node; a range
/// may be empty, and tokens between ranges belong to no node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segments(pub Vec<Range<u32>>);

impl Segments {
    /// Segments of the given lengths laid end to end from token 0.
    pub fn from_lengths(lengths: impl IntoIterator<Item = u32>) -> Segments {
        let mut start = 0;
        Segments(
            lengths
                .into_iter()
                .map(|len| {
                    let range = start..start + len;
                    start += len;
                    range
                })
                .collect(),
        )
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks that the ranges are ordered, disjoint and inside `tokens`;
    /// says which range is wrong.
    pub fn validate(&self, tokens: usize, side: &str) -> Result<(), String> {
        let mut previous_end = 0;
        for (index, range) in self.0.iter().enumerate() {
            if range.start > range.end || range.start < previous_end || range.end as usize > tokens
            {
                return Err(format!(
                    "{side} segment {index} is {}..{}: segments must be ordered, disjoint and within the {tokens} tokens",
                    range.start, range.end
                ));
            }
            previous_end = range.end;
        }
        Ok(())
    }
}

/// A given token-level attention matrix and its two segment maps.
#[derive(Debug, Clone, Copy)]
pub struct AttentionWindow<'a> {
    /// `query_tokens × key_tokens` weights, row-major.
    pub attention: &'a [f32],
    /// Rows.
    pub query_tokens: usize,
    /// Columns.
    pub key_tokens: usize,
    /// Query tokens → query nodes.
    pub query_segments: &'a Segments,
    /// Key tokens → key nodes.
    pub key_segments: &'a Segments,
}

/// Query and key token vectors, for attention computed as
/// `softmax(Q Kᵀ / √d)` over all the window's key tokens.
#[derive(Debug, Clone, Copy)]
pub struct VectorWindow<'a> {
    /// `query_segments`' tokens × `dimension`, row-major.
    pub queries: &'a [f32],
    /// Key tokens × `dimension`, row-major.
    pub keys: &'a [f32],
    /// Length of every token vector.
    pub dimension: usize,
    /// Query tokens → query nodes.
    pub query_segments: &'a Segments,
    /// Key tokens → key nodes.
    pub key_segments: &'a Segments,
}

impl VectorWindow<'_> {
    /// Number of query tokens.
    pub fn query_tokens(&self) -> usize {
        self.queries.len() / self.dimension.max(1)
    }

    /// Number of key tokens.
    pub fn key_tokens(&self) -> usize {
        self.keys.len() / self.dimension.max(1)
    }
}

/// Node-level weights of one window: `query nodes × key nodes`, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeWeights {
    /// Query nodes (rows).
    pub rows: usize,
    /// Key nodes (columns).
    pub columns: usize,
    /// `rows × columns` weights.
    pub weights: Vec<f32>,
}

impl NodeWeights {
    /// The weight from query node `i` to key node `j`.
    pub fn get(&self, i: usize, j: usize) -> f32 {
        self.weights[i * self.columns + j]
    }
}

/// Segment means of one given attention matrix (the reference for kernel (a)).
pub fn segment_mean(window: &AttentionWindow) -> NodeWeights {
    node_means(
        window.query_segments,
        window.key_segments.len(),
        |x, out| {
            let row = &window.attention[x as usize * window.key_tokens..][..window.key_tokens];
            key_means(row, window.key_segments, out);
        },
    )
}

/// Attention computed from token vectors, aggregated to node level (the
/// reference for the fused kernel (b)): for each query token, the softmax
/// of its scaled dot products with every key token, then the same segment
/// means as [`segment_mean`]. The full matrix exists only one row at a time.
pub fn vector_attention(window: &VectorWindow) -> NodeWeights {
    let d = window.dimension;
    let scale = 1.0 / (d as f32).sqrt();
    let mut logits = vec![0.0f32; window.key_tokens()];
    node_means(
        window.query_segments,
        window.key_segments.len(),
        |x, out| {
            let q = &window.queries[x as usize * d..][..d];
            for (y, logit) in logits.iter_mut().enumerate() {
                *logit = crate::compute::embed::dot(q, &window.keys[y * d..][..d]) * scale;
            }
            softmax(&mut logits);
            key_means(&logits, window.key_segments, out);
        },
    )
}

/// PECAN's aggregate over every query node: `token_means(x, out)` gives
/// query token `x`'s attention averaged over each key node's tokens; these
/// are averaged over the node's tokens (an empty query node gets zeros).
fn node_means(
    queries: &Segments,
    columns: usize,
    mut token_means: impl FnMut(u32, &mut [f64]),
) -> NodeWeights {
    let rows = queries.len();
    let mut weights = vec![0.0f32; rows * columns];
    let mut token = vec![0.0f64; columns];
    for (i, query) in queries.0.iter().enumerate() {
        if query.is_empty() {
            continue;
        }
        let mut sums = vec![0.0f64; columns];
        for x in query.clone() {
            token_means(x, &mut token);
            sums.iter_mut().zip(&token).for_each(|(s, v)| *s += v);
        }
        let count = query.len() as f64;
        for (j, sum) in sums.iter().enumerate() {
            weights[i * columns + j] = (sum / count) as f32;
        }
    }
    NodeWeights {
        rows,
        columns,
        weights,
    }
}

/// For one query token's attention row: the mean over each key node's tokens.
fn key_means(row: &[f32], keys: &Segments, out: &mut [f64]) {
    for (j, key) in keys.0.iter().enumerate() {
        out[j] = if key.is_empty() {
            0.0
        } else {
            let sum: f64 = row[key.start as usize..key.end as usize]
                .iter()
                .map(|&a| f64::from(a))
                .sum();
            sum / key.len() as f64
        };
    }
}

/// In-place softmax, stable against large logits.
fn softmax(values: &mut [f32]) {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in values.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inverse = (1.0 / sum) as f32;
    values.iter_mut().for_each(|v| *v *= inverse);
}

/// [`segment_mean`] over many windows, on all cores.
pub fn segment_mean_batch(windows: &[AttentionWindow]) -> Vec<NodeWeights> {
    use rayon::prelude::*;
    windows.par_iter().map(segment_mean).collect()
}

/// [`vector_attention`] over many windows, on all cores.
pub fn vector_attention_batch(windows: &[VectorWindow]) -> Vec<NodeWeights> {
    use rayon::prelude::*;
    windows.par_iter().map(vector_attention).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_mean_averages_over_key_then_query_tokens() {
        // 3 query tokens (node 0: tokens 0..2, node 1: token 2), 4 key
        // tokens (node 0: 0..1, node 1: 1..4).
        let attention = [
            0.4, 0.2, 0.2, 0.2, //
            0.0, 0.5, 0.5, 0.0, //
            1.0, 0.0, 0.0, 0.0,
        ];
        let q = Segments(vec![0..2, 2..3]);
        let k = Segments(vec![0..1, 1..4]);
        let w = segment_mean(&AttentionWindow {
            attention: &attention,
            query_tokens: 3,
            key_tokens: 4,
            query_segments: &q,
            key_segments: &k,
        });
        assert!((w.get(0, 0) - 0.2).abs() < 1e-6);
        assert!((w.get(0, 1) - (0.2 + 1.0 / 3.0) / 2.0).abs() < 1e-6);
        assert!((w.get(1, 0) - 1.0).abs() < 1e-6);
        assert_eq!(w.get(1, 1), 0.0);
    }

    #[test]
    fn empty_segments_give_zero_and_gaps_are_ignored() {
        let attention = [0.5, 0.25, 0.25, 0.1, 0.1, 0.8];
        let q = Segments(vec![0..0, 1..2]);
        let k = Segments(vec![0..1, 1..1, 2..3]);
        let w = segment_mean(&AttentionWindow {
            attention: &attention,
            query_tokens: 2,
            key_tokens: 3,
            query_segments: &q,
            key_segments: &k,
        });
        assert_eq!(w.weights[..3], [0.0, 0.0, 0.0]);
        assert_eq!(w.weights[3..], [0.1, 0.0, 0.8]);
    }

    #[test]
    fn vector_attention_equals_materialised_softmax_then_segment_mean() {
        let d = 4;
        let queries: Vec<f32> = (0..3 * d)
            .map(|i| ((i * 7 % 5) as f32 - 2.0) / 2.0)
            .collect();
        let keys: Vec<f32> = (0..5 * d)
            .map(|i| ((i * 3 % 7) as f32 - 3.0) / 3.0)
            .collect();
        let q = Segments(vec![0..1, 1..3]);
        let k = Segments(vec![0..2, 2..2, 2..5]);
        let fused = vector_attention(&VectorWindow {
            queries: &queries,
            keys: &keys,
            dimension: d,
            query_segments: &q,
            key_segments: &k,
        });
        let mut attention = Vec::new();
        for x in 0..3 {
            let mut row: Vec<f32> = (0..5)
                .map(|y| {
                    (0..d)
                        .map(|c| queries[x * d + c] * keys[y * d + c])
                        .sum::<f32>()
                        / 2.0
                })
                .collect();
            softmax(&mut row);
            attention.extend(row);
        }
        let materialised = segment_mean(&AttentionWindow {
            attention: &attention,
            query_tokens: 3,
            key_tokens: 5,
            query_segments: &q,
            key_segments: &k,
        });
        for (a, b) in fused.weights.iter().zip(&materialised.weights) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
        assert_eq!(fused.get(0, 1), 0.0);
    }

    #[test]
    fn segments_validate_order_and_bounds() {
        assert!(Segments(vec![0..2, 2..4]).validate(4, "key").is_ok());
        assert!(Segments(vec![0..2, 1..4]).validate(4, "key").is_err());
        assert!(
            Segments(vec![0..2, 2..5])
                .validate(4, "key")
                .unwrap_err()
                .contains("key segment 1")
        );
        assert_eq!(Segments::from_lengths([2, 0, 3]).0, vec![0..2, 2..2, 2..5]);
    }
}
