//! No input makes the query parser or executor panic: random statements
//! built from the language's own tokens, and mutations of the corpus in
//! `tests/corpus/queries.txt`, must each give a result or a located error.

use edudb::{Db, Error, IngestOptions, Params, Query};
use proptest::prelude::*;

use crate::support;

const CORPUS: &str = include_str!("../corpus/queries.txt");

const PIECES: &[&str] = &[
    "SELECT",
    "SHOW",
    "EXPLAIN",
    "FROM",
    "*",
    "doc('garden')",
    "docs('g*')",
    "session('s')",
    "WHERE",
    "level",
    "kind",
    "title",
    "doc",
    "page",
    "BETWEEN",
    "3",
    "=",
    "!=",
    "<",
    ">=",
    "~",
    "AND",
    "OR",
    "NOT",
    "(",
    ")",
    "SEED",
    "BM25",
    "NEAR",
    "HYBRID",
    "('water')",
    "'",
    "''",
    "TRAVERSE",
    "THRESHOLD",
    "DEPTH",
    "PROPAGATE",
    "STEPS",
    "ALPHA",
    "ACROSS",
    "EXPAND",
    "SUBTREE",
    "PARENT",
    "SIBLINGS",
    "CONTEXT",
    "BUDGET",
    "TOKENS",
    "ORDER",
    "BY",
    "POSITION",
    "SCORE",
    "LIMIT",
    "0",
    "1",
    "0.5",
    "3..7",
    "99999999999999999999",
    "$1",
    "$q",
    "$",
    ";",
    ",",
    "--",
    "\n",
    "é",
    "\u{0}",
    "section",
    "TREE",
    "NODE",
    "EDUS",
    "DAG",
    "STATS",
    "DOCS",
    "TEXT",
    "SPANS",
    "NODES",
    "JSON",
    "'[('",
];

fn corpus() -> Vec<&'static str> {
    CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("--"))
        .collect()
}

fn store() -> (tempfile::TempDir, Db) {
    let (dir, db) = support::store();
    db.ingest_bytes(
        "garden",
        b"# Garden\n\nWater the soil. Prune in winter.\n\n## Roses\n\nRoses like sun and water.\n"
            .to_vec(),
        IngestOptions::default(),
    )
    .unwrap();
    for text in [
        "When should I water the roses?",
        "Water them at dawn, and prune in winter.",
    ] {
        db.append_turn("s", edudb::Role::User, text, edudb::Placement::Continue)
            .unwrap();
    }
    (dir, db)
}

/// Runs `statement`; an error must locate itself inside the statement.
fn check(db: &Db, statement: &str) -> Result<(), TestCaseError> {
    let params = Params::new()
        .text("q", "water")
        .number("budget", 50.0)
        .number("1", 2.0);
    match db.query(statement, &params) {
        Ok(_) => {}
        Err(Error::Query(error)) => {
            let lines = statement.split('\n').count().max(1);
            prop_assert!(
                error.line >= 1 && error.line <= lines,
                "{statement:?}: {error}"
            );
            prop_assert!(error.column >= 1, "{statement:?}: {error}");
            prop_assert!(!error.to_string().is_empty());
        }
        Err(other) => prop_assert!(other.is_user_error(), "{statement:?}: {other}"),
    }
    Ok(())
}

#[test]
fn the_corpus_parses_or_fails_cleanly() {
    let (_dir, db) = store();
    let mut parsed = 0;
    for statement in corpus() {
        if Query::parse(statement).is_ok() {
            parsed += 1;
        }
        check(&db, statement).unwrap();
    }
    assert_eq!(
        parsed,
        corpus().len(),
        "every corpus statement is valid syntax"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn statements_of_random_tokens_never_panic(
        picks in proptest::collection::vec(0..PIECES.len(), 0..24),
    ) {
        let (_dir, db) = store();
        let statement: Vec<&str> = picks.iter().map(|&i| PIECES[i]).collect();
        check(&db, &statement.join(" "))?;
    }

    #[test]
    fn mutated_corpus_statements_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..6),
    ) {
        let (_dir, db) = store();
        let corpus = corpus();
        let mut chars: Vec<char> = corpus[which.index(corpus.len())].chars().collect();
        for (at, kind, c) in edits {
            let i = at.index(chars.len() + 1);
            match kind {
                0 => chars.insert(i, c),
                1 if i < chars.len() => { chars.remove(i); }
                _ if i < chars.len() => chars[i] = c,
                _ => chars.push(c),
            }
        }
        check(&db, &chars.into_iter().collect::<String>())?;
    }

    #[test]
    fn arbitrary_text_never_panics_the_parser(text in any::<String>()) {
        let _ = Query::parse(&text);
    }
}
