//! End-to-end tests of the `edudb` binary: JSON shapes, exit codes, and
//! error messages.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{demo_dir, edudb, edudb_with_stdin, shared_data, stderr, text};

/// Runs `edudb --db DB ARGS --json`, which must succeed, and parses its output.
fn json(db: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = edudb(db, &all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The keys of a JSON object, sorted.
fn sorted_keys(value: &Value) -> Vec<&str> {
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
fn fixture() -> (tempfile::TempDir, std::path::PathBuf) {
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
            ["bytes", "edus", "id", "nodes", "title", "tokens"]
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
        summary.starts_with("ingested 1 documents: 6 EDUs,") && summary.contains("MB/s"),
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
fn user_errors_exit_1_with_clear_messages() {
    let (dir, db) = fixture();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["show", "missing"], "no document with id \"missing\""),
        (
            vec!["show", "guide", "4..99"],
            "EDU range 4..99 is outside document \"guide\", whose EDUs are 0..5 (both ends included)",
        ),
        (
            vec!["show", "guide", "5..2"],
            "EDU range 5..2 runs backwards",
        ),
        (vec!["show", "guide", "x..y"], "bad EDU range"),
        (vec!["rm", "missing"], "no document with id"),
        (vec!["search", "AND ("], "search query"),
        (vec!["search", "x", "--limit", "0"], "--limit"),
        (vec!["ingest", "--format", "docx", "x.md"], "unknown format"),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, message) in cases {
        let out = edudb(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, b"fine\nbroken \xc3 here").unwrap();
    let out = edudb(&db, &["ingest", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid UTF-8 at byte 12 (line 2, column 8)")
            && stderr(&out).contains("hint: pass --lossy"),
        "{}",
        stderr(&out)
    );
    let out = edudb(&dir.path().join("nowhere"), &["docs"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no edudb store"), "{}", stderr(&out));
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
fn a_second_process_gets_busy_after_its_timeout() {
    let (_dir, db) = fixture();
    let held = edudb::Db::open(&db).unwrap();
    let out = edudb(&db, &["ingest", "-", "--id", "x", "--wait", "0.1"]);
    assert_eq!(out.status.code(), Some(3), "busy, not bad input");
    let pid = format!("is locked by another process (pid {})", std::process::id());
    assert!(
        stderr(&out).contains(&pid)
            && stderr(&out).contains("waited 0.1 s")
            && stderr(&out).contains("--wait SECONDS"),
        "{}",
        stderr(&out)
    );
    drop(held);
    assert!(edudb(&db, &["docs"]).status.success());
}

#[test]
fn a_second_process_waits_for_the_store_within_its_timeout() {
    let (_dir, db) = fixture();
    // A wait too long for a deadline (1e19 s) waits without end.
    for wait in ["60", "1e19"] {
        let held = edudb::Db::open(&db).unwrap();
        let mut waiting = Command::new(env!("CARGO_BIN_EXE_edudb"))
            .arg("--db")
            .arg(&db)
            .args(["docs", "--json"])
            .env("EDUDB_WAIT", wait)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            waiting.try_wait().unwrap().is_none(),
            "wait {wait}: the command ended while the store was held instead of waiting"
        );
        drop(held);
        let out = waiting.wait_with_output().unwrap();
        assert!(out.status.success(), "wait {wait}: {}", stderr(&out));
        let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(docs.as_array().is_some_and(|d| !d.is_empty()), "{docs}");
    }
    for bad in ["-1", "abc"] {
        let out = edudb(&db, &["docs", &format!("--wait={bad}")]);
        assert_eq!(out.status.code(), Some(1), "--wait {bad}");
        assert!(
            stderr(&out).contains("is not a number of seconds"),
            "--wait {bad}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn environment_variable_selects_the_store() {
    let (_dir, db) = fixture();
    let out = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .env("EDUDB_PATH", &db)
        .args(["docs", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(docs.as_array().unwrap().len(), 2);
}

#[test]
fn demo_runs_without_any_setup() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .current_dir(dir.path())
        .args(["demo", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ingested 5 documents"), "{text}");
    assert!(text.contains("2585-unsafe-block-in-unsafe-fn"), "{text}");
    assert!(
        text.contains("OPERATOR") && text.contains("-token budget)"),
        "{text}"
    );
    assert!(
        text.contains("nodes at level 2 of 2585-unsafe-block-in-unsafe-fn"),
        "{text}"
    );
    assert!(text.contains("session rfc-chat (5 turns"), "{text}");
    assert!(text.contains("of 120 tokens"), "{text}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "demo left files behind"
    );
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
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.txt");
    let sentence = "A sentence long enough to stand as its own unit of discourse. ";
    std::fs::write(&big, sentence.repeat(5_000)).unwrap();
    let db = dir.path().join("store");
    assert!(
        edudb(&db, &["ingest", "-q", big.to_str().unwrap()])
            .status
            .success()
    );
    // More output than a pipe buffers, to a reader that has already left.
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(&db)
        .args(["show", "big"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn eval_converts_financebench_and_runs_it_with_the_page_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unused");
    // The dev layout as published: questions.jsonl beside pdfs/.
    let data = shared_data().join("financebench_dev");
    let jsonl = dir.path().join("financebench.jsonl");
    let convert = |questions: &Path, output: &Path| {
        edudb(
            &db,
            &[
                "eval",
                "convert",
                "financebench",
                questions.to_str().unwrap(),
                "-o",
                output.to_str().unwrap(),
            ],
        )
    };
    let out = convert(&data.join("questions.jsonl"), &jsonl);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = std::fs::read_to_string(data.join("questions.jsonl")).unwrap();
    let published = lines.lines().filter(|l| !l.trim().is_empty()).count();
    let filings = std::fs::read_dir(data.join("pdfs")).unwrap().count();
    assert!(
        text(&out).contains(&format!("{filings} documents, {published} questions")),
        "{}",
        text(&out)
    );
    // A small filing of the same layout, run end to end.
    let small = dir.path().join("small");
    std::fs::create_dir_all(small.join("pdfs")).unwrap();
    std::fs::write(
        small.join("pdfs/ACME_2020_10K.pdf"),
        crate::support::small_pdf(&[
            "Net sales were 4,200 million dollars in 2020.",
            "Capital expenditure was 310 million dollars.",
        ]),
    )
    .unwrap();
    std::fs::write(
        small.join("questions.jsonl"),
        r#"{"financebench_id":"fb1","doc_name":"ACME_2020_10K","question":"What was capital expenditure in 2020?","answer":"$310 million","evidence":[{"doc_name":"ACME_2020_10K","evidence_text":"Capital expenditure was 310 million dollars.","evidence_page_num":0}]}"#,
    )
    .unwrap();
    let jsonl = small.join("acme.jsonl");
    let out = convert(&small.join("questions.jsonl"), &jsonl);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(
        &db,
        &[
            "eval",
            "run",
            jsonl.to_str().unwrap(),
            "--budgets",
            "256",
            "--resamples",
            "20",
        ],
    );
    let cells = report["cells"].as_array().unwrap();
    let recall = |method: &str| {
        cells
            .iter()
            .find(|c| c["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {cells:?}"))["recall"]["mean"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(recall("edudb"), 1.0);
    assert_eq!(recall("bm25-page"), 1.0);
}

#[test]
fn eval_converts_runs_and_reports_tables_json_plots_and_observations() {
    let dir = tempfile::tempdir().unwrap();
    let data = shared_data().join("hotpotqa");
    let questions = data.join("hipporag_hotpotqa_train100.json");
    let jsonl = dir.path().join("hotpot.jsonl");
    let db = dir.path().join("unused");
    let out = edudb(
        &db,
        &[
            "eval",
            "convert",
            "hotpotqa",
            questions.to_str().unwrap(),
            "-o",
            jsonl.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text(&out).contains("100 documents, 100 questions"));
    // Keep three questions (each follows its document) to stay quick.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let small = dir.path().join("three.jsonl");
    std::fs::write(&small, text.lines().take(6).collect::<Vec<_>>().join("\n")).unwrap();
    let svg = dir.path().join("recall.svg");
    let observations = dir.path().join("obs.jsonl");
    let report = json(
        &db,
        &[
            "eval",
            "run",
            small.to_str().unwrap(),
            "--budgets",
            "100,400",
            "--resamples",
            "50",
            "--svg",
            svg.to_str().unwrap(),
            "--observations",
            observations.to_str().unwrap(),
        ],
    );
    let cells = report["cells"].as_array().unwrap();
    // 3 edudb templates and 8 flat baselines at 2 budgets.
    assert_eq!(cells.len(), 2 * 11);
    for cell in cells {
        assert_eq!(cell["dataset"], "three");
        assert_eq!(cell["questions"], 3);
        assert!(cell["tokens"]["mean"].as_f64().unwrap() <= cell["budget"].as_f64().unwrap());
    }
    assert_eq!(report["comparisons"].as_array().unwrap().len(), 2 * 3);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("bm25-chunk-100") && plot.contains("three"));
    assert_eq!(
        std::fs::read_to_string(&observations)
            .unwrap()
            .lines()
            .count(),
        3 * 11 * 2
    );
    // The readable table, with only a custom template and no baselines.
    let out = edudb(
        &db,
        &[
            "eval",
            "run",
            small.to_str().unwrap(),
            "--budgets",
            "200",
            "--no-baselines",
            "--query",
            "mine=SELECT FROM * SEED BM25($question) BUDGET $budget TOKENS",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("three (3 questions"), "{table}");
    assert!(
        table.contains("evidence recall") && table.contains("  mine "),
        "{table}"
    );
    // A template without $budget is refused with exit 1.
    let out = edudb(
        &db,
        &[
            "eval",
            "run",
            small.to_str().unwrap(),
            "--query",
            "x=SELECT FROM * SEED BM25($question)",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("does not use $budget"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn eval_structure_scores_heading_recovery() {
    let db = Path::new("unused");
    let demo = demo_dir().join("0002-rfc-process.md");
    let report = json(db, &["eval", "structure", demo.to_str().unwrap()]);
    assert_eq!(report["summary"]["documents"], 1);
    let doc = &report["documents"][0];
    assert_eq!(doc["document"], "0002-rfc-process");
    // Seven headings, flat once the markers are gone: two subsections move up.
    assert_eq!(doc["reference_nodes"], 8);
    assert!(doc["heading_recall"].as_f64().unwrap() > 0.5, "{doc}");
    assert!(doc["distance"].as_u64().unwrap() >= 2, "{doc}");
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
fn eval_structure_scores_recovery_from_the_rendered_pdf_and_counts_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unused");
    let body = "The process keeps every change small enough to review in one sitting, and each review names its reviewer.";
    let markdown = format!(
        "# Guide\n\n{body}\n\n## Setup\n\n{body}\n\n## Usage\n\n{body}\n\n### Flags\n\n{body}\n"
    );
    std::fs::write(dir.path().join("guide.md"), &markdown).unwrap();
    std::fs::write(dir.path().join("other.md"), &markdown).unwrap();
    // Rendered as a renderer sets headings: larger by level, bold.
    let rendered = dir.path().join("rendered");
    std::fs::create_dir(&rendered).unwrap();
    let mut builder = pdf_oxide::writer::DocumentBuilder::new();
    let mut page = builder.letter_page();
    let mut y = 720.0;
    for (heading, size) in [
        ("Guide", 24.0),
        ("Setup", 18.0),
        ("Usage", 18.0),
        ("Flags", 14.0),
    ] {
        page = page
            .font("Helvetica-Bold", size)
            .at(72.0, y)
            .text(heading)
            .font("Helvetica", 10.0)
            .at(72.0, y - 24.0)
            .text(&body[..57])
            .at(72.0, y - 36.0)
            .text(&body[57..]);
        y -= 80.0;
    }
    page.done();
    std::fs::write(rendered.join("guide.pdf"), builder.build().unwrap()).unwrap();
    let report = json(
        &db,
        &[
            "eval",
            "structure",
            dir.path().join("guide.md").to_str().unwrap(),
            dir.path().join("other.md").to_str().unwrap(),
            "--rendered",
            rendered.to_str().unwrap(),
        ],
    );
    assert_eq!(report["summary"]["documents"], 1);
    assert_eq!(report["unrendered"], 1, "other.md has no PDF");
    let doc = &report["documents"][0];
    assert_eq!(doc["document"], "guide");
    // Every heading comes back from type sizes alone, nested as written.
    assert_eq!(doc["heading_recall"], 1.0, "{doc}");
    assert_eq!(doc["distance"], 0, "{doc}");
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

// `edudb session add/show/context/ls/rm`: JSON shapes, text output, exit
// codes and error messages.

#[test]
fn session_add_jsonl_and_times_then_a_context_for_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let lines = [
        r#"{"text": "My sister adopted a grey cat called Biscuit.", "at": "2023-05-18T13:47:00Z"}"#,
        r#"{"role": "assistant", "text": "What a lovely name for a cat!", "placement": "continue"}"#,
        "",
        r#"{"text": "Which trains run from Sapporo to Otaru?", "at": "2023-06-01", "placement": "new_topic"}"#,
    ];
    let path = dir.path().join("turns.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let receipts = json(
        &db,
        &["session", "add", "s", "--jsonl", path.to_str().unwrap()],
    );
    let receipts = receipts.as_array().unwrap();
    assert_eq!(receipts.len(), 3);
    assert_eq!(receipts[0]["at"], "2023-05-18T13:47:00Z");
    assert_eq!(receipts[1]["at"], serde_json::Value::Null);
    assert_eq!(
        (receipts[1]["role"].as_str(), receipts[1]["parent"].as_u64()),
        (Some("assistant"), Some(0))
    );
    assert_eq!(receipts[2]["at"], "2023-06-01T00:00:00Z");
    assert_eq!(receipts[2]["topic"], 1);
    // One turn with a time; a bad time is refused before anything is written.
    let one = json(
        &db,
        &[
            "session",
            "add",
            "s",
            "--at",
            "2023-06-02T08:00:00+02:00",
            "And back?",
        ],
    );
    assert_eq!(one["at"], "2023-06-02T06:00:00Z");
    let out = edudb(&db, &["session", "add", "s", "--at", "yesterday", "When?"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"yesterday\" is not a time"),
        "{}",
        stderr(&out)
    );
    // A bad line names its file and line; nothing of the file is written.
    std::fs::write(&path, format!("{}\n{{\"txt\": \"typo\"}}\n", lines[0])).unwrap();
    let out = edudb(
        &db,
        &["session", "add", "s", "--jsonl", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("turns.jsonl:2: not a turn object"),
        "{}",
        stderr(&out)
    );

    assert_eq!(json(&db, &["session", "ls"])[0]["turns"], 4);
    // The context for a query finds the old turn and its reply, with dates.
    let context = json(
        &db,
        &[
            "session",
            "context",
            "s",
            "--budget",
            "60",
            "--query",
            "What is the cat called?",
        ],
    );
    let items = context["items"].as_array().unwrap();
    let turns: Vec<u64> = items.iter().map(|i| i["turn"].as_u64().unwrap()).collect();
    assert!(turns.contains(&0) && turns.contains(&1), "{context}");
    let cat = items.iter().find(|i| i["turn"] == 0).unwrap();
    assert_eq!(
        (cat["kind"].as_str(), cat["at"].as_str()),
        (Some("relevant_turn"), Some("2023-05-18T13:47:00Z"))
    );
    assert!(context["tokens_used"].as_u64().unwrap() <= 60);
    let view = json(&db, &["session", "show", "s"]);
    let first = &view["topics"][0]["branches"][0]["turns"][0];
    assert_eq!(first["at"], "2023-05-18T13:47:00Z");
    let out = edudb(&db, &["session", "show", "s"]);
    assert!(
        text(&out).contains("#0 user 2023-05-18T13:47:00Z [0-0]"),
        "{}",
        text(&out)
    );
    let out = edudb(
        &db,
        &[
            "session", "context", "s", "--budget", "60", "--query", "cat",
        ],
    );
    assert!(
        text(&out).contains("── turn #0 user (relevance ")
            && text(&out).contains(" 2023-05-18T13:47:00Z @session/s/000000"),
        "{}",
        text(&out)
    );
    // Each bad line says which, through standard input too; an empty input
    // is an error; none of it writes anything.
    for (input, wanted) in [
        (
            format!(
                "{}\n\n{{\"text\": \"x\", \"at\": \"2023-05-18T13:47\"}}",
                lines[0]
            ),
            "<stdin>:3: \"2023-05-18T13:47\" is not a time",
        ),
        (
            format!("{}\n{{\"text\": \"   \"}}", lines[0]),
            "<stdin>:2: ",
        ),
        ("\n\n".to_owned(), "<stdin>:0: no turns in it"),
    ] {
        let out = edudb_with_stdin(
            &db,
            &["session", "add", "s", "--jsonl", "-"],
            input.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{wanted}: {}", stderr(&out));
    }
    // Explicit placements by line, one naming a turn of the same file.
    let placed = "{\"text\": \"Back to Biscuit the cat.\", \"placement\": {\"topic\": 0}}\n{\"text\": \"Or a second cat?\", \"placement\": {\"fork\": 4}}\n";
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "s", "--jsonl", "-", "--json"],
        placed.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let receipts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (receipts[0]["turn"].as_u64(), receipts[0]["topic"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(
        (
            receipts[1]["parent"].as_u64(),
            receipts[1]["decision"]["branch"].as_str()
        ),
        (Some(4), Some("fork"))
    );
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "s", "--jsonl", "-"],
        placed.as_bytes(),
    );
    assert!(
        text(&out).starts_with("appended 2 turns to session s (turns 6-7, in 1 topics)"),
        "{}",
        text(&out)
    );
}

#[test]
fn session_add_show_context_ls_rm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let first = json(
        &db,
        &[
            "session",
            "add",
            "trip",
            "We plan a winter trip to Hokkaido with our child.",
        ],
    );
    assert_eq!(first["turn"], 0);
    assert_eq!(first["doc"], "@session/trip/000000");
    assert_eq!(first["role"], "user");
    assert_eq!(first["decision"]["topic"], "first");
    assert_eq!(
        sorted_keys(&first),
        [
            "at", "branch", "decision", "doc", "edus", "parent", "role", "session", "summary",
            "tokens", "topic", "turn"
        ]
    );
    let second = json(
        &db,
        &[
            "session",
            "add",
            "trip",
            "--role",
            "assistant",
            "--continue",
            "Sapporo hosts a snow festival in February.",
        ],
    );
    assert_eq!(
        (second["parent"].as_u64(), second["role"].as_str()),
        (Some(0), Some("assistant"))
    );
    // Text from standard input, a new topic.
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "trip", "--new-topic", "-"],
        b"Which Python library parses JSON fastest?\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text(&out).contains("turn 2 (user) → topic 1"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("decision: topic new"), "{}", text(&out));
    let fork = json(
        &db,
        &["session", "add", "trip", "--fork", "0", "Or Okinawa?"],
    );
    assert_eq!(
        (fork["parent"].as_u64(), fork["topic"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(fork["decision"]["branch"], "fork");

    // show: JSON tree and the box-drawn one.
    let view = json(&db, &["session", "show", "trip"]);
    assert_eq!(view["turns"], 4);
    assert_eq!(view["current"], 3);
    assert_eq!(view["topics"].as_array().unwrap().len(), 2);
    let branches = view["topics"][0]["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 2);
    assert_eq!(branches[1]["fork"], 0);
    assert_eq!(branches[1]["turns"][0]["current"], true);
    let summary = &branches[0]["turns"][1]["summary"];
    assert_eq!(
        summary["text"],
        "Sapporo hosts a snow festival in February."
    );
    assert_eq!(summary["bytes"], serde_json::json!([0, 42]));
    let out = edudb(&db, &["session", "show", "trip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = text(&out);
    assert!(
        shown.starts_with("session trip (4 turns, 2 topics"),
        "{shown}"
    );
    assert!(shown.contains("├── topic 0 (active)"), "{shown}");
    assert!(
        shown.contains("└── branch 2 forks at #0 (active)"),
        "{shown}"
    );
    assert!(
        shown.contains("#1 assistant [0-0] 0..42 Sapporo hosts"),
        "{shown}"
    );
    assert!(
        shown.contains("#3 user [0-0] 0..11 Or Okinawa?  ◀ current"),
        "{shown}"
    );

    // context: JSON contract and text.
    let context = json(&db, &["session", "context", "trip", "--budget", "1000"]);
    assert!(context["tokens_used"].as_u64().unwrap() <= 1000);
    // One-EDU turns: each summary is its whole turn, so no saving here
    // (tests/it/memory.rs measures the saving on longer turns).
    assert!(context["tokens_used"].as_u64() <= context["history_tokens"].as_u64());
    let kinds: Vec<&str> = context["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"topic_summary") && kinds.contains(&"branch_summary"),
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "path_turn").count(), 2);
    let tight = json(&db, &["session", "context", "trip", "--budget", "5"]);
    assert!(tight["tokens_used"].as_u64().unwrap() <= 5);
    let out = edudb(&db, &["session", "context", "trip", "--budget", "1000"]);
    assert!(
        text(&out).contains("── turn #3 user @session/trip/000003 [0-0]"),
        "{}",
        text(&out)
    );

    // ls, and the turns stay out of `docs`.
    json(&db, &["session", "add", "notes", "A second session."]);
    let list = json(&db, &["session", "ls"]);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["notes", "trip"]);
    assert_eq!(list[1]["turns"], 4);
    assert_eq!(json(&db, &["docs"]), serde_json::json!([]));
    let query = json(
        &db,
        &[
            "query",
            "SELECT FROM session('trip') SEED BM25('snow festival') LIMIT 3",
        ],
    );
    assert!(
        query["results"][0]["doc"]
            .as_str()
            .unwrap()
            .starts_with("@session/trip/")
    );
    assert_eq!(json(&db, &["check"])["sessions"], 2);

    // rm, and errors: exit 1 with a message saying what.
    let out = edudb(&db, &["rm", "@session/trip/000001"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("turns are removed with their session"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("session forget SESSION TURN"),
        "{}",
        stderr(&out)
    );
    let forgot = json(&db, &["session", "forget", "trip", "1"]);
    assert_eq!(
        forgot,
        serde_json::json!({"session": "trip", "forgotten": 1})
    );
    let show = edudb(&db, &["session", "show", "trip"]);
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("#1 "),
        "{show:?}"
    );
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("(forgotten)"),
        "{show:?}"
    );
    assert_eq!(json(&db, &["check"])["damaged"], serde_json::json!([]));
    assert_eq!(json(&db, &["session", "rm", "trip"])["removed"], "trip");
    let out = edudb(&db, &["session", "show", "trip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no session with id \"trip\""),
        "{}",
        stderr(&out)
    );
    let out = edudb(&db, &["session", "add", "notes", "--topic", "5", "More."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has no topic 5"), "{}", stderr(&out));
    let out = edudb(&db, &["session", "add", "bad/id", "Text."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid session id"),
        "{}",
        stderr(&out)
    );
    let out = edudb(&db, &["session", "add", "notes", "  "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
    let out = edudb(
        &db,
        &["session", "add", "notes", "--fork", "0", "--new-topic", "x"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "conflicting placements are a usage error"
    );
    let out = edudb(&db, &["session", "add", "notes", "--role", "robot", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&db, &["session", "ls"]).as_array().unwrap().len(), 1);
    assert_eq!(json(&db, &["check"])["sessions"], 1);
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

#[test]
fn auto_placement_and_bulleted_context_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for turn in [
        "- apples\n- pears\n- plums, and a long list item about which fruit keeps best in a cold cellar",
        "- the apples keep longest\n- the pears next\n- plums soften within a week in the cellar",
        "Which Python library parses JSON fastest?",
    ] {
        let out = edudb(&db, &["session", "add", "fruit", turn]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(text(&out).contains("(asked auto;"), "{}", text(&out));
    }
    let receipt = json(&db, &["session", "add", "fruit", "- and the plums?"]);
    assert_eq!(receipt["decision"]["requested"], "auto");
    assert_eq!(json(&db, &["session", "show", "fruit"])["turns"], 4);
    // Recount the returned text: never over its stated tokens or the budget.
    for budget in [3u64, 10, 20, 30, 45, 60, 1000] {
        let context = json(
            &db,
            &[
                "session",
                "context",
                "fruit",
                "--budget",
                &budget.to_string(),
            ],
        );
        let mut total = 0;
        for item in context["items"].as_array().unwrap() {
            let tokens = u64::from(edudb::model::tokens::count(item["text"].as_str().unwrap()));
            assert!(tokens <= item["tokens"].as_u64().unwrap(), "{item}");
            total += tokens;
        }
        assert!(total <= budget, "{budget}: {context}");
    }
    assert_eq!(json(&db, &["check"])["sessions"], 1);
}

#[test]
fn check_counts_stored_vectors_and_reindex_the_indexed_ones() {
    let (_dir, db) = fixture();
    let check = text(&edudb(&db, &["check"]));
    assert!(check.contains("EDU vectors stored"), "{check}");
    let reindex = text(&edudb(&db, &["reindex"]));
    assert!(
        reindex.contains("EDU vectors in the graph (heading EDUs are not indexed"),
        "{reindex}"
    );
    // The two differ by exactly the heading EDUs.
    let report = json(&db, &["check"]);
    assert_eq!(report["damaged"], Value::Array(vec![]));
    let stored = report["vectors"]["edus"].as_u64().unwrap();
    let indexed = json(&db, &["reindex"])["vectors"]["edus"].as_u64().unwrap();
    let headings: u64 = ["guide", "sub/page"]
        .iter()
        .map(|doc| {
            let edus = json(&db, &["show", doc]);
            edus.as_array()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "heading")
                .count() as u64
        })
        .sum();
    assert!(headings > 0);
    assert_eq!(stored, indexed + headings);
}

#[test]
fn changes_a_restored_older_store_lacks_are_reported_as_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let ingest = |id: &str, text: &str| {
        let out = edudb_with_stdin(&db, &["ingest", "-", "--id", id], text.as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // An older copy of the store's sled files, and putting it back under
    // the newer full-text index.
    let copy_store = |name: &str| {
        let copy = dir.path().join(name);
        let copied = Command::new("cp")
            .arg("-r")
            .arg(db.join("sled"))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(copied.success());
        copy
    };
    let restore = |copy: &std::path::Path| {
        std::fs::remove_dir_all(db.join("sled")).unwrap();
        std::fs::rename(copy, db.join("sled")).unwrap();
    };
    ingest("kept", "A document written before the copy was taken.");
    // Removed before the copy: its terms may stay in an index segment, and
    // it must not be taken for a loss.
    ingest("removed", "Otters float on their backs in the kelp.");
    assert!(edudb(&db, &["rm", "removed"]).status.success());
    let copy = copy_store("sled-copy");
    ingest("lost", "Zebras gallop across the savannah at dawn.");
    // The older copy of the store goes back under the newer full-text index.
    restore(&copy);
    let out = edudb(&db, &["docs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("changes after 3 were lost"),
        "{}",
        stderr(&out)
    );
    assert!(text(&out).contains("kept") && !text(&out).contains("lost"));
    // The index was rebuilt from the store: search no longer finds it.
    let out = edudb(&db, &["search", "zebras"]);
    assert!(!text(&out).contains("lost"), "{}", text(&out));
    // But the loss was recorded: every check names the document (exit 2,
    // damage) until it is ingested again or removed.
    let damaged = |db: &std::path::Path| -> Vec<(String, String)> {
        let out = edudb(db, &["check", "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (report["damaged"].as_array().unwrap().iter())
            .map(|d| {
                (
                    d["doc"].as_str().unwrap().to_owned(),
                    d["problem"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    for _ in 0..2 {
        let out = edudb(&db, &["check"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let named = damaged(&db);
        assert!(
            matches!(&named[..], [(doc, problem)] if doc == "lost" && problem.contains("lost to damage") && problem.contains("change 3")),
            "{named:?}"
        );
    }
    // A salvage copies what is kept and names what was lost as left out.
    let salvaged = dir.path().join("salvaged");
    let out = edudb(&db, &["salvage", "--json", salvaged.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["documents"], 1, "{report}");
    let left_out = report["skipped"].as_array().unwrap();
    assert!(
        matches!(&left_out[..], [one] if one["doc"] == "lost" && one["problem"].as_str().unwrap().contains("lost to damage")),
        "{report}"
    );
    ingest("lost", "Zebras gallop across the savannah at dawn.");
    assert!(edudb(&db, &["check"]).status.success());
    // Stored again, its loss is forgotten: removing it later is an
    // ordinary removal, not a loss.
    assert!(edudb(&db, &["rm", "lost"]).status.success());
    assert!(
        edudb(&db, &["check"]).status.success(),
        "{:?}",
        damaged(&db)
    );
    // Another loss, acknowledged by removing the document (once).
    let copy = copy_store("sled-copy-2");
    ingest("gone", "Herons stand still in the shallow river.");
    restore(&copy);
    let out = edudb(&db, &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = format!("{}{}", text(&out), stderr(&out));
    assert!(
        said.contains("gone") && said.contains("lost to damage"),
        "{said}"
    );
    assert!(edudb(&db, &["rm", "gone"]).status.success());
    assert!(edudb(&db, &["check"]).status.success());
    assert_eq!(edudb(&db, &["rm", "gone"]).status.code(), Some(1));

    // A session whose turns and dialogue were all lost is named as a
    // session, and removing the session acknowledges it.
    let copy = copy_store("sled-copy-3");
    let added = edudb(
        &db,
        &["session", "add", "trip", "We fly to Sapporo on Monday."],
    );
    assert!(added.status.success(), "{}", stderr(&added));
    restore(&copy);
    let named = damaged(&db);
    assert!(
        matches!(&named[..], [(doc, problem)] if doc == "session trip" && problem.contains("remove the session")),
        "{named:?}"
    );
    let removed = edudb(&db, &["session", "rm", "trip"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(
        edudb(&db, &["check"]).status.success(),
        "{:?}",
        damaged(&db)
    );
}

#[test]
fn a_store_whose_log_is_damaged_at_its_start_is_salvaged_from_it_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = edudb(&db, &["ingest", "-q", demo_dir().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = |db: &Path| {
        let out = edudb(db, &["docs", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
        (docs.as_array().unwrap().iter())
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let ids = listed(&db);
    let sled = db.join("sled");
    // Without a snapshot the engine replays its log from the start, where
    // the damage is: it cannot open the store at all.
    for entry in std::fs::read_dir(&sled).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("snap.")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    let mut log = std::fs::read(sled.join("db")).unwrap();
    for byte in &mut log[100..4196] {
        *byte ^= 0x5a;
    }
    std::fs::write(sled.join("db"), log).unwrap();
    let copy = dir.path().join("untouched");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(&db)
            .arg(&copy)
            .status()
            .unwrap()
            .success()
    );
    // The engine cuts its log short at the damage, losing every document
    // (`check` names them), or cannot open it at all; never a crash.
    let out = edudb(&db, &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    // Salvage before any open reads the log without the engine: every
    // document, whole.
    let salvaged = dir.path().join("salvaged");
    let out = edudb(&copy, &["salvage", salvaged.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text(&out).contains("read page by page"), "{}", text(&out));
    assert_eq!(listed(&salvaged), ids);
    assert!(edudb(&salvaged, &["check"]).status.success());
    // The scratch store it was read into is gone.
    let left: Vec<_> = std::fs::read_dir(&copy)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("salvage-scratch"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A directory that is no store is refused as one, and left as it was.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "not a store").unwrap();
    let out = edudb(&plain, &["salvage", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 1);
}
