//! Token counts in a real LLM tokenizer (o200k_base); every budget in edudb
//! is in these tokens.

use crate::model::edu::Span;

/// Number of o200k_base tokens in `text` (special tokens treated as text),
/// exactly as tiktoken counts them. bpe-openai's tokenizer is deserialised
/// once per process (about 35 ms, against 80 ms for tiktoken-rs to build
/// its tables) and counts about four times as fast.
pub fn count(text: &str) -> u32 {
    u32::try_from(bpe_openai::o200k_base().count(text)).unwrap_or(u32::MAX)
}

/// Starts loading the tokenizer on a background thread, so a process that
/// is about to count tokens (a write) overlaps the load with its other
/// start-up work, such as opening the store.
pub fn load_in_background() {
    std::thread::spawn(|| {
        bpe_openai::o200k_base();
    });
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
