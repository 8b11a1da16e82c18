//! Plain-text layout: the bytes are stored unchanged; paragraphs are
//! separated by blank lines, numbered lines such as "2.3 Results", short
//! all-capital lines and short capitalised lines standing alone before more
//! text are headings, and bulleted lines are list items.

use std::ops::Range;

use super::{Block, BlockKind, Layout, trim_range};

/// Longest line, in bytes, that may be a heading.
const MAX_HEADING_BYTES: usize = 100;
/// Most words a heading may have.
const MAX_HEADING_WORDS: usize = 12;
/// Most words of an unnumbered, mixed-case line standing alone as a heading.
const MAX_TITLE_WORDS: usize = 8;

/// Parses plain text.
pub fn parse(text: &str) -> Layout {
    let mut blocks = Vec::new();
    let chunks = paragraphs(text);
    let last = chunks.len().saturating_sub(1);
    for (index, chunk) in chunks.into_iter().enumerate() {
        push_chunk(text, chunk, index < last, &mut blocks);
    }
    Layout {
        text: text.to_owned(),
        blocks,
        title: None,
        metadata: Default::default(),
    }
}

/// Byte ranges of blank-line separated chunks.
fn paragraphs(text: &str) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let mut start = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let blank = line.trim().is_empty();
        match (blank, start) {
            (false, None) => start = Some(offset),
            (true, Some(s)) => {
                chunks.push(s..offset);
                start = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    if let Some(s) = start {
        chunks.push(s..text.len());
    }
    chunks
}

/// Splits a chunk into a leading heading line, list items, or one paragraph;
/// `more_follows` when another chunk comes after it.
fn push_chunk(text: &str, chunk: Range<usize>, more_follows: bool, blocks: &mut Vec<Block>) {
    let first_line_end = text[chunk.clone()]
        .find('\n')
        .map_or(chunk.end, |i| chunk.start + i);
    let first = trim_range(text, chunk.start..first_line_end);
    let mut rest = first_line_end..chunk.end;
    let alone = more_follows && text[rest.clone()].trim().is_empty();
    let level = heading_level(&text[first.clone()])
        .or_else(|| (alone && standalone_title(&text[first.clone()])).then_some(1));
    if let Some(level) = level {
        blocks.push(Block {
            kind: BlockKind::Heading { level },
            range: first,
        });
    } else {
        rest = chunk;
    }
    let rest_text = &text[rest.clone()];
    if rest_text.trim().is_empty() {
        return;
    }
    let lines: Vec<Range<usize>> = line_ranges(text, rest.clone()).collect();
    if lines.iter().all(|l| bullet(&text[l.clone()]).is_some()) {
        for line in lines {
            let (indent, marker) = bullet(&text[line.clone()]).unwrap_or((0, 0));
            let depth = u16::try_from(indent / 2).unwrap_or(u16::MAX);
            let item = trim_range(text, line.start + indent + marker..line.end);
            if !item.is_empty() {
                blocks.push(Block {
                    kind: BlockKind::ListItem { depth },
                    range: item,
                });
            }
        }
    } else {
        blocks.push(Block {
            kind: BlockKind::Paragraph,
            range: trim_range(text, rest),
        });
    }
}

/// Non-blank lines of `range`, without their line breaks.
fn line_ranges(text: &str, range: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut offset = range.start;
    text[range].split_inclusive('\n').filter_map(move |line| {
        let start = offset;
        offset += line.len();
        let end = start + line.trim_end().len();
        (!line.trim().is_empty()).then_some(start..end)
    })
}

/// For a bulleted line, its indentation and marker length in bytes.
fn bullet(line: &str) -> Option<(usize, usize)> {
    let indent = line.len() - line.trim_start().len();
    let body = &line[indent..];
    ["- ", "* ", "• ", "+ "]
        .iter()
        .find(|m| body.starts_with(**m))
        .map(|m| (indent, m.len()))
}

/// The level of a heading line: numbering depth for "2.3 Results" or
/// "4. Method", 1 for a short all-capital line; `None` for other lines.
fn heading_level(line: &str) -> Option<u8> {
    let words = line.split_whitespace().count();
    let ends_like_sentence = line.ends_with(['.', ',', ';', ':', '?', '!']);
    if line.len() > MAX_HEADING_BYTES || words > MAX_HEADING_WORDS || ends_like_sentence {
        return None;
    }
    if let Some((number, title)) = line.split_once(char::is_whitespace) {
        let parts: Vec<&str> = number.trim_end_matches('.').split('.').collect();
        let numbered = parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
        let titled = title
            .trim_start()
            .chars()
            .next()
            .is_some_and(char::is_uppercase);
        if numbered && titled && parts.len() <= 6 {
            return u8::try_from(parts.len()).ok();
        }
    }
    let letters: Vec<char> = line.chars().filter(|c| c.is_alphabetic()).collect();
    let shouting = letters.len() >= 4 && letters.iter().all(|c| c.is_uppercase()) && words <= 8;
    shouting.then_some(1)
}

/// Whether a line standing alone between blank lines, with more text after
/// it, reads as a title: short, capitalised, not ending like a sentence, and
/// free of code punctuation.
fn standalone_title(line: &str) -> bool {
    let words = line.split_whitespace().count();
    let capitalised = line.chars().next().is_some_and(char::is_uppercase);
    let code_like = line.contains(['{', '}', ';', '=', '<', '>', '|']) || line.contains("//");
    (1..=MAX_TITLE_WORDS).contains(&words)
        && capitalised
        && !code_like
        && line.len() <= MAX_HEADING_BYTES
        && !line.ends_with(['.', ',', ';', ':', '?', '!'])
        && bullet(line).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(text: &str) -> Vec<(BlockKind, &str)> {
        parse(text)
            .blocks
            .iter()
            .map(|b| (b.kind, &text[b.range.clone()]))
            .collect()
    }

    #[test]
    fn numbered_headings_paragraphs_and_bullets() {
        let text = "INTRODUCTION\n\nWe study things.\nOn two lines.\n\n2.3 Results\nThe results hold.\n\n- first\n  - nested\n";
        assert_eq!(
            blocks(text),
            vec![
                (BlockKind::Heading { level: 1 }, "INTRODUCTION"),
                (BlockKind::Paragraph, "We study things.\nOn two lines."),
                (BlockKind::Heading { level: 2 }, "2.3 Results"),
                (BlockKind::Paragraph, "The results hold."),
                (BlockKind::ListItem { depth: 0 }, "first"),
                (BlockKind::ListItem { depth: 1 }, "nested"),
            ]
        );
    }

    #[test]
    fn sentences_that_start_with_numbers_are_not_headings() {
        assert_eq!(heading_level("3 cats sat on the mat."), None);
        assert_eq!(heading_level("1999 was a year"), None);
        assert_eq!(heading_level("4. Method"), Some(1));
        assert_eq!(heading_level("OK"), None);
    }

    #[test]
    fn a_short_capitalised_line_alone_before_more_text_is_a_heading() {
        let text = "Motivation\n\nWe want things.\n\nDetailed design\n\nfoo(bar)\n\nlet x = 1\n\nSo it ends\n\nA sentence ends here.\n\nLast line\n";
        assert_eq!(
            blocks(text),
            vec![
                (BlockKind::Heading { level: 1 }, "Motivation"),
                (BlockKind::Paragraph, "We want things."),
                (BlockKind::Heading { level: 1 }, "Detailed design"),
                (BlockKind::Paragraph, "foo(bar)"),
                (BlockKind::Paragraph, "let x = 1"),
                (BlockKind::Heading { level: 1 }, "So it ends"),
                (BlockKind::Paragraph, "A sentence ends here."),
                (BlockKind::Paragraph, "Last line"),
            ]
        );
    }

    #[test]
    fn crlf_and_trailing_whitespace() {
        assert_eq!(
            blocks("a b c\r\n\r\nd e\r\n"),
            vec![
                (BlockKind::Paragraph, "a b c"),
                (BlockKind::Paragraph, "d e")
            ]
        );
    }
}
