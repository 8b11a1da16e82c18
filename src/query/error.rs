//! Query errors that point at the fault: line and column, the statement's
//! line with a caret under it, what was expected and, for a misspelt
//! keyword, the nearest one.

pub use crate::error::QueryError;

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
    fn a_long_line_is_shown_around_the_fault() {
        let source = format!("{}FROM x{}", "a".repeat(500), "b".repeat(500));
        let error = QueryError::new(&source, 500..504, "bad");
        assert_eq!(error.column, 501);
        let shown: Vec<char> = error.source_line.chars().collect();
        assert_eq!(shown.len(), 1 + 40 + 60 + 1);
        assert_eq!((shown[0], shown[shown.len() - 1]), ('…', '…'));
        let marked: String = shown[error.underline.clone()].iter().collect();
        assert_eq!(marked, "FROM");
        // A fault near the start keeps the start; near the end, the end.
        let error = QueryError::new(&source, 2..3, "bad");
        assert!(error.source_line.starts_with("aaa") && error.source_line.ends_with('…'));
        assert_eq!(error.underline, 2..3);
        let error = QueryError::new(&source, source.len()..source.len(), "bad");
        assert!(error.source_line.starts_with('…') && error.source_line.ends_with('b'));
        assert_eq!(error.underline.len(), 1);
    }

    #[test]
    fn nearest_keyword() {
        assert_eq!(nearest("FORM", &["FROM", "WHERE"]), Some("FROM"));
        assert_eq!(nearest("budgte", &["BUDGET", "LIMIT"]), Some("BUDGET"));
        assert_eq!(nearest("xyzzy", &["FROM", "WHERE"]), None);
    }
}
