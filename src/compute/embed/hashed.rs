//! The built-in embedder: signed feature hashing of word unigrams, word
//! bigrams and character n-grams, with sublinear term weighting, then L2
//! normalisation. Deterministic, no model file, no network.
//!
//! What it can match: texts sharing words, word pairs, or word pieces
//! (stems, inflections, compounds and misspellings share character
//! trigrams and four-grams). What it cannot: meaning without shared
//! surface form. "car" and "automobile" are unrelated to it; a paraphrase
//! with new words scores near zero. Use an [`crate::compute::embed::http::HttpEmbedder`]
//! with a real model for that.

use std::hash::{BuildHasher, Hasher};

use crate::compute::embed::embedder::Embedder;
use crate::compute::vector::normalise;
use crate::error::EmbedError;

/// Vector length of the default store embedder.
pub const DEFAULT_DIMENSION: usize = 256;

/// Character n-gram lengths hashed from every word (with boundary marks).
const CHAR_NGRAMS: [usize; 2] = [3, 4];

/// Relative weights of the three feature families.
const UNIGRAM_WEIGHT: f32 = 1.0;
const BIGRAM_WEIGHT: f32 = 0.7;
const CHAR_NGRAM_WEIGHT: f32 = 0.35;

/// Bumped whenever the features change, so stores built with an older
/// version refuse to mix vectors.
const VERSION: u32 = 1;

/// Deterministic hashed n-gram embedder (see the module docs).
#[derive(Debug, Clone)]
pub struct HashedEmbedder {
    dimension: usize,
}

/// A fixed-key hasher: feature hashing must give the same buckets in every
/// process, so `std`'s randomly keyed hasher will not do.
#[derive(Clone, Copy, Default)]
struct FixedState;

impl BuildHasher for FixedState {
    type Hasher = std::hash::DefaultHasher;
    fn build_hasher(&self) -> Self::Hasher {
        std::hash::DefaultHasher::new()
    }
}

/// The hash of feature `family` over the concatenation of `parts`: the
/// same as hashing the joined text (SipHash is streaming), without
/// building it.
fn feature_hash(family: u8, parts: &[&[u8]]) -> u64 {
    let mut hasher = FixedState.build_hasher();
    hasher.write_u8(family);
    for part in parts {
        hasher.write(part);
    }
    hasher.finish()
}

/// Lowercased words: runs of alphanumeric characters.
pub fn words(text: &str) -> Vec<String> {
    word_spans(text).map(str::to_lowercase).collect()
}

/// The words of `text` as written: its maximal alphanumeric runs.
pub fn word_spans(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

impl HashedEmbedder {
    /// An embedder giving vectors of `dimension` (at least 16).
    pub fn new(dimension: usize) -> Result<HashedEmbedder, EmbedError> {
        if !(16..=65_536).contains(&dimension) {
            return Err(EmbedError::Config(format!(
                "hashed embedder dimension {dimension} is out of range 16..=65536"
            )));
        }
        Ok(HashedEmbedder { dimension })
    }

    /// The features of `words`, in increasing hash order (so features are
    /// summed in the same order every time and the vector is bit-for-bit
    /// deterministic: float addition is not associative): (hash,
    /// occurrences, family weight of its first occurrence).
    fn features(&self, words: &[String]) -> Vec<(u64, f32, f32)> {
        let mut all: Vec<(u64, f32)> = Vec::with_capacity(words.len() * 16);
        let mut marked = String::new();
        let mut starts: Vec<usize> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            all.push((feature_hash(b'w', &[word.as_bytes()]), UNIGRAM_WEIGHT));
            if let Some(next) = words.get(i + 1) {
                let parts = [word.as_bytes(), b" ", next.as_bytes()];
                all.push((feature_hash(b'b', &parts), BIGRAM_WEIGHT));
            }
            // Character n-grams of `<word>`, hashed from slices of it.
            marked.clear();
            marked.push('<');
            marked.push_str(word);
            marked.push('>');
            starts.clear();
            starts.extend(marked.char_indices().map(|(at, _)| at));
            starts.push(marked.len());
            let chars = starts.len() - 1;
            for n in CHAR_NGRAMS {
                for first in 0..chars.saturating_sub(n - 1) {
                    let gram = &marked.as_bytes()[starts[first]..starts[first + n]];
                    all.push((feature_hash(b'c', &[gram]), CHAR_NGRAM_WEIGHT));
                }
            }
        }
        // Stable: within one hash the first occurrence comes first.
        all.sort_by_key(|&(hash, _)| hash);
        let mut features: Vec<(u64, f32, f32)> = Vec::with_capacity(all.len());
        for (hash, weight) in all {
            match features.last_mut() {
                Some(last) if last.0 == hash => last.1 += 1.0,
                _ => features.push((hash, 1.0, weight)),
            }
        }
        features
    }

    /// Accumulates features into a vector: bucket `h mod d`, sign from the
    /// top hash bit, weight `family weight × (1 + ln count)` (sublinear, so
    /// a repeated word does not drown the rest).
    fn vector(&self, words: &[String]) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        for (hash, count, weight) in self.features(words) {
            let bucket = (hash % self.dimension as u64) as usize;
            let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
            v[bucket] += sign * weight * (1.0 + count.ln());
        }
        normalise(&mut v);
        v
    }

    /// One vector per word of `text` (the words [`words`] finds): the
    /// word's own features plus half its neighbours' (the words either
    /// side), L2-normalised. Used for token-level attention, where each
    /// token needs its own vector. Each distinct word is hashed once.
    pub fn token_vectors(&self, text: &str) -> Vec<Vec<f32>> {
        let words = words(text);
        let mut own: std::collections::HashMap<&str, Vec<f32>> = std::collections::HashMap::new();
        for word in &words {
            own.entry(word.as_str())
                .or_insert_with(|| self.vector(std::slice::from_ref(word)));
        }
        (0..words.len())
            .map(|i| {
                let mut token = own[words[i].as_str()].clone();
                let neighbours = [i.checked_sub(1), Some(i + 1).filter(|&n| n < words.len())];
                for n in neighbours.into_iter().flatten() {
                    token
                        .iter_mut()
                        .zip(&own[words[n].as_str()])
                        .for_each(|(t, v)| *t += 0.5 * v);
                }
                normalise(&mut token);
                token
            })
            .collect()
    }
}

impl Embedder for HashedEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.vector(&words(t))).collect())
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn identity(&self) -> String {
        format!("hashed-ngram-v{VERSION}:{}", self.dimension)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::vector::dot;

    fn embed_one(e: &HashedEmbedder, text: &str) -> Vec<f32> {
        e.embed(&[text]).unwrap().remove(0)
    }

    #[test]
    fn vectors_are_unit_length_and_deterministic() {
        let e = HashedEmbedder::new(DEFAULT_DIMENSION).unwrap();
        let a = embed_one(
            &e,
            "The borrow checker rejects aliasing mutable references.",
        );
        assert_eq!(a.len(), DEFAULT_DIMENSION);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
        // Bit-for-bit, every time (a per-process hash order once made the
        // last bit of some components vary).
        for _ in 0..50 {
            let again = HashedEmbedder::new(DEFAULT_DIMENSION).unwrap();
            assert_eq!(
                a,
                embed_one(
                    &again,
                    "The borrow checker rejects aliasing mutable references."
                )
            );
        }
    }

    #[test]
    fn shared_words_and_inflections_score_closer_than_unrelated_text() {
        let e = HashedEmbedder::new(DEFAULT_DIMENSION).unwrap();
        let query = embed_one(&e, "compiling generic functions");
        let related = embed_one(
            &e,
            "The compiler compiles each generic function once per type.",
        );
        let unrelated = embed_one(&e, "Rainfall in the valley peaked during the monsoon.");
        assert!(dot(&query, &related) > dot(&query, &unrelated) + 0.1);
    }

    #[test]
    fn text_without_words_is_the_zero_vector() {
        let e = HashedEmbedder::new(64).unwrap();
        assert!(embed_one(&e, " \n\t—…").iter().all(|&x| x == 0.0));
    }

    #[test]
    fn token_vectors_follow_the_words() {
        let e = HashedEmbedder::new(64).unwrap();
        let tokens = e.token_vectors("Trees nest; spans tile.");
        assert_eq!(tokens.len(), 4);
        for t in &tokens {
            assert!((dot(t, t) - 1.0).abs() < 1e-5);
        }
        // A word keeps most of its identity, and its context tells repeats apart.
        let again = e.token_vectors("spans nest; trees tile.");
        assert!(dot(&tokens[0], &again[2]) > 0.6);
        assert!(dot(&tokens[0], &again[2]) < 0.999);
    }

    /// The features as the first version computed them (a map keyed by
    /// hash, each n-gram and bigram built as a string): the oracle the
    /// allocation-free [`HashedEmbedder::features`] must match bit for bit,
    /// so stores built before keep comparable vectors.
    fn features_as_built_first(words: &[String]) -> Vec<(u64, f32, f32)> {
        let hash = |family: u8, text: &str| feature_hash(family, &[text.as_bytes()]);
        let mut counts: std::collections::BTreeMap<u64, (f32, f32)> = Default::default();
        let mut add = |h: u64, weight: f32| counts.entry(h).or_insert((0.0, weight)).0 += 1.0;
        for (i, word) in words.iter().enumerate() {
            add(hash(b'w', word), UNIGRAM_WEIGHT);
            if let Some(next) = words.get(i + 1) {
                add(hash(b'b', &format!("{word} {next}")), BIGRAM_WEIGHT);
            }
            let marked: Vec<char> = std::iter::once('<')
                .chain(word.chars())
                .chain(std::iter::once('>'))
                .collect();
            for n in CHAR_NGRAMS {
                for gram in marked.windows(n) {
                    add(
                        hash(b'c', &gram.iter().collect::<String>()),
                        CHAR_NGRAM_WEIGHT,
                    );
                }
            }
        }
        counts.into_iter().map(|(h, (c, w))| (h, c, w)).collect()
    }

    #[test]
    fn features_match_the_first_version_on_the_rfcs() {
        let e = HashedEmbedder::new(DEFAULT_DIMENSION).unwrap();
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/rust_rfcs/text");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        files.sort();
        for path in files.iter().take(60) {
            let text = std::fs::read_to_string(path).unwrap();
            for paragraph in text.split("\n\n") {
                let words = words(paragraph);
                assert_eq!(
                    e.features(&words),
                    features_as_built_first(&words),
                    "{}",
                    path.display()
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn features_match_the_first_version_on_any_text(text in "\\PC{0,80}") {
            let e = HashedEmbedder::new(64).unwrap();
            let words = words(&text);
            proptest::prop_assert_eq!(e.features(&words), features_as_built_first(&words));
        }
    }

    #[test]
    fn dimensions_out_of_range_are_refused() {
        assert!(HashedEmbedder::new(8).is_err());
        assert_eq!(
            HashedEmbedder::new(32).unwrap().identity(),
            "hashed-ngram-v1:32"
        );
    }
}
