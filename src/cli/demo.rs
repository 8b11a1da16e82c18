//! `edudb demo`: ingests the bundled corpus (five Rust RFCs, MIT/Apache-2.0,
//! see `src/demo/README.md`) into a temporary store and shows a tree, some
//! EDUs with coordinates, a search, a query, a DAG level and an agent's
//! session about the RFCs. Needs nothing outside the binary.

use edudb::ingest::sources::{Origin, Source};
use edudb::{CancelToken, Db, Format, IngestOptions, Placement, Role};

use std::io::Write;

use super::bars;
use super::failure::Failure;
use super::render;

/// The bundled documents: id and Markdown text.
const CORPUS: &[(&str, &str)] = &[
    (
        "0002-rfc-process",
        include_str!("../demo/0002-rfc-process.md"),
    ),
    (
        "0505-api-comment-conventions",
        include_str!("../demo/0505-api-comment-conventions.md"),
    ),
    (
        "1618-ergonomic-format-args",
        include_str!("../demo/1618-ergonomic-format-args.md"),
    ),
    (
        "2124-option-filter",
        include_str!("../demo/2124-option-filter.md"),
    ),
    (
        "2585-unsafe-block-in-unsafe-fn",
        include_str!("../demo/2585-unsafe-block-in-unsafe-fn.md"),
    ),
];

/// A short dialogue about the RFCs: two topics, placed automatically.
const DIALOGUE: &[(Role, &str)] = &[
    (
        Role::User,
        "Which changes to Rust need an RFC, and which can skip the RFC process?",
    ),
    (
        Role::Assistant,
        "Substantial changes need an RFC: new language features, removals, and changes to the standard library's public API. Bug fixes and small internal improvements skip the RFC process.",
    ),
    (
        Role::User,
        "Why should unsafe operations inside an unsafe fn need their own unsafe block?",
    ),
    (
        Role::Assistant,
        "Under RFC 2585 the body of an unsafe fn is not an unsafe block: each unsafe operation inside it is wrapped in its own unsafe block, so the unsafe operations stay visible.",
    ),
    (
        Role::User,
        "Back to the RFC process: who reviews an RFC before it is merged, and can changes skip it?",
    ),
];

/// Runs the tour in a fresh temporary store, removed afterwards.
pub fn run(out: &mut dyn Write, quiet: bool) -> Result<(), Failure> {
    let dir = std::env::temp_dir().join(format!("edudb-demo-{}", std::process::id()));
    let result = tour(out, &dir, quiet);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn tour(out: &mut dyn Write, dir: &std::path::Path, quiet: bool) -> Result<(), Failure> {
    let db = Db::create(dir)?;
    writeln!(
        out,
        "== edudb demo: a temporary store at {}\n",
        dir.display()
    )?;
    let sources: Vec<Source> = CORPUS
        .iter()
        .map(|(id, text)| Source {
            id: (*id).to_owned(),
            origin: Origin::Bytes(text.as_bytes().to_vec()),
        })
        .collect();
    let options = IngestOptions {
        format: Some(Format::Markdown),
        ..Default::default()
    };
    let report = db.ingest(
        &sources,
        options,
        &bars::Bars::new(quiet),
        &CancelToken::new(),
    )?;
    writeln!(out, "$ edudb ingest src/demo/*.md")?;
    render::ingest_report(out, &mut anstream::stderr(), &report, &[], false)?;

    writeln!(out, "\n$ edudb docs")?;
    render::documents(out, &db.documents()?)?;

    let doc = "0002-rfc-process";
    writeln!(out, "\n$ edudb tree {doc} --depth 2")?;
    render::tree(out, &db.tree(doc)?, Some(2), false)?;

    writeln!(out, "\n$ edudb show {doc} 0..5")?;
    render::edus(out, &db.edus(doc, Some((0, 5)))?, false)?;

    let query = "unsafe operations inside unsafe fn";
    writeln!(out, "\n$ edudb search '{query}' --limit 5")?;
    render::hits(out, &db.search(query, 5)?, false)?;

    let statement = "EXPLAIN SELECT FROM * SEED BM25('unsafe operations') BUDGET 120 TOKENS";
    writeln!(out, "\n$ edudb query \"{statement}\"")?;
    render::query_result(out, &db.query(statement, &edudb::Params::new())?, false)?;

    let dag_doc = "2585-unsafe-block-in-unsafe-fn";
    writeln!(out, "\n$ edudb dag {dag_doc} --level 2")?;
    render::dag(out, &db.dag_listing(dag_doc, Some(2))?)?;

    writeln!(out)?;
    for (role, text) in DIALOGUE {
        writeln!(out, "$ edudb session add rfc-chat --role {role} \"{text}\"")?;
        render::receipt(
            out,
            &db.append_turn("rfc-chat", *role, text, Placement::Auto)?,
            false,
        )?;
    }
    writeln!(out, "\n$ edudb session show rfc-chat")?;
    render::session(out, &db.session("rfc-chat")?, false)?;
    writeln!(out, "\n$ edudb session context rfc-chat --budget 120")?;
    render::context(out, &db.session_context("rfc-chat", 120, None)?, false)?;

    writeln!(
        out,
        "\nEvery EDU is an exact byte range of its document; try `edudb --help`."
    )?;
    Ok(())
}
