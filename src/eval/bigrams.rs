//! Word bigrams, the unit FinanceBench-style evidence passages are scored
//! in: a passage's place in the stored text is unknown, so what counts is
//! how many of its consecutive word pairs were picked.

use std::collections::HashSet;

use crate::compute::embed::hashed::words;

/// Two consecutive words.
pub type Bigram = (String, String);

/// A text's word bigrams: consecutive pairs of its words, a word being a
/// lowercased run of letters and digits (as `benches/pdf/extractors.py`
/// counts them).
pub fn word_bigrams(text: &str) -> HashSet<Bigram> {
    words(text)
        .windows(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect()
}
