//! [`QueryError`]: a parse or semantic error in a query statement that
//! points at the fault (line and column, the statement's line with a caret
//! under it, what was expected, and a hint such as the nearest keyword).

use std::fmt;
use std::ops::Range;

/// A parse or semantic error in a query statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// 1-based line of the fault.
    pub line: usize,
    /// 1-based column (in characters) of the fault.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
    /// A suggestion, such as the nearest keyword.
    pub hint: Option<String>,
    /// The statement line holding the fault; of a long line, the part
    /// around the fault, with `…` where it was cut.
    pub source_line: String,
    /// Characters of `source_line` to underline.
    pub underline: Range<usize>,
}

impl QueryError {
    /// An error about bytes `at` of `source`.
    pub fn new(source: &str, at: Range<usize>, message: impl Into<String>) -> QueryError {
        let start = floor_char_boundary(source, at.start.min(source.len()));
        let end = floor_char_boundary(source, at.end.clamp(start, source.len()));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let column = source[line_start..start].chars().count();
        let width = source[start..end.min(line_end)].chars().count().max(1);
        let (source_line, underline) = excerpt(&source[line_start..line_end], column, width);
        QueryError {
            line: source[..start].matches('\n').count() + 1,
            column: column + 1,
            message: message.into(),
            hint: None,
            source_line,
            underline,
        }
    }

    /// Adds a suggestion.
    pub fn with_hint(mut self, hint: impl Into<String>) -> QueryError {
        self.hint = Some(hint.into());
        self
    }
}

/// Characters of a statement line shown before the fault and from it on.
const SHOWN_BEFORE: usize = 40;
const SHOWN_FROM: usize = 60;

/// The part of `line` shown under an error at character `column`, `width`
/// characters wide, and the characters of it to underline: the whole line
/// when short, else a window around the fault with `…` where it was cut.
fn excerpt(line: &str, column: usize, width: usize) -> (String, Range<usize>) {
    let length = line.chars().count();
    if length <= SHOWN_BEFORE + SHOWN_FROM {
        return (line.to_owned(), column..column + width);
    }
    let first = column.saturating_sub(SHOWN_BEFORE);
    let last = (column + SHOWN_FROM).min(length);
    let mut shown: String = line.chars().skip(first).take(last - first).collect();
    let mut start = column - first;
    if first > 0 {
        shown.insert(0, '…');
        start += 1;
    }
    if last < length {
        shown.push('…');
    }
    let width = width.min(last.saturating_sub(column)).max(1);
    (shown, start..start + width)
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )?;
        let line: String = self
            .source_line
            .chars()
            .map(|c| if c == '\t' { ' ' } else { c })
            .collect();
        writeln!(f, "  {line}")?;
        write!(
            f,
            "  {}{}",
            " ".repeat(self.underline.start),
            "^".repeat(self.underline.len())
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for QueryError {}
