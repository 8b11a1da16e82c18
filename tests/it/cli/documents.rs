//! Documents through the command line: ingest (skipped and refused files,
//! standard input), listings and their JSON shapes, trees, pages, DAGs,
//! queries with located errors.

use serde_json::Value;

use super::fixtures::*;
use crate::support::{demo_dir, edudb, edudb_with_stdin, shared_data, stderr, text};

#[test]
fn ingest_says_which_files_it_skipped() {
    let (dir, _) = fixture();
    let out = edudb(
        &dir.path().join("again"),
        &["ingest", dir.path().join("docs").to_str().unwrap()],
    );
    let shown = text(&out);
    assert!(
        shown.contains("skipped 1 file, not a known extension"),
        "{shown}"
    );
    assert!(shown.contains("LICENSE"), "{shown}");
}

/// A file whose extension edudb does not read is refused when named, as a
/// directory walk leaves it out; `--format` reads it anyway.
#[test]
fn a_file_of_an_unread_extension_is_refused_alone_and_skipped_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let rst = docs.join("notes.rst");
    std::fs::write(&rst, "Notes\n=====\n\nThe lamp is lit.\n").unwrap();
    std::fs::write(docs.join("notes.mkd"), "# Notes\n\nThe lamp is lit.\n").unwrap();
    let db = dir.path().join("db");
    let out = edudb(&db, &["ingest", rst.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("notes.rst: .rst files are not read (edudb reads .md, .markdown")
            && stderr(&out).contains("give --format text"),
        "{}",
        stderr(&out)
    );
    let out = edudb(&db, &["ingest", docs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text(&out).contains("skipped 1 file, not a known extension")
            && text(&out).contains("notes.rst"),
        "{}",
        text(&out)
    );
    let ids: Vec<String> = (json(&db, &["docs"]).as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        ["notes"],
        "the .mkd file, read as Markdown in both places"
    );
    let out = edudb(
        &db,
        &[
            "ingest",
            "--format",
            "text",
            "--id",
            "rst",
            rst.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn listings_have_the_documented_json_shapes() {
    let (_dir, db) = fixture();
    let docs = json(&db, &["docs"]);
    assert_eq!(docs[0]["id"], "guide");
    assert_eq!(docs[1]["id"], "sub/page");
    for doc in docs.as_array().unwrap() {
        assert_eq!(
            sorted_keys(doc),
            [
                "bytes", "edus", "id", "metadata", "nodes", "title", "tokens"
            ]
        );
    }

    let tree = json(&db, &["tree", "guide"]);
    assert_eq!(
        (
            tree["kind"].as_str(),
            tree["level"].as_u64(),
            tree["title"].as_str()
        ),
        (Some("document"), Some(0), Some("Guide"))
    );
    assert_eq!(tree["span"], serde_json::json!([0, 5]));
    let section = &tree["children"][0];
    assert_eq!(section["kind"], "section");
    assert_eq!(
        section["children"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["title"] == "Install")
            .count(),
        1
    );
    let shallow = json(&db, &["tree", "guide", "--depth", "1"]);
    assert_eq!(shallow["children"][0]["children"], Value::Array(vec![]));

    let edus = json(&db, &["show", "guide", "1..2"]);
    let text = std::fs::read_to_string(db.parent().unwrap().join("docs/guide.md")).unwrap();
    for edu in edus.as_array().unwrap() {
        let (start, end) = (
            edu["bytes"][0].as_u64().unwrap() as usize,
            edu["bytes"][1].as_u64().unwrap() as usize,
        );
        assert_eq!(&text[start..end], edu["text"]);
        assert!(edu["tokens"].as_u64().unwrap() > 0);
    }
    assert_eq!(
        edus.as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2]
    );

    let hits = json(&db, &["search", "nest", "--limit", "5"]);
    let hits = hits.as_array().unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h["edus"].is_array()
        && h["bytes"].is_array()
        && h["score"].as_f64().unwrap() > 0.0));

    let stats = json(&db, &["stats"]);
    assert_eq!(stats["documents"], 2);
    assert_eq!(json(&db, &["check"])["documents"], 2);
}

#[test]
fn text_output_draws_trees_and_summaries() {
    let (_dir, db) = fixture();
    let tree = String::from_utf8(edudb(&db, &["tree", "guide"]).stdout).unwrap();
    assert!(tree.contains("└── [0-5] section Guide"), "{tree}");
    assert!(tree.contains("[3-5] section Install"), "{tree}");
    let docs_dir = db.parent().unwrap().join("docs");
    let out = edudb(
        &db,
        &[
            "ingest",
            "-q",
            docs_dir.join("guide.md").to_str().unwrap(),
            "--id",
            "again",
        ],
    );
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(
        summary.starts_with("ingested 1 documents: 6 EDUs,")
            && (summary.contains("MB/s") || summary.contains("KB/s"))
            && summary.contains(" tokens/s)"),
        "{summary}"
    );
}

#[test]
fn stdin_ingest_rm_and_reindex() {
    let (_dir, db) = fixture();
    let out = edudb_with_stdin(
        &db,
        &["ingest", "-", "--id", "piped", "--format", "text", "--json"],
        b"Piped text arrives here. It is indexed.",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&db, &["search", "piped"])[0]["doc"], "piped");
    assert!(edudb(&db, &["rm", "piped"]).status.success());
    assert_eq!(json(&db, &["search", "piped"]), Value::Array(vec![]));
    assert!(edudb(&db, &["reindex", "-q"]).status.success());
    assert_eq!(json(&db, &["search", "hypertext"])[0]["doc"], "sub/page");
}

#[test]
fn show_page_lists_a_pages_edus_and_names_pages_past_the_last() {
    let (dir, db) = fixture();
    let pdf = dir.path().join("acme.pdf");
    std::fs::write(
        &pdf,
        crate::support::small_pdf(&["Net sales rose in 2020.", "Capital spending fell."]),
    )
    .unwrap();
    let out = edudb(&db, &["ingest", pdf.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = json(&db, &["show", "acme", "--page", "1"]);
    let texts: Vec<&str> = (shown.as_array().unwrap().iter())
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Net sales rose in 2020.", "Capital spending fell."]);
    for (args, message) in [
        (
            vec!["show", "acme", "--page", "2"],
            "acme has 1 page: --page 2 is past its last",
        ),
        (
            vec!["show", "acme", "--page", "0"],
            "bad page range 0..0: pages are numbered from 1",
        ),
        (
            vec!["show", "acme", "--page", "3..1"],
            "bad page range 3..1",
        ),
        (
            vec!["show", "guide", "--page", "1"],
            "guide has no pages: --page is for documents read from a PDF",
        ),
    ] {
        let out = edudb(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn query_prints_results_json_and_located_errors() {
    let (_dir, db) = fixture();
    let result = json(
        &db,
        &[
            "query",
            "SELECT FROM * SEED BM25($q) BUDGET 40 TOKENS",
            "-p",
            "q=byte ranges",
        ],
    );
    assert!(result["tokens_used"].as_u64().unwrap() <= 40);
    assert_eq!(result["budget"], 40);
    assert_eq!(result["results"][0]["doc"], "guide");
    // `[...]` binds a query vector, which NEAR checks against the store's.
    let out = edudb(
        &db,
        &[
            "query",
            "SELECT FROM * SEED NEAR($v)",
            "-p",
            "v=[0.5, 1, -2]",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a vector of 3 numbers"),
        "{}",
        stderr(&out)
    );
    let best = "SELECT SPANS FROM * SEED BM25('byte ranges') LIMIT 1";
    let match_score = json(&db, &["query", best])["results"][0]["match_score"]
        .as_f64()
        .unwrap();
    let printed = edudb(&db, &["query", best]);
    assert!(
        text(&printed).contains(&format!("score 1.000 (match {match_score:.3})")),
        "{}",
        text(&printed)
    );
    let same = edudb(
        &db,
        &[
            "query",
            "SELECT FROM * SEED BM25('byte ranges') BUDGET 40 TOKENS",
            "--format",
            "json",
        ],
    );
    let same: Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(same["results"], result["results"]);

    let text = edudb(
        &db,
        &[
            "query",
            "EXPLAIN SELECT FROM doc('guide') SEED BM25('trees') LIMIT 1",
        ],
    );
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("OPERATOR") && text.contains("seed") && text.contains("cpu"),
        "{text}"
    );
    assert!(
        text.contains("── guide [") && text.contains("Trees nest"),
        "{text}"
    );

    let bad = edudb(&db, &["query", "SELECT FROM *\nLIMTI 3"]);
    assert_eq!(bad.status.code(), Some(1));
    let message = stderr(&bad);
    assert!(message.contains("line 2, column 1"), "{message}");
    assert!(message.contains("did you mean LIMIT?"), "{message}");
    assert!(message.contains("\n  LIMTI 3\n  ^^^^^"), "{message}");
}

#[test]
fn a_filing_with_damaged_image_streams_ingests_without_the_readers_log() {
    // Adobe's 2022 10-K: pdf_oxide cannot inflate some of its image
    // streams and logs each as an error; all its text reads.
    let filing = shared_data().join("financebench_dev/pdfs/ADOBE_2022_10K.pdf");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let out = edudb(&db, &["-q", "ingest", filing.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing on stderr under -q");
    let docs = json(&db, &["docs"]);
    assert_eq!(docs[0]["title"], "ADOBE INC.", "{docs}");
    assert!(docs[0]["edus"].as_u64().unwrap() > 1000, "{docs}");
}

#[test]
fn dag_lists_nodes_and_edges_as_json_and_dot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let demo = demo_dir().join("2585-unsafe-block-in-unsafe-fn.md");
    json(&db, &["ingest", demo.to_str().unwrap()]);
    let id = "2585-unsafe-block-in-unsafe-fn";
    let dag = json(&db, &["dag", id]);
    let nodes = dag["nodes"].as_array().unwrap();
    assert!(
        nodes.iter().any(|n| n["level"] == 2),
        "the demo RFC has information points"
    );
    for node in nodes {
        assert_eq!(
            sorted_keys(node),
            ["edus", "id", "level", "points", "text", "window", "written"]
        );
    }
    let edges = dag["edges"].as_array().unwrap();
    assert!(!edges.is_empty());
    for edge in edges {
        let weight = edge["weight"].as_f64().unwrap();
        assert!(weight > 0.0 && weight <= 1.0);
        let level = |end: &str| nodes[edge[end].as_u64().unwrap() as usize]["level"].as_u64();
        assert_eq!(level("to").map(|l| l + 1), level("from"), "{edge}");
    }
    let dot = edudb(&db, &["dag", id, "--dot"]);
    let dot = String::from_utf8(dot.stdout).unwrap();
    assert!(dot.starts_with("digraph \"2585-unsafe-block-in-unsafe-fn\" {"));
    assert_eq!(dot.matches(" -> ").count(), edges.len());
    let level_two = edudb(&db, &["dag", id, "--level", "2"]);
    let text = String::from_utf8(level_two.stdout).unwrap();
    assert!(
        text.lines()
            .filter(|l| l.starts_with('#'))
            .all(|l| l.contains(" L2 ")),
        "{text}"
    );
    let bad = dir.path().join("bad.safetensors");
    std::fs::write(&bad, b"nonsense").unwrap();
    let out = edudb(&db, &["dag", id, "--attention", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a safetensors file"),
        "{}",
        stderr(&out)
    );
    let missing = edudb(&db, &["dag", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn bad_input_creates_no_store_and_hyphen_text_is_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new");
    // A bad id or blank text fails before the store is created.
    for args in [
        ["session", "add", "bad/id", "x"],
        ["session", "add", "ok", "   "],
    ] {
        let out = edudb(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
    // Text starting with '-' is the turn's text, not a flag.
    let turn = json(&db, &["session", "add", "s", "-5 °C tonight?"]);
    assert_eq!(turn["turn"], 0);
    let view = json(&db, &["session", "show", "s"]);
    assert_eq!(
        view["topics"][0]["branches"][0]["turns"][0]["summary"]["text"],
        "-5 °C tonight?"
    );
    // The receipt says the asked placement in words, not JSON.
    let out = edudb(&db, &["session", "add", "s", "--fork", "0", "Or colder?"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let receipt = text(&out);
    assert!(receipt.contains("(asked fork at turn 0;"), "{receipt}");
    assert!(!receipt.contains('{'), "{receipt}");
}
