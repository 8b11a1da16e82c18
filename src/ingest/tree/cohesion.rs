//! Lexical cohesion: TextTiling-style depth scores over windows of units,
//! used to cut long unstructured runs into segments at topic shifts.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use unicode_segmentation::UnicodeSegmentation;

/// Units on each side of a gap whose words are compared.
const WINDOW: usize = 3;
/// How far the depth score climbs to each side looking for a peak.
const MAX_CLIMB: usize = 10;

/// Words too common to signal a topic.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "that", "this", "with", "are", "was", "not", "but", "from", "have", "has",
    "its", "can", "will", "would", "should", "could", "which", "their", "there", "they", "them",
    "then", "than", "these", "those", "also", "into", "been", "were", "such", "when", "where",
    "what", "who", "how", "all", "any", "one", "more", "most", "some", "may", "might", "must",
    "our", "you", "your", "his", "her",
];

/// A sparse bag of content words (hashed, with counts), sorted by hash.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct TermVector {
    terms: Vec<(u64, f32)>,
}

impl TermVector {
    /// Content words of `text`: lowercased, three letters or more (any
    /// ideograph counts), stopwords dropped.
    pub(super) fn from_text(text: &str) -> TermVector {
        let mut counts: HashMap<u64, f32> = HashMap::new();
        for word in text.unicode_words() {
            let lower = word.to_lowercase();
            let ideographic = lower.chars().any(|c| c as u32 >= 0x2E80);
            if (lower.chars().count() >= 3 || ideographic) && !STOPWORDS.contains(&lower.as_str()) {
                let mut hasher = DefaultHasher::new();
                lower.hash(&mut hasher);
                *counts.entry(hasher.finish()).or_default() += 1.0;
            }
        }
        let mut terms: Vec<(u64, f32)> = counts.into_iter().collect();
        terms.sort_unstable_by_key(|t| t.0);
        TermVector { terms }
    }

    /// The sum of several vectors.
    pub(super) fn sum<'a>(vectors: impl IntoIterator<Item = &'a TermVector>) -> TermVector {
        let mut counts: HashMap<u64, f32> = HashMap::new();
        for vector in vectors {
            for &(term, weight) in &vector.terms {
                *counts.entry(term).or_default() += weight;
            }
        }
        let mut terms: Vec<(u64, f32)> = counts.into_iter().collect();
        terms.sort_unstable_by_key(|t| t.0);
        TermVector { terms }
    }

    /// Cosine similarity; 0 when either side has no words.
    pub(super) fn cosine(&self, other: &TermVector) -> f32 {
        let (mut i, mut j, mut dot) = (0, 0, 0.0f32);
        while i < self.terms.len() && j < other.terms.len() {
            let (a, b) = (self.terms[i], other.terms[j]);
            match a.0.cmp(&b.0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    dot += a.1 * b.1;
                    i += 1;
                    j += 1;
                }
            }
        }
        let norm = |v: &TermVector| v.terms.iter().map(|t| t.1 * t.1).sum::<f32>().sqrt();
        let denominator = norm(self) * norm(other);
        if denominator == 0.0 {
            0.0
        } else {
            dot / denominator
        }
    }
}

/// Chooses where to cut `units`, whose sizes (in EDUs) are `weights`, into
/// `groups` runs: returns the sorted indices at which a new run starts
/// (`groups - 1` of them, or one per gap when there are fewer gaps, each in
/// `1..units.len()`). Cut `k` goes to the deepest valley of lexical
/// similarity between neighbouring windows among the gaps whose weight
/// before them lies within an eighth of a run of `k / groups` of the
/// total, so runs are balanced by size, not by count: every run holds at
/// most 1.25 of an even share of the weight plus its largest unit, however
/// unevenly sized the units are (a document's sections, say).
pub(super) fn cut_points(units: &[TermVector], weights: &[usize], groups: usize) -> Vec<usize> {
    let n = units.len();
    debug_assert_eq!(weights.len(), n, "one weight per unit");
    let wanted = groups.saturating_sub(1).min(n.saturating_sub(1));
    if wanted == 0 {
        return Vec::new();
    }
    let similarity: Vec<f32> = (0..=n)
        .map(|gap| {
            if gap == 0 || gap == n {
                return 0.0;
            }
            let left = TermVector::sum(&units[gap.saturating_sub(WINDOW)..gap]);
            let right = TermVector::sum(&units[gap..(gap + WINDOW).min(n)]);
            left.cosine(&right)
        })
        .collect();
    let peak = |gap: usize, step: fn(usize) -> Option<usize>| {
        let mut at = gap;
        for _ in 0..MAX_CLIMB {
            match step(at)
                .filter(|&next| (1..n).contains(&next) && similarity[next] >= similarity[at])
            {
                Some(next) => at = next,
                None => break,
            }
        }
        similarity[at]
    };
    let depth: Vec<f32> = (0..n)
        .map(|gap| {
            if gap == 0 {
                return f32::NEG_INFINITY;
            }
            peak(gap, |g| g.checked_sub(1)) + peak(gap, |g| Some(g + 1)) - 2.0 * similarity[gap]
        })
        .collect();
    // before[gap]: the weight of the units before the gap.
    let before: Vec<f64> = std::iter::once(0.0)
        .chain(weights.iter().scan(0.0, |sum, &w| {
            *sum += w as f64;
            Some(*sum)
        }))
        .collect();
    let total = before[n];
    let slack = total / (8.0 * groups as f64);
    let mut cuts: Vec<usize> = Vec::with_capacity(wanted);
    for k in 1..groups {
        if cuts.len() == wanted {
            break;
        }
        let target = total * k as f64 / groups as f64;
        let distance = |gap: usize| (before[gap] - target).abs();
        let first = before.partition_point(|&w| w < target - slack).max(1);
        let end = before.partition_point(|&w| w <= target + slack).min(n);
        let deepest = (first..end)
            .filter(|gap| !cuts.contains(gap))
            .max_by(|&a, &b| {
                depth[a]
                    .total_cmp(&depth[b])
                    .then(distance(b).total_cmp(&distance(a)))
            });
        // A unit wider than the window leaves it empty: the free gap
        // nearest the target then.
        let cut = deepest.or_else(|| {
            (1..n)
                .filter(|gap| !cuts.contains(gap))
                .min_by(|&a, &b| distance(a).total_cmp(&distance(b)))
        });
        cuts.extend(cut);
    }
    cuts.sort_unstable();
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_the_topic_shift() {
        let texts = [
            "Rust ownership rules govern memory.",
            "Ownership moves values between owners.",
            "Borrowing ownership references memory safely.",
            "Memory ownership prevents dangling references.",
            "Gardens need water and sunlight daily.",
            "Tomato gardens need sunlight.",
            "Water the garden tomatoes daily.",
            "Sunlight helps garden tomatoes grow.",
        ];
        let units: Vec<TermVector> = texts.iter().map(|t| TermVector::from_text(t)).collect();
        assert_eq!(cut_points(&units, &[1; 8], 2), vec![4]);
    }

    proptest::proptest! {
        /// Exactly the cuts asked for (or one per gap), distinct, in
        /// order, inside the units; and every run within 1.25 of an even
        /// share of the weight plus its largest unit, however the units'
        /// sizes and words vary.
        #[test]
        fn cuts_are_distinct_and_runs_balanced_by_weight(
            units in proptest::collection::vec((1usize..400, 0usize..6), 1..120),
            groups in 2usize..=16,
        ) {
            let words = ["alpha beta", "gamma delta", "ownership borrow", "garden tomato", "", "memory"];
            let vectors: Vec<TermVector> =
                units.iter().map(|&(_, w)| TermVector::from_text(words[w])).collect();
            let weights: Vec<usize> = units.iter().map(|&(w, _)| w).collect();
            let n = units.len();
            let cuts = cut_points(&vectors, &weights, groups);
            proptest::prop_assert_eq!(cuts.len(), (groups - 1).min(n - 1));
            proptest::prop_assert!(cuts.windows(2).all(|w| w[0] < w[1]));
            proptest::prop_assert!(cuts.iter().all(|&c| (1..n).contains(&c)));
            let total: usize = weights.iter().sum();
            let share = 1.25 * total as f64 / groups as f64;
            let bounds: Vec<usize> = std::iter::once(0).chain(cuts).chain(std::iter::once(n)).collect();
            for run in bounds.windows(2) {
                let run = &weights[run[0]..run[1]];
                let (weight, largest) = (run.iter().sum::<usize>(), run.iter().max().copied().unwrap_or(0));
                proptest::prop_assert!(
                    weight as f64 <= share + largest as f64 + 1e-9,
                    "a run of {} with largest unit {} against a share of {}", weight, largest, share
                );
            }
        }
    }

    #[test]
    fn many_small_units_then_a_few_large_ones_are_not_one_run() {
        // The shape that left one segment with most of a 50 MB document:
        // cutting by count put 15 cuts among the small units.
        let units = vec![TermVector::default(); 100];
        let weights: Vec<usize> = (0..100).map(|i| if i < 90 { 1 } else { 100 }).collect();
        let cuts = cut_points(&units, &weights, 16);
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cuts)
            .chain(std::iter::once(100))
            .collect();
        let heaviest = bounds
            .windows(2)
            .map(|run| weights[run[0]..run[1]].iter().sum::<usize>())
            .max()
            .unwrap();
        assert!(heaviest <= 200, "a run of {heaviest} of 1090");
    }

    #[test]
    fn cosine_is_one_for_identical_and_zero_for_disjoint() {
        let a = TermVector::from_text("alpha beta gamma");
        let b = TermVector::from_text("delta epsilon");
        assert!((a.cosine(&a) - 1.0).abs() < 1e-6);
        assert_eq!(a.cosine(&b), 0.0);
    }
}
