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

/// Chooses where to cut `units` into `groups` runs: returns the sorted
/// indices at which a new run starts (`groups - 1` of them, each in
/// `1..units.len()`). Cuts go to the deepest valleys of lexical similarity
/// between neighbouring windows, keeping every run at least
/// `len / (2 * groups)` units long.
pub(super) fn cut_points(units: &[TermVector], groups: usize) -> Vec<usize> {
    let n = units.len();
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
    let mut candidates: Vec<(f32, usize)> = (1..n)
        .map(|gap| {
            let depth = peak(gap, |g| g.checked_sub(1)) + peak(gap, |g| Some(g + 1))
                - 2.0 * similarity[gap];
            (depth, gap)
        })
        .collect();
    let ideal = |gap: usize| {
        (0..groups)
            .map(|k| (k * n / groups).abs_diff(gap))
            .min()
            .unwrap_or(0)
    };
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(ideal(a.1).cmp(&ideal(b.1))));
    let min_run = (n / (2 * groups)).max(1);
    let mut cuts: Vec<usize> = Vec::with_capacity(wanted);
    let fits = |cuts: &[usize], gap: usize| {
        gap >= min_run && n - gap >= min_run && cuts.iter().all(|&c| c.abs_diff(gap) >= min_run)
    };
    for &(_, gap) in &candidates {
        if cuts.len() == wanted {
            break;
        }
        if fits(&cuts, gap) {
            cuts.push(gap);
        }
    }
    for k in 1..groups {
        if cuts.len() == wanted {
            break;
        }
        let gap = k * n / groups;
        if gap > 0 && !cuts.contains(&gap) {
            cuts.push(gap);
        }
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
        assert_eq!(cut_points(&units, 2), vec![4]);
    }

    #[test]
    fn always_returns_the_requested_number_of_distinct_cuts() {
        let units = vec![TermVector::default(); 50];
        for groups in 2..=16 {
            let cuts = cut_points(&units, groups);
            assert_eq!(cuts.len(), groups - 1);
            assert!(cuts.windows(2).all(|w| w[0] < w[1]));
            assert!(cuts.iter().all(|&c| (1..50).contains(&c)));
        }
    }

    #[test]
    fn cosine_is_one_for_identical_and_zero_for_disjoint() {
        let a = TermVector::from_text("alpha beta gamma");
        let b = TermVector::from_text("delta epsilon");
        assert!((a.cosine(&a) - 1.0).abs() < 1e-6);
        assert_eq!(a.cosine(&b), 0.0);
    }
}
