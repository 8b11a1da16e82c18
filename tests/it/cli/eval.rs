//! `edudb eval`: converting datasets, running and reporting them, and
//! heading recovery from text and rendered PDFs.

use std::path::Path;

use super::fixtures::*;
use crate::support::{demo_dir, edudb, shared_data, stderr, text};

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
