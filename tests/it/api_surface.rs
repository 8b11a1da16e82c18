//! One declaration per call: the `Api` trait (`src/serve/api/mod.rs`) is the
//! list of the store's calls. `Db`, `ShardSet` and `Client` implement it (a call
//! missing from any fails to compile); the HTTP handlers and the Python
//! binding reach the store only through it, and this checks that each of
//! them offers every call, so a new call cannot be added to one surface
//! and forgotten on another.

use std::collections::BTreeSet;

/// The trait's source.
const API: &str = include_str!("../../src/serve/api/mod.rs");
/// The HTTP handlers' sources.
const HANDLERS: [&str; 5] = [
    include_str!("../../src/serve/handlers/documents.rs"),
    include_str!("../../src/serve/handlers/jobs.rs"),
    include_str!("../../src/serve/handlers/retrieval.rs"),
    include_str!("../../src/serve/handlers/sessions.rs"),
    include_str!("../../src/serve/handlers/store.rs"),
];
/// The Python binding's source.
const PYTHON: &str = include_str!("../../python/src/lib.rs");

/// Calls the Python package does not offer yet, each with why; a call
/// leaves this list when the package gains it.
const NOT_IN_PYTHON: [(&str, &str); 0] = [];

/// The calls the `Api` trait declares, by name.
fn declared() -> BTreeSet<String> {
    let start = API.find("pub trait Api").expect("the Api trait");
    let end = start + API[start..].find("\n}\n").expect("the trait's end");
    let method = regex::Regex::new(r"\n    fn ([a-z_]+)\s*\(").unwrap();
    method
        .captures_iter(&API[start..end])
        .map(|c| c[1].to_owned())
        .collect()
}

/// The names `pattern` captures (its first group) in `sources`.
fn called<'a>(sources: impl IntoIterator<Item = &'a str>, pattern: &str) -> BTreeSet<String> {
    let call = regex::Regex::new(pattern).unwrap();
    sources
        .into_iter()
        .flat_map(|source| call.captures_iter(source))
        .map(|c| c[1].to_owned())
        .collect()
}

#[test]
fn every_call_of_the_api_is_served_over_http_and_offered_to_python() {
    let declared = declared();
    assert!(
        declared.len() >= 20 && declared.contains("query") && declared.contains("append_turn"),
        "the trait's calls were not read: {declared:?}"
    );
    // Handlers call `Api::NAME` or pass it as the work to run; the ingest
    // job runs `Db::ingest` itself, to report progress.
    let over_http: BTreeSet<String> = called(HANDLERS, r"\bApi::([a-z_]+)\b")
        .into_iter()
        .chain(["ingest".to_owned()])
        .collect();
    let missing: Vec<&String> = declared.difference(&over_http).collect();
    assert!(
        missing.is_empty(),
        "calls no HTTP handler serves: {missing:?}"
    );
    let in_python = called([PYTHON], r"(?:\.api\(\)|\bapi)\s*\.\s*([a-z_]+)\s*\(");
    let excused: BTreeSet<String> = NOT_IN_PYTHON.iter().map(|(n, _)| n.to_string()).collect();
    let missing: Vec<&String> = (declared.difference(&in_python))
        .filter(|name| !excused.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "calls the Python binding lacks: {missing:?}"
    );
    for name in &excused {
        assert!(
            declared.contains(name) && !in_python.contains(name),
            "{name} is excused from the Python binding but is offered there (or is no call): take it off NOT_IN_PYTHON"
        );
    }
}
