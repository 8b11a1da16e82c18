//! Extractive titles: a short span of a node's own text, never new words.

use crate::ingest::tree::cohesion::TermVector;
use crate::model::edu::{Edu, EduKind, Span};

/// Most words in an extractive title.
const TITLE_WORDS: usize = 10;
/// Most bytes in an extractive title.
const TITLE_BYTES: usize = 80;
/// How many EDUs of a node are considered when picking its representative.
const CANDIDATES: usize = 48;

/// The title of a node without a heading: the opening words of its most
/// representative EDU (the one closest to the centroid of the node's words).
pub(super) fn extractive_title(text: &str, edus: &[Edu], span: Span) -> String {
    let last = (span.last as usize).min(span.first as usize + CANDIDATES - 1);
    let candidates = &edus[span.first as usize..=last];
    let prose: Vec<&Edu> = candidates
        .iter()
        .filter(|e| !matches!(e.kind, EduKind::Code | EduKind::Table))
        .filter(|e| !is_label(e, &text[e.start as usize..e.end as usize]))
        .collect();
    let pool: Vec<&Edu> = if prose.is_empty() {
        candidates.iter().collect()
    } else {
        prose
    };
    let vectors: Vec<TermVector> = pool
        .iter()
        .map(|e| TermVector::from_text(&text[e.start as usize..e.end as usize]))
        .collect();
    let centroid = TermVector::sum(&vectors);
    let best = vectors
        .iter()
        .enumerate()
        .max_by(|a, b| {
            a.1.cosine(&centroid)
                .total_cmp(&b.1.cosine(&centroid))
                .then(b.0.cmp(&a.0))
        })
        .map_or(0, |(i, _)| i);
    let edu = pool[best];
    opening_words(&text[edu.start as usize..edu.end as usize])
}

/// Whether an EDU is a label rather than something said: text ending in a
/// colon ("Rust Issue:"), or a list item of metadata, a short key and its
/// value ("- Start Date: 2014-03-11"). Neither makes a title.
fn is_label(edu: &Edu, text: &str) -> bool {
    let text = text.trim();
    if text.ends_with(':') {
        return true;
    }
    let item = text.trim_start_matches(['-', '*', '+', ' ']);
    edu.kind == EduKind::Item
        && item.split_once(": ").is_some_and(|(key, _)| {
            key.split_whitespace().count() <= 3
                && key.chars().next().is_some_and(char::is_uppercase)
        })
}

/// `text` on one line: its whitespace runs (line breaks included)
/// collapsed to one space, as a heading or caption wrapped over lines is a
/// title.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The opening words of `text`, whitespace runs (line breaks included)
/// collapsed to one space, cut after at most [`TITLE_WORDS`] words and
/// [`TITLE_BYTES`] bytes at a word (or, failing that, char) boundary.
fn opening_words(text: &str) -> String {
    let mut title = String::new();
    for word in text.split_whitespace().take(TITLE_WORDS) {
        let gap = usize::from(!title.is_empty());
        if title.len() + gap + word.len() > TITLE_BYTES {
            if title.is_empty() {
                let mut cut = TITLE_BYTES;
                while !word.is_char_boundary(cut) {
                    cut -= 1;
                }
                title.push_str(&word[..cut]);
            }
            break;
        }
        if gap == 1 {
            title.push(' ');
        }
        title.push_str(word);
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_words_collapses_whitespace_and_caps_words_and_bytes() {
        assert_eq!(
            opening_words("one two\n  three\tfour"),
            "one two three four"
        );
        assert_eq!(
            opening_words("a b c d e f g h i j k l m"),
            "a b c d e f g h i j"
        );
        let long = "x".repeat(200);
        assert_eq!(opening_words(&long).len(), TITLE_BYTES);
        assert_eq!(opening_words("é".repeat(60).as_str()).len(), 80);
        let words = format!("{} {}", "y".repeat(70), "z".repeat(20));
        assert_eq!(opening_words(&words), "y".repeat(70));
    }

    #[test]
    fn picks_the_most_central_edu() {
        let text =
            "Unrelated opener here. Traits define shared behaviour. Traits and behaviour matter.";
        let edus = [(0, 22), (23, 54), (55, 83)]
            .iter()
            .enumerate()
            .map(|(i, &(s, e))| Edu {
                id: i as u32,
                start: s,
                end: e,
                tokens: 1,
                kind: EduKind::Text,
            })
            .collect::<Vec<_>>();
        assert_eq!(
            extractive_title(text, &edus, Span::new(0, 2)),
            "Traits define shared behaviour."
        );
    }

    #[test]
    fn labels_and_metadata_items_never_make_a_title() {
        // RFC 1194's and RFC 0002's openings: metadata bullets, then prose.
        let text =
            "- Start Date: 2015-06-15\nRust Issue:\nSets gain a way to take items out of them.";
        let pieces = [
            (0, 24, EduKind::Item),
            (25, 36, EduKind::Text),
            (37, 79, EduKind::Text),
        ];
        let edus: Vec<Edu> = (pieces.iter().enumerate())
            .map(|(i, &(start, end, kind))| Edu {
                id: i as u32,
                start,
                end,
                tokens: 1,
                kind,
            })
            .collect();
        assert_eq!(&text[25..36], "Rust Issue:");
        assert_eq!(
            extractive_title(text, &edus, Span::new(0, 2)),
            "Sets gain a way to take items out of them."
        );
        // With nothing else to say, a label still titles its node.
        assert_eq!(
            extractive_title(text, &edus, Span::new(1, 1)),
            "Rust Issue:"
        );
    }
}
