//! What a large document costs (issue 20, item 5): one Markdown document
//! of the Rust RFCs repeated to `EDUDB_BENCH_MB` megabytes (default 50;
//! ATX headings removed, setext ones kept, as a long unstructured file
//! has), ingested by the CLI as a whole process: its time, its peak
//! memory against the input's size, the store's size against the text's,
//! and the listing commands on that store (which must not cost the
//! document's size). The RFC corpus itself (648 files) is measured the
//! same way beside it. Targets: peak memory ≤ 10× the input, store ≤ 8×
//! the text.
//!
//! `cargo bench --bench large_document`; `EDUDB_BENCH_BIN=PATH` measures
//! another build of the binary instead.

mod common;

use std::path::Path;
use std::time::Duration;

use common::edudb;

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| e.unwrap())
            .map(|e| match e.file_type().unwrap().is_dir() {
                true => bytes_under(&e.path()),
                false => e.metadata().unwrap().len(),
            })
            .sum()
    })
}

/// The RFC texts, in name order.
fn rfc_texts(rfcs: &Path) -> Vec<String> {
    let mut paths: Vec<_> = (std::fs::read_dir(rfcs).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// The texts without ATX heading lines, repeated to at least `bytes`.
fn large_document(texts: &[String], bytes: usize) -> String {
    let plain: Vec<String> = texts
        .iter()
        .map(|t| {
            (t.lines())
                .filter(|l| !l.trim_start().starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let once = plain.join("\n\n");
    let mut document = String::with_capacity(bytes + once.len());
    while document.len() < bytes {
        document.push_str(&once);
        document.push_str("\n\n");
    }
    document
}

const MB: f64 = 1e6;

fn report(what: &str, input: u64, db: &Path, (took, peak): (Duration, u64)) {
    let store = bytes_under(db);
    println!(
        "{what}: {:.1} MB in {:.1} s; peak memory {:.0} MB = {:.1}x the input; store {:.0} MB = {:.1}x the text",
        input as f64 / MB,
        took.as_secs_f64(),
        peak as f64 / MB,
        peak as f64 / input as f64,
        store as f64 / MB,
        store as f64 / input as f64,
    );
}

fn main() {
    let megabytes: usize = std::env::var("EDUDB_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let rfcs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/rust_rfcs/text");
    let dir = tempfile::tempdir().unwrap();
    let texts = rfc_texts(&rfcs);

    let corpus = dir.path().join("corpus");
    let text_bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();
    let ingested = edudb(&corpus, &["ingest", "--quiet", rfcs.to_str().unwrap()]);
    report("RFC corpus (648 files)", text_bytes, &corpus, ingested);

    let file = dir.path().join("large.md");
    let document = large_document(&texts, megabytes * 1_000_000);
    std::fs::write(&file, &document).unwrap();
    drop(document);
    let input = std::fs::metadata(&file).unwrap().len();
    let db = dir.path().join("large");
    let ingested = edudb(&db, &["ingest", "--quiet", file.to_str().unwrap()]);
    report("one large document", input, &db, ingested);
    for args in [&["docs"][..], &["stats"], &["show", "large"]] {
        let (took, _) = edudb(&db, args);
        println!(
            "  {:?} on that store: {:.2} s",
            args.join(" "),
            took.as_secs_f64()
        );
    }
}
