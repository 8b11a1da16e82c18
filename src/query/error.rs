//! Query errors that point at the fault: line and column, the statement's
//! line with a caret under it, what was expected and, for a misspelt
//! keyword, the nearest one.

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
    /// The statement line holding the fault.
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
        QueryError {
            line: source[..start].matches('\n').count() + 1,
            column: column + 1,
            message: message.into(),
            hint: None,
            source_line: source[line_start..line_end].to_owned(),
            underline: column..column + width,
        }
    }

    /// Adds a suggestion.
    pub fn with_hint(mut self, hint: impl Into<String>) -> QueryError {
        self.hint = Some(hint.into());
        self
    }
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

/// The candidate closest to `word` (case-insensitive), when it is close
/// enough to be a likely misspelling.
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_uppercase();
    candidates
        .iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&word, &c.to_ascii_uppercase()),
                *c,
            )
        })
        .filter(|&(distance, c)| distance > 0 && distance <= (c.len() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_line_column_and_caret() {
        let source = "SELECT TEXT\nFORM *";
        let error = QueryError::new(source, 12..16, "expected FROM, found 'FORM'")
            .with_hint("did you mean FROM?");
        assert_eq!((error.line, error.column), (2, 1));
        assert_eq!(
            error.to_string(),
            "line 2, column 1: expected FROM, found 'FORM'\n  FORM *\n  ^^^^\n  hint: did you mean FROM?"
        );
    }

    #[test]
    fn columns_count_characters() {
        let error = QueryError::new("doc('é') x", 9..10, "bad");
        assert_eq!(error.column, 9);
        assert_eq!(error.underline, 8..9);
    }

    #[test]
    fn nearest_keyword() {
        assert_eq!(nearest("FORM", &["FROM", "WHERE"]), Some("FROM"));
        assert_eq!(nearest("budgte", &["BUDGET", "LIMIT"]), Some("BUDGET"));
        assert_eq!(nearest("xyzzy", &["FROM", "WHERE"]), None);
    }
}
