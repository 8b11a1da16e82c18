//! What the command-line tests share: a store of the bundled Markdown
//! documents, a command's JSON answer and its keys.

use std::path::Path;

use serde_json::Value;

use crate::support::{edudb, stderr};

/// Runs `edudb --db DB ARGS --json`, which must succeed, and parses its output.
pub fn json(db: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = edudb(db, &all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The keys of a JSON object, sorted.
pub fn sorted_keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

/// A store with a small directory of documents ingested.
pub fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("guide.md"),
        "# Guide\n\nEDUs are exact byte ranges. Trees nest inside each other.\n\n## Install\n\n- run cargo\n- run tests\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("sub/page.html"),
        "<h1>Page</h1><p>Hypertext about nests.</p><script>x()</script>",
    )
    .unwrap();
    std::fs::write(docs.join("LICENSE"), "MIT").unwrap();
    let db = dir.path().join("store");
    let report = json(&db, &["ingest", docs.to_str().unwrap()]);
    assert_eq!(report["documents"], 2);
    assert_eq!(report["failures"], Value::Array(vec![]));
    // What a directory held but ingest left out is listed, with why.
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0]["path"].as_str().unwrap().ends_with("LICENSE"));
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("md, markdown")
    );
    (dir, db)
}
