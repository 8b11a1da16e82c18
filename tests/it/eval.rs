//! The evaluation: the JSONL data set format and its errors, the HotpotQA
//! and MuSiQue converters (on the real files in ../shared/data), scoring,
//! flat baselines, the end-to-end run, and tree edit distance.

use std::path::{Path, PathBuf};

use edudb::eval::convert::{self, Setting};
use edudb::eval::dataset::{Dataset, Record};
use edudb::eval::flat::{self, Baseline};
use edudb::eval::score::{self, Observation};
use edudb::eval::structure::{OutlineTree, tree_edit_distance};
use edudb::eval::{self, EvalOptions, Method};
use edudb::{CancelToken, Db, Error, Format, NoProgress};
use proptest::prelude::*;

use crate::support::{demo_dir, ingest_markdown, shared_data, small_pdf};

fn write(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

fn slice<'a>(dataset: &'a Dataset, evidence: &edudb::eval::dataset::Evidence) -> &'a str {
    let doc = dataset
        .documents
        .iter()
        .find(|d| d.id == evidence.doc)
        .unwrap();
    &doc.text().unwrap()[evidence.bytes.clone()]
}

#[test]
fn every_evidence_form_resolves_to_its_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "small.jsonl",
        &[
            r##"{"type":"document","id":"plain","format":"text","text":"Alpha one. Beta two."}"##,
            r##"{"type":"document","id":"sec","sections":[{"title":"Cats","sentences":["Cats purr.", " They sleep."]},{"title":"Dogs","sentences":["Dogs bark."]}]}"##,
            "",
            r##"{"type":"question","id":"q1","question":"what?","answer":"x","evidence":[{"doc":"plain","bytes":[11,20]},{"doc":"sec","section":0,"sentence":1},{"doc":"sec","section":1}]}"##,
        ],
    );
    let dataset = Dataset::load(&path).unwrap();
    assert_eq!(dataset.name, "small");
    assert!(matches!(
        dataset.documents[0].body,
        edudb::eval::dataset::Body::Text {
            format: Format::Text,
            ..
        }
    ));
    assert_eq!(
        dataset.documents[1].text(),
        Some("# Cats\n\nCats purr. They sleep.\n\n# Dogs\n\nDogs bark.\n\n")
    );
    let q = &dataset.questions[0];
    let texts: Vec<&str> = q.evidence.iter().map(|e| slice(&dataset, e)).collect();
    assert_eq!(texts, ["Beta two.", "They sleep.", "Dogs bark."]);
    let groups = dataset.groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, None);
    assert_eq!(groups[0].documents.len(), 2);
}

#[test]
fn bad_records_name_the_file_line_and_fault() {
    let dir = tempfile::tempdir().unwrap();
    let doc =
        r##"{"type":"document","id":"d","sections":[{"title":"T","sentences":["Só one."]}]}"##;
    let cases: &[(&str, &str)] = &[
        (r#"{"type":"document","id":"d","text":"x""#, "column"),
        (r#"{"type":"unknown","id":"d"}"#, "unknown variant"),
        (
            r#"{"type":"document","id":"d","text":"x","sections":[]}"#,
            "exactly one of",
        ),
        (
            r#"{"type":"document","id":"d","path":"no-such.pdf"}"#,
            "no file at",
        ),
        (
            r#"{"type":"document","id":"d","path":"bad.jsonl","format":"docx"}"#,
            "unknown format \"docx\"",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","text":"Só one.","bytes":[0,1]}]}"#,
            "a text passage or a span, not both",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","text":"one"}]}"#,
            "fewer than two words",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","text":"Só one."},{"doc":"d","section":0}]}"#,
            "mixes text passages and spans",
        ),
        (
            r#"{"type":"document","id":"d","text":"x","format":"html"}"#,
            "not text or markdown",
        ),
        (
            r#"{"type":"document","id":"d","text":"x","colour":"red"}"#,
            "unknown field",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"nope","bytes":[0,1]}]}"#,
            "unknown document \"nope\"",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","section":3}]}"#,
            "has 1 sections; evidence names section 3",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","section":0,"sentence":1}]}"#,
            "has 1 sentences",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","bytes":[7,9]}]}"#,
            "cut a UTF-8 character",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","bytes":[5,900]}]}"#,
            "not a non-empty range",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[]}"#,
            "has no evidence",
        ),
        (
            r#"{"type":"question","id":"q","question":" ","evidence":[{"doc":"d","section":0}]}"#,
            "has no text",
        ),
        (
            r#"{"type":"question","id":"q","group":"g","question":"?","evidence":[{"doc":"d","section":0}]}"#,
            "is in group None, the question in Some(\"g\")",
        ),
        (
            r#"{"type":"question","id":"q","question":"?","evidence":[{"doc":"d","sentence":0}]}"#,
            "needs \"bytes\", \"section\" with an optional \"sentence\", or \"text\"",
        ),
        (doc, "appears twice"),
    ];
    for (line, expected) in cases {
        let path = write(dir.path(), "bad.jsonl", &[doc, line]);
        let err = Dataset::load(&path).unwrap_err();
        assert!(
            matches!(err, Error::Dataset { line: 2, .. }),
            "{line}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("{}:2: ", path.display())),
            "{message}"
        );
        assert!(message.contains(expected), "{line}: {message}");
        assert!(err.is_user_error());
    }
}

#[test]
fn hotpotqa_converts_both_settings_with_every_gold_sentence_exact() {
    let data = shared_data().join("hotpotqa");
    let questions = data.join("hipporag_hotpotqa_train100.json");
    let corpus = data.join("hipporag_hotpotqa_train100_corpus.json");
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&questions).unwrap()).unwrap();
    for setting in [Setting::PerQuestion, Setting::Shared] {
        let records = convert::hotpotqa(&questions, Some(&corpus), setting).unwrap();
        let dataset = Dataset::from_records(
            "hotpotqa",
            &questions,
            records
                .into_iter()
                .enumerate()
                .map(|(i, r)| (i + 1, r))
                .collect(),
        )
        .unwrap();
        assert_eq!(dataset.questions.len(), 100);
        let documents = if setting == Setting::Shared { 994 } else { 100 };
        assert_eq!(dataset.documents.len(), documents);
        assert_eq!(
            dataset.groups().len(),
            if setting == Setting::Shared { 1 } else { 100 }
        );
        for (question, source) in dataset.questions.iter().zip(raw.as_array().unwrap()) {
            let facts = source["supporting_facts"].as_array().unwrap();
            assert_eq!(question.evidence.len(), facts.len());
            for (gold, fact) in question.evidence.iter().zip(facts) {
                let title = fact[0].as_str().unwrap();
                let index = fact[1].as_u64().unwrap() as usize;
                let context = source["context"].as_array().unwrap();
                let paragraph = context.iter().find(|p| p[0] == title).unwrap();
                let sentence = paragraph[1][index].as_str().unwrap().trim();
                assert_eq!(slice(&dataset, gold), sentence);
            }
        }
    }
}

#[test]
fn musique_converts_supporting_paragraphs_into_their_sentences() {
    let data = shared_data().join("musique");
    let questions = data.join("hipporag_musique_train100.json");
    let corpus = data.join("hipporag_musique_train100_corpus.json");
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&questions).unwrap()).unwrap();
    for setting in [Setting::PerQuestion, Setting::Shared] {
        let records = convert::musique(&questions, Some(&corpus), setting).unwrap();
        let dataset = Dataset::from_records(
            "musique",
            &questions,
            records
                .into_iter()
                .enumerate()
                .map(|(i, r)| (i + 1, r))
                .collect(),
        )
        .unwrap();
        assert_eq!(dataset.questions.len(), 100);
        for (question, source) in dataset.questions.iter().zip(raw.as_array().unwrap()) {
            // The gold sentences of each question are exactly its
            // supporting paragraphs, in order, split into sentences.
            let supporting: Vec<&str> = source["paragraphs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["is_supporting"].as_bool().unwrap())
                .map(|p| p["paragraph_text"].as_str().unwrap())
                .collect();
            let joined: Vec<String> = supporting
                .iter()
                .map(|p| p.split_whitespace().collect())
                .collect();
            let golds: String = question
                .evidence
                .iter()
                .map(|e| slice(&dataset, e))
                .collect::<Vec<_>>()
                .concat();
            let golds: String = golds.split_whitespace().collect();
            assert_eq!(golds, joined.concat(), "{}", question.id);
            assert!(question.evidence.len() >= supporting.len());
        }
    }
    let err = convert::musique(&questions, None, Setting::Shared).unwrap_err();
    assert!(err.to_string().contains("--corpus"), "{err}");
}

#[test]
fn converters_report_malformed_input_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "broken.json", &["[", "{\"_id\": 3}"]);
    let err = convert::hotpotqa(&broken, None, Setting::PerQuestion).unwrap_err();
    assert!(matches!(err, Error::Dataset { line: 2, .. }), "{err:?}");
    let missing = write(
        dir.path(),
        "missing.json",
        &[
            r#"[{"_id":"a","question":"?","answer":"x","context":[["T",["S."]]],"supporting_facts":[["U",0]]}]"#,
        ],
    );
    let err = convert::hotpotqa(&missing, None, Setting::PerQuestion).unwrap_err();
    assert!(
        err.to_string().contains("\"U\", not in its context"),
        "{err}"
    );
}

fn doc(id: &str, text: &str) -> edudb::Document {
    edudb::ingest::analyze(id, text.to_owned(), Format::Markdown).unwrap()
}

#[test]
fn scores_count_whole_gold_sentences_and_gold_tokens() {
    let docs = vec![doc(
        "a",
        "# T\n\nFirst sentence here. Second one is here. Third comes last.\n",
    )];
    let edus = &docs[0].edus;
    assert_eq!(edus.len(), 4);
    let evidence = |i: usize| edudb::eval::dataset::Evidence {
        doc: "a".into(),
        bytes: edus[i].start as usize..edus[i].end as usize,
    };
    let gold = score::gold_sentences(&[evidence(1), evidence(3)], &docs, |id| {
        (id == "a").then_some(0)
    });
    assert_eq!(gold, vec![vec![(0, 1)], vec![(0, 3)]]);
    let unit = |first, last| flat::unit_of(&docs, 0, edudb::Span { first, last });
    let s = score::score(&gold, &[unit(1, 2)], &docs);
    assert_eq!(s.recall, 0.5);
    assert_eq!(s.tokens, u64::from(edus[1].tokens + edus[2].tokens));
    assert_eq!(s.precision, f64::from(edus[1].tokens) / s.tokens as f64);
    let all = score::score(&gold, &[unit(0, 3)], &docs);
    assert_eq!(all.recall, 1.0);
    let none = score::score(&gold, &[], &docs);
    assert_eq!((none.recall, none.precision, none.tokens), (0.0, 0.0, 0));
    // A gold span across two EDUs needs both.
    let across = edudb::eval::dataset::Evidence {
        doc: "a".into(),
        bytes: edus[1].start as usize..edus[2].end as usize,
    };
    let gold = score::gold_sentences(&[across], &docs, |_| Some(0));
    assert_eq!(score::score(&gold, &[unit(1, 1)], &docs).recall, 0.0);
    assert_eq!(score::score(&gold, &[unit(1, 2)], &docs).recall, 1.0);
}

#[test]
fn passages_score_the_share_of_their_word_bigrams_in_the_picked_text() {
    assert_eq!(
        edudb::eval::bigrams::word_bigrams("Net income, 2018: $5,363"),
        [
            ("net", "income"),
            ("income", "2018"),
            ("2018", "5"),
            ("5", "363")
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect::<std::collections::HashSet<_>>()
    );
    let docs = vec![
        doc(
            "a",
            "# T\n\nCash flow from operations rose. Capital spending fell sharply. Debt was repaid.\n",
        ),
        doc("b", "# U\n\nCapital spending fell sharply.\n"),
    ];
    let edus = &docs[0].edus;
    assert_eq!(edus.len(), 4);
    let passage = |doc: &str, text: &str| edudb::eval::dataset::Passage {
        doc: doc.into(),
        text: text.into(),
        page: None,
    };
    let index = |id: &str| ["a", "b"].iter().position(|d| *d == id);
    let unit = |doc, first, last| flat::unit_of(&docs, doc, edudb::Span { first, last });
    // "capital spending fell sharply": 3 bigrams, all in EDU 2 of "a".
    let gold = [passage("a", "Capital spending fell sharply")];
    let s = score::score_passages(&gold, &[unit(0, 2, 2)], &docs, index);
    assert_eq!(s.recall, 1.0);
    assert_eq!(s.precision, 1.0);
    assert_eq!(s.tokens, u64::from(edus[2].tokens));
    // The same words in another document do not count.
    let s = score::score_passages(&gold, &[unit(1, 1, 1)], &docs, index);
    assert_eq!((s.recall, s.precision), (0.0, 0.0));
    // Half a passage: "debt was repaid extra words" has 4 bigrams, 2 picked
    // ("debt was", "was repaid"); precision counts the picked run's bigrams
    // (operations … repaid) in any passage.
    let gold = [
        passage("a", "Capital spending fell sharply"),
        passage("a", "debt was repaid extra words"),
    ];
    let s = score::score_passages(&gold, &[unit(0, 1, 3)], &docs, index);
    assert_eq!(s.recall, (1.0 + 0.5) / 2.0);
    let picked = edudb::eval::bigrams::word_bigrams(
        &docs[0].text[edus[1].start as usize..edus[3].end as usize],
    );
    assert_eq!(s.precision, 5.0 / picked.len() as f64);
    let none = score::score_passages(&gold, &[], &docs, index);
    assert_eq!((none.recall, none.precision, none.tokens), (0.0, 0.0, 0));
}

#[test]
fn financebench_converts_each_filing_as_a_pdf_and_evidence_as_page_passages() {
    let data = shared_data().join("financebench_dev");
    let questions = data.join("questions.jsonl");
    let per_filing =
        convert::financebench(&questions, &data.join("pdfs"), Setting::PerQuestion).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("financebench.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    edudb::eval::dataset::write_jsonl(&per_filing, &mut file).unwrap();
    drop(file);
    // Written with absolute paths: it loads from another directory.
    let dataset = Dataset::load(&path).unwrap();
    let published: Vec<serde_json::Value> = std::fs::read_to_string(&questions)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(dataset.questions.len(), published.len());
    let filings: std::collections::BTreeSet<&str> = published
        .iter()
        .map(|q| q["doc_name"].as_str().unwrap())
        .collect();
    assert_eq!(dataset.documents.len(), filings.len());
    for d in &dataset.documents {
        assert_eq!(
            d.group.as_deref(),
            Some(d.id.as_str()),
            "a store per filing"
        );
        let edudb::eval::dataset::Body::File { format, path } = &d.body else {
            panic!("{} is not a file", d.id);
        };
        assert_eq!(*format, Some(Format::Pdf));
        assert!(path.is_absolute() && path.ends_with(format!("{}.pdf", d.id)));
    }
    for (q, p) in dataset.questions.iter().zip(&published) {
        assert_eq!(q.id, p["financebench_id"].as_str().unwrap());
        assert_eq!(q.group.as_deref(), p["doc_name"].as_str());
        assert!(q.evidence.is_empty());
        let evidence = p["evidence"].as_array().unwrap();
        assert_eq!(q.passages.len(), evidence.len());
        for (passage, e) in q.passages.iter().zip(evidence) {
            assert_eq!(passage.text, e["evidence_text"].as_str().unwrap());
            // Published 0-based; ours 1-based like every page in edudb.
            assert_eq!(
                passage.page,
                Some(e["evidence_page_num"].as_u64().unwrap() as u32 + 1)
            );
        }
    }
    // Shared: one store of every filing.
    let shared = convert::financebench(&questions, &data.join("pdfs"), Setting::Shared).unwrap();
    let records: Vec<(usize, Record)> = shared.into_iter().enumerate().collect();
    let dataset = Dataset::from_records("fb", &questions, records).unwrap();
    assert_eq!(dataset.groups().len(), 1);
    // A missing filing is named.
    let empty = tempfile::tempdir().unwrap();
    let err = convert::financebench(&questions, empty.path(), Setting::PerQuestion).unwrap_err();
    assert!(err.to_string().contains("no filing"), "{err}");
}

#[test]
fn evaluation_ingests_pdf_files_scores_passages_and_reuses_their_stores() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("pdfs")).unwrap();
    let filing = |name: &str, lines: &[&str]| {
        std::fs::write(dir.path().join("pdfs").join(name), small_pdf(lines)).unwrap();
    };
    filing(
        "a.pdf",
        &[
            "Revenue grew by nine percent in the year.",
            "Capital expenditure was 1,577 million dollars.",
            "The board declared a quarterly dividend.",
        ],
    );
    filing(
        "b.pdf",
        &["Inventories rose after the acquisition of Acme."],
    );
    let path = write(
        dir.path(),
        "fb.jsonl",
        &[
            r#"{"type":"document","id":"a","group":"a","path":"pdfs/a.pdf"}"#,
            r#"{"type":"document","id":"b","group":"b","path":"pdfs/b.pdf","format":"pdf"}"#,
            r#"{"type":"question","id":"q1","group":"a","question":"What was capital expenditure?","evidence":[{"doc":"a","text":"Capital expenditure was 1,577 million dollars.","page":1}]}"#,
            r#"{"type":"question","id":"q2","group":"b","question":"Why did inventories rise?","evidence":[{"doc":"b","text":"Inventories rose after the acquisition of Acme.","page":1}]}"#,
        ],
    );
    let dataset = Dataset::load(&path).unwrap();
    let methods = eval::default_methods_for(&dataset);
    assert!(methods.iter().any(|m| m.name == "bm25-page"));
    assert!(
        !eval::default_methods()
            .iter()
            .any(|m| m.name == "bm25-page")
    );
    let kept = tempfile::tempdir().unwrap();
    let options = EvalOptions {
        methods,
        budgets: vec![8, 256],
        stores: Some(kept.path().to_owned()),
        ..EvalOptions::default()
    };
    let run = || eval::evaluate(&dataset, &options, &NoProgress, &CancelToken::new()).unwrap();
    let observations = run();
    let recall = |method: &str, question: &str, budget: u64| {
        observations
            .iter()
            .find(|o| o.method == method && o.question == question && o.budget == budget)
            .unwrap()
            .recall
    };
    for question in ["q1", "q2"] {
        assert_eq!(recall("edudb", question, 256), 1.0, "{question}");
        assert_eq!(recall("bm25-page", question, 256), 1.0, "{question}");
    }
    // Eight tokens hold part of the capital-expenditure line at most.
    assert!(recall("edudb", "q1", 8) < 1.0);
    for o in &observations {
        assert!(o.tokens <= o.budget, "{o:?}");
    }
    // The kept stores hold the same PDFs: reused untouched.
    let last_change = |group: usize| {
        let db = Db::open(kept.path().join(format!("fb-{group}")).join("store")).unwrap();
        db.stats().unwrap().last_change
    };
    let before = (last_change(0), last_change(1));
    let again = run();
    assert_eq!((last_change(0), last_change(1)), before);
    let pairs = |list: &[Observation]| {
        list.iter()
            .map(|o| (o.question.clone(), o.method.clone(), o.budget, o.recall))
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs(&again), pairs(&observations));
    // Another PDF under the same name is ingested again.
    filing("a.pdf", &["Capital expenditure was 1,577 million dollars."]);
    run();
    assert_ne!(last_change(0), before.0);
    assert_eq!(last_change(1), before.1);
}

fn observation(method: &str, structured: bool, question: usize, recall: f64) -> Observation {
    Observation {
        dataset: "d".into(),
        question: question.to_string(),
        method: method.into(),
        structured,
        budget: 128,
        recall,
        precision: recall / 2.0,
        tokens: 100,
        latency_ms: 1.0,
    }
}

#[test]
fn summaries_have_seeded_intervals_around_the_mean_and_pair_with_the_best_baseline() {
    let mut observations = Vec::new();
    for q in 0..40 {
        let r = (q % 5) as f64 / 4.0;
        observations.push(observation("ours", true, q, r));
        observations.push(observation("weak", false, q, r / 4.0));
        observations.push(observation("strong", false, q, (r - 0.25).max(0.0)));
        observations.push(observation("constant", false, q, 0.2));
    }
    let summary = score::summarise(&observations, 500, 7);
    assert_eq!(summary, score::summarise(&observations, 500, 7));
    assert_eq!(summary.cells.len(), 4);
    for cell in &summary.cells {
        assert!(cell.recall.low <= cell.recall.mean && cell.recall.mean <= cell.recall.high);
        assert_eq!(cell.questions, 40);
        assert_eq!(cell.tokens.low, 100.0);
        assert_eq!(cell.tokens.high, 100.0);
    }
    let ours = &summary.cells[0];
    assert_eq!(ours.recall.mean, 0.5);
    assert!(ours.recall.low < 0.5 && ours.recall.high > 0.5);
    let constant = summary
        .cells
        .iter()
        .find(|c| c.method == "constant")
        .unwrap();
    assert!(
        (constant.recall.low - 0.2).abs() < 1e-12 && (constant.recall.high - 0.2).abs() < 1e-12
    );
    assert_eq!(summary.comparisons.len(), 1);
    let comparison = &summary.comparisons[0];
    assert_eq!(comparison.baseline, "strong");
    let difference = comparison.recall_difference;
    assert!(
        difference.mean > 0.0 && difference.low > 0.0,
        "{difference:?}"
    );
}

fn corpus_documents() -> Vec<edudb::Document> {
    std::fs::read_dir(demo_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            doc(
                &p.file_stem().unwrap().to_string_lossy(),
                &std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn chunks_tile_each_document_and_selection_keeps_the_budget() {
    let docs = corpus_documents();
    for max in [None, Some(1), Some(100), Some(300)] {
        let units = flat::units(&docs, max);
        for (index, doc) in docs.iter().enumerate() {
            let own: Vec<_> = units.iter().filter(|u| u.doc == index).collect();
            assert_eq!(own[0].first, 0);
            assert_eq!(own.last().unwrap().last as usize, doc.edus.len() - 1);
            for pair in own.windows(2) {
                assert_eq!(pair[0].last + 1, pair[1].first);
            }
            for unit in &own {
                let tokens: u64 = doc.edus[unit.first as usize..=unit.last as usize]
                    .iter()
                    .map(|e| u64::from(e.tokens))
                    .sum();
                assert_eq!(tokens, unit.tokens);
                let limit = max.map_or(0, u64::from);
                assert!(unit.tokens <= limit || unit.first == unit.last, "{unit:?}");
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let embedder = edudb::compute::embed::EmbedderConfig::default()
        .build()
        .unwrap();
    for (i, baseline) in [
        Baseline::Bm25Chunks(100),
        Baseline::VectorChunks(200),
        Baseline::Bm25Edus,
        Baseline::Truncate,
    ]
    .into_iter()
    .enumerate()
    {
        let index = flat::FlatIndex::build(
            baseline,
            &docs,
            &dir.path().join(i.to_string()),
            embedder.as_ref(),
        )
        .unwrap();
        let ranked = index
            .rank(
                "unsafe block in an unsafe fn",
                500,
                embedder.as_ref(),
                &docs,
            )
            .unwrap();
        assert!(!ranked.is_empty(), "{baseline:?}");
        for budget in [1, 50, 128, 1024] {
            let picks = index.select(&ranked, budget);
            assert!(picks.iter().map(|u| u.tokens).sum::<u64>() <= budget);
        }
        if baseline == Baseline::Truncate {
            let picks = index.select(&ranked, 300);
            assert_eq!(
                picks.len(),
                ranked
                    .iter()
                    .scan(0, |sum, u| {
                        *sum += u.tokens;
                        Some(*sum)
                    })
                    .take_while(|s| *s <= 300)
                    .count()
            );
        } else {
            // The best unit is on topic.
            let best = ranked[0];
            assert_eq!(
                docs[best.doc].meta.id, "2585-unsafe-block-in-unsafe-fn",
                "{baseline:?}"
            );
        }
    }
}

#[test]
fn evaluation_runs_every_method_within_budget_on_per_question_stores() {
    let data = shared_data().join("hotpotqa");
    let questions = data.join("hipporag_hotpotqa_train100.json");
    let records: Vec<(usize, Record)> = convert::hotpotqa(&questions, None, Setting::PerQuestion)
        .unwrap()
        .into_iter()
        .take(12) // six questions, each with its document
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect();
    let dataset = Dataset::from_records("hotpot-six", &questions, records).unwrap();
    assert_eq!(dataset.questions.len(), 6);
    let options = EvalOptions {
        budgets: vec![64, 512],
        ..EvalOptions::default()
    };
    let observations =
        eval::evaluate(&dataset, &options, &NoProgress, &CancelToken::new()).unwrap();
    assert_eq!(observations.len(), 6 * options.methods.len() * 2);
    for o in &observations {
        assert!(o.tokens <= o.budget, "{o:?}");
        assert!((0.0..=1.0).contains(&o.recall) && (0.0..=1.0).contains(&o.precision));
    }
    let mean = |method: &str, budget: u64| {
        let list: Vec<f64> = observations
            .iter()
            .filter(|o| o.method == method && o.budget == budget)
            .map(|o| o.recall)
            .collect();
        list.iter().sum::<f64>() / list.len() as f64
    };
    // Retrieval finds evidence that the first tokens alone do not cover.
    assert!(mean("edudb", 512) > 0.5, "{}", mean("edudb", 512));
    assert!(mean("edudb", 512) >= mean("truncate", 512));
    let summary = eval::summarise(&observations, 200, 1);
    assert_eq!(summary.cells.len(), options.methods.len() * 2);
    // One comparison per structured (edudb) method and budget.
    let structured = options
        .methods
        .iter()
        .filter(|m| m.name.starts_with("edudb"))
        .count();
    assert_eq!(structured, 3);
    assert_eq!(summary.comparisons.len(), structured * 2);
}

#[test]
fn evaluation_keeps_its_stores_and_reuses_those_holding_the_group() {
    let data = shared_data().join("hotpotqa");
    let questions = data.join("hipporag_hotpotqa_train100.json");
    let records: Vec<(usize, Record)> = convert::hotpotqa(&questions, None, Setting::PerQuestion)
        .unwrap()
        .into_iter()
        .take(4) // two questions, each with its document
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect();
    let dataset = Dataset::from_records("hotpot-two", &questions, records).unwrap();
    let kept = tempfile::tempdir().unwrap();
    let options = EvalOptions {
        methods: vec![Method::query(
            "edudb",
            "SELECT SPANS FROM * SEED BM25($question) PROPAGATE BUDGET $budget TOKENS",
        )],
        budgets: vec![128],
        stores: Some(kept.path().to_owned()),
        ..EvalOptions::default()
    };
    let run_on = |dataset: &Dataset| {
        let observations =
            eval::evaluate(dataset, &options, &NoProgress, &CancelToken::new()).unwrap();
        observations
            .iter()
            .map(|o| (o.question.clone(), o.recall, o.tokens))
            .collect::<Vec<_>>()
    };
    let run = || run_on(&dataset);
    let store = |group: usize| {
        kept.path()
            .join(format!("hotpot-two-{group}"))
            .join("store")
    };
    let state = |group: usize| {
        let db = Db::open(store(group)).unwrap();
        let ids: Vec<String> = db.documents().unwrap().into_iter().map(|m| m.id).collect();
        (ids, db.stats().unwrap().last_change)
    };
    let first = run();
    let before = [state(0), state(1)];
    assert_eq!(before[0].0.len(), 1, "one document per question");
    // A second run reuses both stores untouched and scores the same.
    assert_eq!(run(), first);
    assert_eq!([state(0), state(1)], before);
    // A kept store holding anything else is brought back to its group.
    {
        let db = Db::open(store(1)).unwrap();
        ingest_markdown(&db, "stray", "# Stray\n\nNot part of the data set.\n");
    }
    assert_eq!(run(), first);
    assert_eq!(state(1).0, before[1].0);
    // The same ids and lengths with another text: rebuilt, not reused.
    let mut changed = dataset.clone();
    let edudb::eval::dataset::Body::Text { text, .. } = &mut changed.documents[0].body else {
        panic!("a text document");
    };
    let at = text.find('a').unwrap();
    text.replace_range(at..at + 1, "e");
    // Per question, the first document is the first group's.
    let last_change = state(0).1;
    run_on(&changed);
    assert_ne!(state(0).1, last_change);
    let db = Db::open(store(0)).unwrap();
    let stored = db.document(&changed.documents[0].id).unwrap();
    assert_eq!(Some(stored.text.as_str()), changed.documents[0].text());
}

#[test]
fn evaluation_refuses_bad_options_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "one.jsonl",
        &[
            r#"{"type":"document","id":"d","text":"Alpha beta gamma."}"#,
            r#"{"type":"question","id":"q","question":"alpha","evidence":[{"doc":"d","bytes":[0,17]}]}"#,
        ],
    );
    let dataset = Dataset::load(&path).unwrap();
    let run = |methods: Vec<Method>, budgets: Vec<u64>| {
        eval::evaluate(
            &dataset,
            &EvalOptions {
                methods,
                budgets,
                ..EvalOptions::default()
            },
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap_err()
        .to_string()
    };
    let ok = || {
        vec![Method::query(
            "q",
            "SELECT FROM * SEED BM25($question) BUDGET $budget TOKENS",
        )]
    };
    assert!(run(ok(), vec![0]).contains("positive"));
    assert!(
        run(vec![Method::query("q", "SELECT FROM * LIMIT 3")], vec![10])
            .contains("does not use $question")
    );
    assert!(
        run(
            vec![Method::query("q", "SELEKT $question $budget")],
            vec![10]
        )
        .contains("line 1, column 1")
    );
    let mut twice = ok();
    twice.extend(ok());
    assert!(run(twice, vec![10]).contains("named twice"));
    let cancel = CancelToken::new();
    cancel.cancel();
    let err = eval::evaluate(&dataset, &EvalOptions::default(), &NoProgress, &cancel).unwrap_err();
    assert!(matches!(err, Error::Cancelled));
}

fn outline() -> impl Strategy<Value = OutlineTree> {
    let leaf = "[ab]".prop_map(|label| OutlineTree {
        label,
        children: vec![],
    });
    leaf.prop_recursive(3, 8, 3, |inner| {
        ("[ab]", prop::collection::vec(inner, 0..3))
            .prop_map(|(label, children)| OutlineTree { label, children })
    })
}

/// The textbook recursion on forests (rightmost roots), exponential but
/// obviously right: the oracle for Zhang–Shasha.
fn forest_distance(a: &[OutlineTree], b: &[OutlineTree], relabel: usize) -> usize {
    let size = |f: &[OutlineTree]| f.iter().map(OutlineTree::size).sum::<usize>();
    match (a.split_last(), b.split_last()) {
        (None, _) => size(b),
        (_, None) => size(a),
        (Some((v, rest_a)), Some((w, rest_b))) => {
            let without_v = [rest_a, &v.children[..]].concat();
            let without_w = [rest_b, &w.children[..]].concat();
            let delete = forest_distance(&without_v, b, relabel) + 1;
            let insert = forest_distance(a, &without_w, relabel) + 1;
            let cost = if v.label == w.label { 0 } else { relabel };
            let matched = forest_distance(&v.children, &w.children, relabel)
                + forest_distance(rest_a, rest_b, relabel)
                + cost;
            delete.min(insert).min(matched)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn zhang_shasha_equals_the_recursive_definition(a in outline(), b in outline(), relabel in 0usize..2) {
        let expected = forest_distance(std::slice::from_ref(&a), std::slice::from_ref(&b), relabel);
        prop_assert_eq!(tree_edit_distance(&a, &b, relabel), expected);
        prop_assert_eq!(tree_edit_distance(&a, &a, relabel), 0);
        prop_assert_eq!(tree_edit_distance(&b, &a, relabel), expected);
    }
}

/// `eval memory` on a small LoCoMo-format conversation: the question's
/// evidence is an old turn and its reply, buried under later sessions.
#[test]
fn memory_eval_scores_each_method_per_category_on_a_locomo_conversation() {
    use edudb::eval::memory::{self, METHODS};
    let dir = tempfile::tempdir().unwrap();
    let mut later: Vec<serde_json::Value> = Vec::new();
    for n in 0..40 {
        later.push(serde_json::json!({
            "speaker": if n % 2 == 0 { "Sam" } else { "Evan" },
            "dia_id": format!("D2:{}", n + 1),
            "text": format!("Session two, turn {n}: the weather and the garden again."),
        }));
    }
    let conversation = serde_json::json!({
        "speaker_a": "Sam",
        "speaker_b": "Evan",
        "session_1_date_time": "1:47 pm on 18 May, 2023",
        "session_1": [
            {"speaker": "Sam", "dia_id": "D1:1", "text": "I just bought a blue Prius for the family."},
            {"speaker": "Evan", "dia_id": "D1:2", "text": "Nice! Is it comfortable on long drives?",
             "blip_caption": "a photo of a car on a mountain road"},
        ],
        "session_2_date_time": "10:04 am on 19 October, 2023",
        "session_2": later,
        "qa": [
            {"question": "What car did Sam buy?", "answer": "Prius", "evidence": ["D1:1", "D1:2"], "category": 4},
            {"question": "No evidence named here.", "answer": "x", "evidence": ["D9:9"], "category": 1},
        ],
    });
    let path = dir.path().join("conv.json");
    std::fs::write(&path, conversation.to_string()).unwrap();
    let loaded = memory::load_locomo(&path).unwrap();
    assert_eq!(loaded.turns.len(), 42);
    assert_eq!(
        loaded.turns[1].text,
        "Evan: Nice! Is it comfortable on long drives? [shares a photo of a car on a mountain road]"
    );
    assert_eq!(loaded.turns[1].role, edudb::Role::Assistant);
    assert_eq!(loaded.turns[0].at, Some(1_684_417_620));
    assert_eq!((loaded.questions.len(), loaded.unknown_evidence), (1, 1));
    assert_eq!(loaded.questions[0].evidence, [0, 1]);
    let (observations, times) = memory::evaluate_memory(
        std::slice::from_ref(&loaded),
        &[128, 256],
        &edudb::OpenOptions::default(),
        None,
        &NoProgress,
        &CancelToken::new(),
    )
    .unwrap();
    let loading = &times.conversations[0];
    assert_eq!((loading.turns, loading.dated_sessions), (42, 2));
    assert!(loading.seconds.is_some(), "a fresh store is loaded");
    assert!(
        loading.topics >= 1 && loading.branches >= loading.topics,
        "{loading:?}"
    );
    // Every method at every budget, under the category and under "all".
    assert_eq!(observations.len(), METHODS.len() * 2 * 2);
    let recall = |method: &str, budget: u64| {
        observations
            .iter()
            .find(|o| o.method == method && o.budget == budget && o.dataset == "single-hop")
            .unwrap()
            .recall
    };
    assert_eq!(recall("context+query", 128), 1.0);
    assert_eq!(recall("recency", 256), 0.0);
    assert!(
        recall("context", 128) < 1.0,
        "without the question, the old turns are not all there"
    );
    assert!(observations.iter().all(|o| o.tokens <= o.budget));
    // Kept stores are built once and reused, giving the same observations.
    let kept = dir.path().join("stores");
    let run = || {
        memory::evaluate_memory(
            std::slice::from_ref(&loaded),
            &[128],
            &edudb::OpenOptions::default(),
            Some(&kept),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap()
    };
    let (first, built) = run();
    let (second, reused) = run();
    assert!(built.conversations[0].seconds.is_some() && reused.conversations[0].seconds.is_none());
    let recalls = |o: &[Observation]| o.iter().map(|o| o.recall).collect::<Vec<_>>();
    assert_eq!(recalls(&first), recalls(&second));
    // A kept store with a forgotten turn is loaded afresh, not reused.
    let store = std::fs::read_dir(&kept)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let db = edudb::Db::open(store.join("store")).unwrap();
    let session = db.sessions().unwrap()[0].id.clone();
    db.forget_turn(&session, 0).unwrap();
    drop(db);
    let (third, reloaded) = run();
    assert!(reloaded.conversations[0].seconds.is_some());
    assert_eq!(recalls(&first), recalls(&third));
    let err = memory::load_locomo(&dir.path().join("missing.json")).unwrap_err();
    assert!(err.to_string().contains("missing.json"), "{err}");
}
