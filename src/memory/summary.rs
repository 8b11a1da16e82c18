//! Extractive summaries of turns, branches and topics: always spans of
//! the turns' own text, never new text.
//!
//! - A turn's summary is its most central EDU: the one whose stored vector
//!   is most similar to the turn's vector (the unit mean of its EDU
//!   vectors); its first EDU when no EDU has a usable vector.
//! - A branch's or topic's summary is a short list of turn summaries
//!   picked by centrality (similarity to its centroid) under
//!   [`SUMMARY_TOKEN_CAP`]. It is stored, and updated **incrementally**
//!   when a turn joins: the candidates are the stored picks plus the new
//!   turn's summary, re-ranked against the updated centroid. Branches and
//!   topics the turn does not join are not touched.

use crate::compute::vector::{cosine, mean_unit};
use crate::error::Result;
use crate::model::dialogue::SummaryPick;
use crate::model::document::Document;
use crate::model::edu::Span;

/// Most tokens a branch or topic summary holds (a single pick longer than
/// this is still kept when it is the most central: a summary is never empty).
pub const SUMMARY_TOKEN_CAP: u32 = 96;
pub use crate::model::dialogue::MAX_SUMMARY_PICKS;

/// Turn `turn`'s summary pick in `doc` (its most central EDU, by the EDU
/// vectors `edu_vectors`, row-major with `dimension` columns) and the
/// pick's unit vector.
pub fn turn_summary(
    turn: u32,
    doc: &Document,
    edu_vectors: &[f32],
    dimension: usize,
) -> (SummaryPick, Vec<f32>) {
    let last = doc.edus.len().saturating_sub(1);
    let centre = mean_unit(edu_vectors, dimension, 0, last);
    let mut best = (0usize, f32::NEG_INFINITY);
    for index in 0..doc.edus.len() {
        let row = &edu_vectors[index * dimension..(index + 1) * dimension];
        let similarity = cosine(row, &centre);
        if similarity > best.1 {
            best = (index, similarity);
        }
    }
    let index = if best.1 > 0.0 { best.0 } else { 0 };
    let edu = &doc.edus[index];
    (
        SummaryPick {
            turn,
            edus: Span::new(index as u32, index as u32),
            bytes: [edu.start, edu.end],
            tokens: edu.tokens,
        },
        mean_unit(edu_vectors, dimension, index, index),
    )
}

/// The summary after a turn joins: the stored `picks` plus `new` (a pick
/// with its unit vector) ranked by cosine to `centroid`, taken greedily
/// (ties to the earlier turn) while they fit [`SUMMARY_TOKEN_CAP`] and
/// [`MAX_SUMMARY_PICKS`], returned in turn order. `vector_of` gives a
/// stored pick's unit vector.
pub fn update(
    picks: &[SummaryPick],
    new: (SummaryPick, Vec<f32>),
    centroid: &[f32],
    vector_of: &mut dyn FnMut(&SummaryPick) -> Result<Vec<f32>>,
) -> Result<Vec<SummaryPick>> {
    let mut scored: Vec<(SummaryPick, f32)> = Vec::with_capacity(picks.len() + 1);
    for pick in picks {
        scored.push((*pick, cosine(&vector_of(pick)?, centroid)));
    }
    scored.push((new.0, cosine(&new.1, centroid)));
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.turn.cmp(&b.0.turn)));
    let mut chosen: Vec<SummaryPick> = Vec::new();
    let mut tokens = 0u32;
    for (pick, _) in scored {
        if chosen.len() == MAX_SUMMARY_PICKS {
            break;
        }
        if chosen.is_empty() || tokens + pick.tokens <= SUMMARY_TOKEN_CAP {
            tokens += pick.tokens;
            chosen.push(pick);
        }
    }
    chosen.sort_by_key(|p| p.turn);
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(turn: u32, tokens: u32) -> SummaryPick {
        SummaryPick {
            turn,
            edus: Span::new(0, 0),
            bytes: [0, 4],
            tokens,
        }
    }

    #[test]
    fn update_ranks_by_centrality_under_the_cap() {
        let vectors = [vec![1.0, 0.0], vec![0.0, 1.0], vec![0.6, 0.8]];
        let mut vector_of = |p: &SummaryPick| Ok(vectors[p.turn as usize].clone());
        // Centroid close to turn 0's direction: 0 first, then 2, then 1.
        let centroid = [0.9, 0.3];
        let picks = [pick(0, 40), pick(1, 40)];
        let updated = update(
            &picks,
            (pick(2, 40), vectors[2].clone()),
            &centroid,
            &mut vector_of,
        )
        .unwrap();
        // 0 and 2 fit 96 tokens together; 1 would exceed the cap.
        assert_eq!(updated.iter().map(|p| p.turn).collect::<Vec<_>>(), [0, 2]);
        // A single pick over the cap is kept rather than leaving nothing.
        let alone = update(
            &[],
            (pick(5, 500), vec![1.0, 0.0]),
            &centroid,
            &mut vector_of,
        )
        .unwrap();
        assert_eq!(alone.len(), 1);
    }
}
