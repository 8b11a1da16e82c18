//! Token counts in a real LLM tokenizer (o200k_base); every budget in edudb
//! is in these tokens.

use std::sync::LazyLock;

use bpe_openai::Tokenizer;
use bpe_openai::byte_pair_encoding::BytePairEncoding;

use crate::model::edu::Span;

/// bpe-openai's o200k_base tokenizer, its tables decoded from the postcard
/// copy build.rs wrote (about 23 ms, against 33 ms for the MessagePack
/// bpe-openai ships). The pre-tokenisation patterns are bpe-openai 0.3's
/// for o200k_base; `tests/it/tokens.rs` checks the counts against
/// tiktoken on every EDU of the RFC corpus.
static O200K_BASE: LazyLock<Tokenizer> = LazyLock::new(|| {
    let tables = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.postcard"));
    let bpe: BytePairEncoding =
        postcard::from_bytes(tables).expect("build.rs wrote the o200k_base tables");
    let words = [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+$",
    ]
    .join("|");
    // `\s+\s` stands for tiktoken's look-ahead `\s+(?!\S)`: its last
    // character is dropped from the match.
    Tokenizer::new_lookahead(
        bpe,
        &[(&words, false), (r"\s+\s", true), (r"\s+", false)],
        false,
    )
    .expect("the o200k_base patterns compile")
});

/// Number of o200k_base tokens in `text` (special tokens treated as text),
/// exactly as tiktoken counts them. The tokenizer is loaded once per
/// process and counts about four times as fast as tiktoken-rs.
pub fn count(text: &str) -> u32 {
    u32::try_from(O200K_BASE.count(text)).unwrap_or(u32::MAX)
}

/// Starts loading the tokenizer on a background thread, so a process that
/// is about to count tokens (a write) overlaps the load with its other
/// start-up work, such as opening the store.
pub fn load_in_background() {
    std::thread::spawn(|| LazyLock::force(&O200K_BASE));
}

/// The name of the tokenizer, recorded in stores and reports.
pub const TOKENIZER: &str = "o200k_base";

/// Token counts of one document's EDUs, as prefix sums.
#[derive(Debug, Clone, Default)]
pub struct TokenPrefix(Vec<u64>);

impl TokenPrefix {
    /// Prefix sums of `tokens` (one entry per EDU).
    pub fn new(tokens: impl IntoIterator<Item = u32>) -> TokenPrefix {
        let mut sums = vec![0];
        let mut total = 0u64;
        for t in tokens {
            total += u64::from(t);
            sums.push(total);
        }
        TokenPrefix(sums)
    }

    /// Tokens of the EDUs in `span`.
    pub fn tokens(&self, span: Span) -> u64 {
        self.0[span.last as usize + 1] - self.0[span.first as usize]
    }
}

impl AsRef<TokenPrefix> for TokenPrefix {
    fn as_ref(&self) -> &TokenPrefix {
        self
    }
}

/// Consecutive batches of items (nodes, EDUs) by their token counts: each
/// takes items while its tokens stay within `window` (at least one item
/// each).
pub fn token_batches(tokens: &[u32], window: u32) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut sum = 0u32;
    for (i, &t) in tokens.iter().enumerate() {
        if i > start && sum.saturating_add(t) > window {
            out.push(start..i);
            start = i;
            sum = 0;
        }
        sum = sum.saturating_add(t);
    }
    if start < tokens.len() {
        out.push(start..tokens.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::token_batches;

    #[test]
    fn batches_fill_up_to_the_window_and_keep_order() {
        let tokens = [3, 4, 2, 5, 1];
        assert_eq!(token_batches(&tokens, 7), vec![0..2, 2..4, 4..5]);
        assert_eq!(token_batches(&tokens, 100), vec![0..5]);
        assert_eq!(token_batches(&[], 7), Vec::<std::ops::Range<usize>>::new());
        // An item larger than the window is a batch of its own.
        assert_eq!(token_batches(&[9, 1], 7), vec![0..1, 1..2]);
    }

    #[test]
    fn counts_real_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello"), 1);
        let sentence = "The quick brown fox jumps over the lazy dog.";
        let n = super::count(sentence);
        assert!((8..=12).contains(&n), "{n}");
    }
}
