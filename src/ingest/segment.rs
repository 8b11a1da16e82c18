//! Segmentation of running prose into EDUs.
//!
//! Sentences come from Unicode sentence boundaries (UAX #29), repaired where
//! they break wrongly (abbreviations, initials, inside code spans, before a
//! lowercase continuation). Sentences are then split into clauses at
//! discourse connectives and clause punctuation, but only where both sides
//! keep at least [`MIN_CLAUSE_WORDS`] words, so no EDU is a fragment.
//! Chinese and Japanese sentence and clause punctuation is handled the same
//! way (each ideograph counts as a word, as in UAX #29).
//!
//! Every returned range is trimmed, non-empty, on `char` boundaries, in
//! order and disjoint; what lies between them is whitespace only. Work is
//! linear in the length of the input.
//!
//! No EDU is longer than [`MAX_EDU_TOKENS`]: text that runs on without a
//! sentence or clause boundary (a log, a transcript without punctuation,
//! a long code listing or table row) is cut by [`cap_length`] at the last
//! line break, clause mark or space within the limit, so that every EDU
//! can fit a budget.

use std::ops::Range;

use unicode_segmentation::UnicodeSegmentation;

use crate::ingest::layout::trim_range;
use crate::model::tokens;

/// Longest EDU, in o200k_base tokens.
pub const MAX_EDU_TOKENS: u32 = 256;

/// Fewest words each side of a clause split must keep.
pub const MIN_CLAUSE_WORDS: usize = 5;

/// Words that end in a period without ending the sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "e.g", "i.e", "cf", "fig", "figs",
    "no", "nos", "vol", "p", "pp", "approx", "eq", "sec", "ch", "ref", "resp", "incl", "al", "ca",
    "viz", "etc",
];

/// Connectives that open a new clause when preceded by a comma.
const COMMA_CONNECTIVES: &[&str] = &[
    "but",
    "because",
    "although",
    "though",
    "whereas",
    "while",
    "so",
    "yet",
    "since",
    "unless",
    "which",
    "however",
    "otherwise",
    "therefore",
    "and",
    "or",
];

/// Connectives that open a new clause even without a comma before them.
const BARE_CONNECTIVES: &[&str] = &["because", "although", "whereas", "unless"];

/// Splits `text[range]` (one paragraph) into EDU byte ranges into `text`.
pub fn split_edus(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let mut clauses = Vec::new();
    for sentence in sentences(text, range) {
        split_clauses(text, sentence, &mut clauses);
    }
    clauses
        .into_iter()
        .flat_map(|clause| cap_length(text, clause))
        .collect()
}

/// `text[range]` (trimmed) cut into pieces of at most [`MAX_EDU_TOKENS`]
/// tokens: each piece ends at the last line break within the limit, else
/// after the last clause mark (`,` `;` `:`) or space, else where the limit
/// falls (on a `char` boundary). A range within the limit is returned
/// whole; a blank range gives none. Pieces are trimmed, non-empty and in
/// order.
pub fn cap_length(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let limit = MAX_EDU_TOKENS as usize;
    if text[range.clone()].trim().is_empty() {
        return Vec::new();
    }
    // A token is at least one byte: a range this short is within the limit.
    if range.len() <= limit || tokens::count(&text[range.clone()]) <= MAX_EDU_TOKENS {
        return vec![range];
    }
    let mut pieces = Vec::new();
    let mut start = range.start;
    while start < range.end {
        // Try the next 4 × limit bytes (about four bytes a token), cut at
        // a boundary; halve while over the limit (`limit` bytes never are).
        let mut end = floor_boundary(text, range.end.min(start + 4 * limit));
        let cut = loop {
            let cut = if end == range.end {
                end
            } else {
                boundary_before(text, start, end)
            };
            if cut - start <= limit || tokens::count(&text[start..cut]) <= MAX_EDU_TOKENS {
                break cut;
            }
            // Over `limit` bytes, so half is past the first character.
            end = floor_boundary(text, start + (cut - start) / 2);
        };
        let piece = trim_range(text, start..cut);
        if !piece.is_empty() {
            pieces.push(piece);
        }
        start = cut;
    }
    pieces
}

/// Where to cut `text[start..end]` (`end` inside the range being capped):
/// after its last line break, else after its last clause mark followed by
/// a space, else after its last space, else at `end`; never at `start`.
fn boundary_before(text: &str, start: usize, end: usize) -> usize {
    let window = &text[start..end];
    let last = |wanted: &dyn Fn(usize, char) -> bool| {
        (window.char_indices().rev())
            .find(|&(i, c)| wanted(i, c))
            .map(|(i, c)| start + i + c.len_utf8())
    };
    last(&|_, c| c == '\n')
        .or_else(|| last(&|i, c| matches!(c, ',' | ';' | ':') && window[i + 1..].starts_with(' ')))
        .or_else(|| last(&|_, c| c.is_whitespace()))
        .unwrap_or(end)
}

/// The last `char` boundary of `text` at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Sentence ranges of `text[range]`, trimmed and repaired (abbreviations,
/// initials, code spans and lowercase continuations do not end a sentence).
pub fn sentences(text: &str, range: Range<usize>) -> Vec<Range<usize>> {
    let slice = &text[range.clone()];
    // Hard line breaks inside a paragraph are not sentence boundaries; UAX #29
    // treats them as such, so segment a copy with line breaks as spaces
    // (same byte length, so offsets carry over).
    let flattened: String = slice
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut backticks_before = 0usize;
    for (offset, piece) in flattened.split_sentence_bound_indices() {
        let piece_range = trim_range(
            text,
            range.start + offset..range.start + offset + piece.len(),
        );
        let inside_code = backticks_before % 2 == 1;
        backticks_before += piece.bytes().filter(|&b| b == b'`').count();
        if piece_range.is_empty() {
            continue;
        }
        let merge = match out.last() {
            Some(previous) => {
                inside_code
                    || ends_with_abbreviation(&text[previous.clone()])
                    || starts_lowercase(&text[piece_range.clone()])
                    || !text[piece_range.clone()].chars().any(char::is_alphanumeric)
            }
            None => false,
        };
        match out.last_mut() {
            Some(previous) if merge => previous.end = piece_range.end,
            _ => out.push(piece_range),
        }
    }
    out
}

/// Whether a sentence ends in a period that belongs to an abbreviation or an initial.
fn ends_with_abbreviation(sentence: &str) -> bool {
    let Some(body) = sentence.strip_suffix('.') else {
        return false;
    };
    let last_word = body
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    let mut letters = last_word.chars();
    let single_initial =
        matches!((letters.next(), letters.next()), (Some(c), None) if c.is_uppercase());
    single_initial || ABBREVIATIONS.contains(&last_word.to_lowercase().as_str())
}

/// Whether a piece continues the previous sentence (starts with a lowercase letter or digit).
fn starts_lowercase(piece: &str) -> bool {
    piece.chars().next().is_some_and(|c| c.is_lowercase())
}

/// Whether `c` ends a CJK clause (full-width comma, semicolon, colon, enumeration comma).
fn is_cjk_clause_mark(c: char) -> bool {
    matches!(c, '，' | '；' | '：' | '、')
}

/// Splits one sentence into clauses at safe points and appends them to `out`.
fn split_clauses(text: &str, sentence: Range<usize>, out: &mut Vec<Range<usize>>) {
    let slice = &text[sentence.clone()];
    let words: Vec<usize> = slice.unicode_word_indices().map(|(i, _)| i).collect();
    let words_between =
        |a: usize, b: usize| words.partition_point(|&w| w < b) - words.partition_point(|&w| w < a);
    let mut cut = 0usize;
    for point in candidate_points(slice) {
        if words_between(cut, point) >= MIN_CLAUSE_WORDS
            && words_between(point, slice.len()) >= MIN_CLAUSE_WORDS
        {
            out.push(trim_range(
                text,
                sentence.start + cut..sentence.start + point,
            ));
            cut = point;
        }
    }
    out.push(trim_range(text, sentence.start + cut..sentence.end));
}

/// Byte offsets in `sentence` where a clause may start, in increasing order:
/// after `;`/`:` + space, before a connective after a comma, before a bare
/// subordinating connective, and after CJK clause punctuation. Offsets
/// inside code spans, parentheses or quotes are never returned.
fn candidate_points(sentence: &str) -> Vec<usize> {
    let mut points = Vec::new();
    let mut in_code = false;
    let mut parens = 0usize;
    let bytes = sentence.as_bytes();
    for (i, c) in sentence.char_indices() {
        match c {
            '`' => in_code = !in_code,
            '(' | '[' => parens += 1,
            ')' | ']' => parens = parens.saturating_sub(1),
            _ => {}
        }
        if in_code || parens > 0 {
            continue;
        }
        let after = i + c.len_utf8();
        if (c == ';' || c == ':') && bytes.get(after) == Some(&b' ') {
            points.push(after + 1);
        } else if is_cjk_clause_mark(c) && after < sentence.len() {
            points.push(after);
        } else if c == ' ' && i > 0 {
            let next_word = word_at(sentence, after);
            let after_comma = bytes[i - 1] == b',';
            let lower = next_word.to_lowercase();
            if (after_comma && COMMA_CONNECTIVES.contains(&lower.as_str()))
                || (!after_comma && BARE_CONNECTIVES.contains(&lower.as_str()))
            {
                points.push(after);
            }
        }
    }
    points
}

/// The ASCII-alphabetic word starting at `start`.
fn word_at(s: &str, start: usize) -> &str {
    let rest = &s[start..];
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edus(text: &str) -> Vec<&str> {
        split_edus(text, 0..text.len())
            .into_iter()
            .map(|r| &text[r])
            .collect()
    }

    #[test]
    fn splits_sentences() {
        assert_eq!(
            edus("The cat sat. The dog ran!  Why?"),
            ["The cat sat.", "The dog ran!", "Why?"]
        );
    }

    #[test]
    fn keeps_abbreviations_initials_and_numbers() {
        assert_eq!(
            edus("Dr. Smith met J. R. Tolkien on p. 3.5 of the book, e.g. chapter two. It rained."),
            [
                "Dr. Smith met J. R. Tolkien on p. 3.5 of the book, e.g. chapter two.",
                "It rained."
            ]
        );
    }

    #[test]
    fn keeps_urls_and_code_spans_whole() {
        assert_eq!(
            edus("See https://example.com/a.b?x=1 for details. Call `a. B()` now. Done here."),
            [
                "See https://example.com/a.b?x=1 for details.",
                "Call `a. B()` now.",
                "Done here."
            ]
        );
    }

    #[test]
    fn hard_wrapped_lines_are_not_boundaries() {
        assert_eq!(
            edus("This line is wrapped\nin the middle. Next one."),
            ["This line is wrapped\nin the middle.", "Next one."]
        );
    }

    #[test]
    fn splits_clauses_only_when_both_sides_are_substantial() {
        assert_eq!(
            edus(
                "The compiler rejects the program early, because the borrow checker finds two mutable borrows."
            ),
            [
                "The compiler rejects the program early,",
                "because the borrow checker finds two mutable borrows."
            ]
        );
        assert_eq!(
            edus("It failed, because of rain."),
            ["It failed, because of rain."]
        );
        assert_eq!(
            edus(
                "There are two cases to consider here: the value is moved or the value is copied."
            ),
            [
                "There are two cases to consider here:",
                "the value is moved or the value is copied."
            ]
        );
    }

    #[test]
    fn no_split_inside_parentheses_or_code() {
        let text =
            "We keep this together (because the parenthetical clause is long enough) as one unit.";
        assert_eq!(edus(text), [text]);
    }

    #[test]
    fn chinese_sentences_and_clauses() {
        let text = "今天天气很好，我们一起去公园散步吧。明天会下雨！";
        assert_eq!(
            edus(text),
            ["今天天气很好，", "我们一起去公园散步吧。", "明天会下雨！"]
        );
    }

    #[test]
    fn ranges_are_trimmed_and_relative_to_the_whole_text() {
        let text = "# Title\n\n  First one here. Second one.  \n";
        let start = text.find("First").unwrap();
        let ranges = split_edus(text, start - 2..text.len());
        assert_eq!(
            ranges.iter().map(|r| &text[r.clone()]).collect::<Vec<_>>(),
            ["First one here.", "Second one."]
        );
    }

    /// Pieces of `cap_length` over the whole of `text`, checked: each within
    /// the limit, trimmed, in order, and with only whitespace between.
    fn capped(text: &str) -> Vec<&str> {
        let pieces = cap_length(text, trim_range(text, 0..text.len()));
        let mut at = 0;
        for piece in &pieces {
            assert!(piece.start >= at && !piece.is_empty());
            assert!(text[at..piece.start].trim().is_empty());
            let slice = &text[piece.clone()];
            assert_eq!(slice, slice.trim());
            assert!(
                tokens::count(slice) <= MAX_EDU_TOKENS,
                "{}",
                tokens::count(slice)
            );
            at = piece.end;
        }
        assert!(text[at..].trim().is_empty());
        pieces.into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn text_without_boundaries_is_cut_within_the_limit_at_spaces_lines_or_characters() {
        // Words without punctuation: cut at spaces, so no word is split.
        let words: String = (0..5000).map(|i| format!("word{} ", i % 97)).collect();
        let pieces = capped(&words);
        assert!(pieces.len() > 5, "{}", pieces.len());
        assert!(pieces.iter().all(|p| p.starts_with("word")));
        // Lines: cut after a line break, not inside a line.
        let lines: String = (0..800)
            .map(|i| format!("let x{i} = f(y{i}) + {i};\n"))
            .collect();
        assert!(capped(&lines).iter().all(|p| p.ends_with(';')));
        // No space at all, multi-byte letters: cut between characters.
        let solid = "é字".repeat(3000);
        let pieces = capped(&solid);
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), solid);
        // Within the limit: whole, and the paragraph splitter caps too.
        assert_eq!(capped("A short line."), ["A short line."]);
        // Nothing but spaces: no piece (an empty one broke the promise
        // that pieces are non-empty; the property below found it).
        assert!(capped("").is_empty() && capped(" \n ").is_empty());
        let paragraph = format!("{} end.", words.trim());
        let edus = split_edus(&paragraph, 0..paragraph.len());
        assert!(edus.len() > 5);
        assert!(
            edus.iter()
                .all(|r| tokens::count(&paragraph[r.clone()]) <= MAX_EDU_TOKENS)
        );
    }

    proptest::proptest! {
        #[test]
        fn capped_pieces_keep_every_character_and_the_limit(
            parts in proptest::collection::vec(
                proptest::prop_oneof!["[a-z]{1,12}", "[0-9]{1,6}", "[ ]{1,2}", "\n", "[,;:] ", "[éü字ß]{1,4}"],
                0..1500,
            )
        ) {
            let text = parts.concat();
            let kept: String = capped(&text).concat().split_whitespace().collect();
            let all: String = text.split_whitespace().collect();
            proptest::prop_assert_eq!(kept, all);
        }
    }
}
