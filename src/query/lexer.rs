//! Tokens of the query language, each with its byte range in the statement
//! so every error can point at line and column.

use super::error::QueryError;

/// A lexical token.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// A keyword or a bare name (matched case-insensitively by the parser).
    Word(String),
    /// A single-quoted string, `''` unescaped.
    Str(String),
    /// A number as written (the parser decides integer or real).
    Number(String),
    /// A parameter: `$1` or `$name` (without the `$`).
    Param(String),
    /// Punctuation: `( ) , * = != < <= > >= ~ .. ; . -`.
    Symbol(&'static str),
    /// End of the statement.
    End,
}

/// A token and the byte range it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Byte offset of its first character.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

impl Token {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match &self.kind {
            TokenKind::Word(word) => format!("'{}'", shortened(word)),
            TokenKind::Str(text) => format!("string '{}'", shortened(&text.replace('\'', "''"))),
            TokenKind::Number(number) => format!("number {number}"),
            TokenKind::Param(name) => format!("parameter ${name}"),
            TokenKind::Symbol(symbol) => format!("'{symbol}'"),
            TokenKind::End => "end of statement".to_owned(),
        }
    }
}

/// Characters of a word or string an error message repeats.
const DESCRIBED_CHARS: usize = 40;

/// `text`, cut to [`DESCRIBED_CHARS`] characters with `…` when longer.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(DESCRIBED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Longest symbols first, so `<=` wins over `<`.
const SYMBOLS: [&str; 16] = [
    "..", "!=", "<>", "<=", ">=", "(", ")", ",", "*", "=", "<", ">", "~", ";", ".", "-",
];

/// The error for a string still open at the end of the input.
const UNTERMINATED_STRING: &str =
    "unterminated string; close it with ' (write '' for a quote inside)";

/// For a reader that collects statements line by line (the console): the
/// complete statements in `source` (each up to and including a `;` outside
/// any string or comment), and what is left to be continued. A lexical
/// error that more lines cannot fix makes the rest one statement, so it is
/// reported now; an unterminated string waits for more.
pub fn split_statements(source: &str) -> (Vec<&str>, &str) {
    match tokenize(source) {
        Ok(tokens) => {
            let mut statements = Vec::new();
            let mut from = 0;
            for token in &tokens {
                if matches!(token.kind, TokenKind::Symbol(";")) {
                    statements.push(&source[from..token.end]);
                    from = token.end;
                }
            }
            // Only comments and blanks after the last `;`: nothing pending.
            let pending =
                (tokens.iter()).any(|t| t.start >= from && !matches!(t.kind, TokenKind::End));
            (statements, if pending { &source[from..] } else { "" })
        }
        Err(err) if err.message == UNTERMINATED_STRING => (Vec::new(), source),
        Err(_) => (vec![source], ""),
    }
}

/// Whether `source` ends inside a string: a quote opened and not yet
/// closed (the console's cue that a statement's text goes on).
pub fn opens_string(source: &str) -> bool {
    matches!(tokenize(source), Err(err) if err.message == UNTERMINATED_STRING)
}

/// Splits `source` into tokens, ending with [`TokenKind::End`]. Comments run
/// from `--` to the end of the line.
pub fn tokenize(source: &str) -> Result<Vec<Token>, QueryError> {
    let mut tokens = Vec::new();
    let mut chars = source.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if source[start..].starts_with("--") {
            while chars.next_if(|&(_, c)| c != '\n').is_some() {}
        } else if c == '\'' {
            chars.next();
            let mut text = String::new();
            loop {
                match chars.next() {
                    Some((_, '\'')) if chars.next_if(|&(_, c)| c == '\'').is_some() => {
                        text.push('\'');
                    }
                    Some((end, '\'')) => {
                        tokens.push(token(TokenKind::Str(text), start, end + 1));
                        break;
                    }
                    Some((_, c)) => text.push(c),
                    None => {
                        return Err(QueryError::new(
                            source,
                            start..source.len(),
                            UNTERMINATED_STRING,
                        ));
                    }
                }
            }
        } else if c.is_ascii_digit() {
            let mut end = take_while(&mut chars, |c| c.is_ascii_digit()).unwrap_or(start + 1);
            let rest = &source[end..];
            if rest.starts_with('.') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
                chars.next();
                end = take_while(&mut chars, |c| c.is_ascii_digit()).unwrap_or(end + 1);
            }
            if let Some(&(at, c)) = chars.peek()
                && (c.is_alphabetic() || c == '_')
            {
                return Err(QueryError::new(
                    source,
                    start..at + c.len_utf8(),
                    "a number runs into a name; put a space between them",
                ));
            }
            tokens.push(token(
                TokenKind::Number(source[start..end].to_owned()),
                start,
                end,
            ));
        } else if c == '$' {
            chars.next();
            let end = take_while(&mut chars, |c| c.is_alphanumeric() || c == '_');
            let Some(end) = end else {
                return Err(QueryError::new(
                    source,
                    start..start + 1,
                    "'$' must be followed by a parameter number or name, as in $1 or $question",
                ));
            };
            tokens.push(token(
                TokenKind::Param(source[start + 1..end].to_owned()),
                start,
                end,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let end = take_while(&mut chars, |c| c.is_alphanumeric() || c == '_')
                .unwrap_or(start + c.len_utf8());
            tokens.push(token(
                TokenKind::Word(source[start..end].to_owned()),
                start,
                end,
            ));
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| source[start..].starts_with(*s)) {
            for _ in 0..symbol.len() {
                chars.next();
            }
            let symbol = if *symbol == "<>" { "!=" } else { symbol };
            tokens.push(token(
                TokenKind::Symbol(symbol),
                start,
                start + symbol.len(),
            ));
        } else {
            return Err(QueryError::new(
                source,
                start..start + c.len_utf8(),
                format!("unexpected character {c:?}"),
            ));
        }
    }
    tokens.push(token(TokenKind::End, source.len(), source.len()));
    Ok(tokens)
}

fn token(kind: TokenKind, start: usize, end: usize) -> Token {
    Token { kind, start, end }
}

/// Consumes characters while `keep` holds; returns the end offset of the
/// last one consumed, or `None` when none was.
fn take_while(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    keep: impl Fn(char) -> bool,
) -> Option<usize> {
    let mut end = None;
    while let Some((at, c)) = chars.next_if(|&(_, c)| keep(c)) {
        end = Some(at + c.len_utf8());
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_open_until_its_quote_closes() {
        assert!(opens_string("SELECT FROM doc('a"));
        assert!(opens_string("SEED BM25('it''s\nstill"));
        assert!(!opens_string("SEED BM25('it''s')"));
        assert!(!opens_string("SHOW DOCS -- it's a comment"));
        assert!(!opens_string("SELECT FROM *"));
    }

    #[test]
    fn statements_end_at_semicolons_outside_strings_and_comments() {
        let split = |s| split_statements(s);
        assert_eq!(split("SHOW DOCS;"), (vec!["SHOW DOCS;"], ""));
        assert_eq!(
            split("SELECT FROM *\n  LIMIT 3 ;  "),
            (vec!["SELECT FROM *\n  LIMIT 3 ;"], "")
        );
        assert_eq!(split("SHOW DOCS"), (vec![], "SHOW DOCS"));
        assert_eq!(
            split("SELECT FROM doc('a;"),
            (vec![], "SELECT FROM doc('a;")
        );
        assert_eq!(split("SELECT FROM doc('it''s;'").0.len(), 0);
        assert_eq!(split("SHOW DOCS -- done;"), (vec![], "SHOW DOCS -- done;"));
        assert_eq!(
            split("SHOW DOCS; -- done"),
            (vec!["SHOW DOCS;"], ""),
            "a comment after ; ends"
        );
        // Several on one line, and a start of the next.
        assert_eq!(
            split("SHOW DOCS; SHOW STATS; SELECT FROM"),
            (vec!["SHOW DOCS;", " SHOW STATS;"], " SELECT FROM")
        );
        assert_eq!(
            split("SELECT FROM doc('a;b'); SHOW DOCS;"),
            (vec!["SELECT FROM doc('a;b');", " SHOW DOCS;"], "")
        );
        assert_eq!(
            split("SELECT # FROM"),
            (vec!["SELECT # FROM"], ""),
            "a bad character is reported now"
        );
    }

    fn kinds(source: &str) -> Vec<TokenKind> {
        tokenize(source)
            .unwrap()
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn tokens_strings_numbers_params_and_symbols() {
        assert_eq!(
            kinds("SELECT 'it''s' 3..5 0.25 $1 $q <= <> -- note\n;"),
            vec![
                TokenKind::Word("SELECT".into()),
                TokenKind::Str("it's".into()),
                TokenKind::Number("3".into()),
                TokenKind::Symbol(".."),
                TokenKind::Number("5".into()),
                TokenKind::Number("0.25".into()),
                TokenKind::Param("1".into()),
                TokenKind::Param("q".into()),
                TokenKind::Symbol("<="),
                TokenKind::Symbol("!="),
                TokenKind::Symbol(";"),
                TokenKind::End,
            ]
        );
    }

    #[test]
    fn bad_lexemes_are_located() {
        let error = tokenize("SELECT\n  'open").unwrap_err();
        assert_eq!((error.line, error.column), (2, 3));
        let error = tokenize("LIMIT 10x").unwrap_err();
        assert_eq!((error.line, error.column), (1, 7));
        let error = tokenize("a # b").unwrap_err();
        assert_eq!((error.line, error.column), (1, 3));
        assert!(tokenize("$").is_err());
    }
}
