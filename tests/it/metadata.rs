//! Document metadata: given at ingest, changed in place, listed by
//! `documents_where`, and filtering queries before their seed ranks.

use std::collections::BTreeMap;

use edudb::serve::{Api, Client, ServeOptions};
use edudb::{CancelToken, Db, Error, IngestOptions, MetaValue, Metadata, NoProgress, Rows};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::{edudb, markdown, rfc_sources, selection, stderr, store, text};

fn metadata(json: Value) -> Metadata {
    Metadata::from_json(&json).unwrap()
}

/// Ingests `text` as document `id` with `given` metadata.
fn ingest_with(db: &Db, id: &str, text: &str, given: Value) {
    let options = IngestOptions {
        metadata: metadata(given),
        ..markdown()
    };
    db.ingest_bytes(id, text.as_bytes().to_vec(), options)
        .unwrap();
}

/// A random metadata object: some keys missing, every type present.
fn random_metadata(rng: &mut StdRng) -> Value {
    let mut object = serde_json::Map::new();
    if rng.random_bool(0.9) {
        let company = ["Boeing", "Apple", "3M", "boeing"].choose(rng).unwrap();
        object.insert("company".into(), json!(company));
    }
    if rng.random_bool(0.8) {
        object.insert("year".into(), json!(rng.random_range(2015..2025)));
    }
    if rng.random_bool(0.5) {
        object.insert(
            "ratio".into(),
            json!(rng.random_range(-20..20) as f64 / 4.0),
        );
    }
    if rng.random_bool(0.7) {
        let day = rng.random_range(1..28);
        let filed = if rng.random_bool(0.5) {
            format!("2020-02-{day:02}")
        } else {
            format!("2020-02-{day:02}T23:30:00-02:00")
        };
        object.insert("filed".into(), json!(filed));
    }
    if rng.random_bool(0.6) {
        object.insert("audited".into(), json!(rng.random_bool(0.5)));
    }
    if rng.random_bool(0.6) {
        let tags: Vec<&str> = ["risk", "cash", "debt"]
            .into_iter()
            .filter(|_| rng.random_bool(0.5))
            .collect();
        object.insert("tags".into(), json!(tags));
    }
    Value::Object(object)
}

/// A random condition on the metadata [`random_metadata`] makes, and
/// whether a document of metadata `m` meets it (the oracle).
type Oracle = Box<dyn Fn(&Metadata) -> bool>;

fn random_condition(rng: &mut StdRng, depth: u32) -> (String, Oracle) {
    if depth < 2 && rng.random_bool(0.4) {
        let (a, meets_a) = random_condition(rng, depth + 1);
        let (b, meets_b) = random_condition(rng, depth + 1);
        return match rng.random_range(0..3) {
            0 => (
                format!("({a} AND {b})"),
                Box::new(move |m| meets_a(m) && meets_b(m)),
            ),
            1 => (
                format!("({a} OR {b})"),
                Box::new(move |m| meets_a(m) || meets_b(m)),
            ),
            _ => (format!("NOT ({a})"), Box::new(move |m| !meets_a(m))),
        };
    }
    let ops = ["=", "!=", "<", "<=", ">", ">="];
    let op = *ops.choose(rng).unwrap();
    let compare = move |ordering: std::cmp::Ordering| match op {
        "=" => ordering.is_eq(),
        "!=" => ordering.is_ne(),
        "<" => ordering.is_lt(),
        "<=" => ordering.is_le(),
        ">" => ordering.is_gt(),
        _ => ordering.is_ge(),
    };
    match rng.random_range(0..7) {
        0 => {
            let company = *["Boeing", "Apple", "3M"].choose(rng).unwrap();
            let text = format!("meta.company {op} '{company}'");
            (
                text,
                Box::new(move |m| match m.get("company") {
                    Some(MetaValue::Text(c)) => compare(c.as_bytes().cmp(company.as_bytes())),
                    _ => false,
                }),
            )
        }
        1 => {
            let year = rng.random_range(2014..2026);
            (
                format!("meta.year {op} {year}"),
                Box::new(move |m| match m.get("year") {
                    Some(MetaValue::Number(y)) => compare(y.total_cmp(&f64::from(year))),
                    _ => false,
                }),
            )
        }
        2 => {
            let ratio = rng.random_range(-12..12) as f64 / 2.0;
            (
                format!("meta.ratio {op} {ratio}"),
                Box::new(move |m| match m.get("ratio") {
                    Some(MetaValue::Number(r)) => compare(r.total_cmp(&ratio)),
                    _ => false,
                }),
            )
        }
        3 => {
            let day = rng.random_range(1..29);
            let at = edudb::model::time::parse(&format!("2020-02-{day:02}T12:00:00Z")).unwrap();
            let text = format!("meta.filed {op} '2020-02-{day:02}T13:00:00+01:00'");
            (
                text,
                Box::new(move |m| match m.get("filed") {
                    Some(MetaValue::Date { at: filed, .. }) => compare(filed.cmp(&at)),
                    _ => false,
                }),
            )
        }
        4 => {
            let tag = *["risk", "cash", "debt", "none"].choose(rng).unwrap();
            (
                format!("meta.tags CONTAINS '{tag}'"),
                Box::new(
                    move |m| matches!(m.get("tags"), Some(MetaValue::List(tags)) if tags.iter().any(|t| t == tag)),
                ),
            )
        }
        5 => {
            let key = *["company", "year", "tags", "audited", "missing"]
                .choose(rng)
                .unwrap();
            (
                format!("EXISTS meta.{key}"),
                Box::new(move |m| m.get(key).is_some()),
            )
        }
        _ => {
            let years: Vec<i32> = (0..rng.random_range(1..4))
                .map(|_| rng.random_range(2015..2025))
                .collect();
            let list = years
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let audited = rng.random_bool(0.5);
            let text = format!("(meta.year IN ({list}) OR meta.audited = {audited})");
            (
                text,
                Box::new(move |m| {
                    let year = matches!(m.get("year"), Some(MetaValue::Number(y)) if years.iter().any(|&v| f64::from(v) == *y));
                    year || m.get("audited") == Some(&MetaValue::Bool(audited))
                }),
            )
        }
    }
}

#[test]
fn documents_where_lists_exactly_the_documents_meeting_random_conditions() {
    let (_dir, db) = store();
    let mut rng = StdRng::seed_from_u64(49);
    let mut given = BTreeMap::new();
    for i in 0..40 {
        let id = format!("d{i:02}");
        let json = random_metadata(&mut rng);
        ingest_with(
            &db,
            &id,
            &format!("Document {i} tells of filings. It has two sentences."),
            json.clone(),
        );
        given.insert(id, metadata(json));
    }
    // Changed in place, and one removed: the index follows.
    let set = [("year".to_owned(), MetaValue::Number(2030.0))];
    let changed = db
        .update_metadata("d03", &set, &["tags".to_owned()])
        .unwrap();
    assert_eq!(changed.get("year"), Some(&MetaValue::Number(2030.0)));
    assert_eq!(changed.get("tags"), None);
    given.insert("d03".into(), changed);
    db.remove("d07").unwrap();
    given.remove("d07");
    assert_eq!(db.metadata("d03").unwrap(), given["d03"]);
    for _ in 0..200 {
        let (condition, meets) = random_condition(&mut rng, 0);
        let listed: Vec<String> = (db.documents_where(&condition).unwrap().into_iter())
            .map(|meta| meta.id)
            .collect();
        let expected: Vec<String> = (given.iter())
            .filter(|(_, m)| meets(m))
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(listed, expected, "{condition}");
    }
    assert!(db.check().unwrap().damaged.is_empty());
}

#[test]
fn a_metadata_filter_restricts_the_seed_so_the_budget_fills_from_matching_documents() {
    let (_dir, db) = store();
    let sources = rfc_sources(48);
    let (kept, others) = sources.split_at(4);
    for (group, sources) in [("kept", kept), ("other", others)] {
        let options = IngestOptions {
            metadata: metadata(json!({ "group": group })),
            ..IngestOptions::default()
        };
        let report = db.ingest(sources, options, &NoProgress, &CancelToken::new());
        assert!(report.unwrap().failures.is_empty());
    }
    let kept_ids: Vec<&str> = kept.iter().map(|s| s.id.as_str()).collect();
    let kept_tokens: u64 = (db.documents_where("meta.group = 'kept'").unwrap().iter())
        .map(|meta| meta.tokens)
        .sum();
    let budget = 600;
    let seed = "SEED BM25('the compiler must check types and traits')";
    // Unfiltered, the best text lies mostly elsewhere…
    let everywhere = selection(
        &db,
        &format!("SELECT SPANS FROM * {seed} BUDGET {budget} TOKENS"),
    );
    assert!(
        everywhere
            .items
            .iter()
            .any(|item| !kept_ids.contains(&item.doc.as_str()))
    );
    // …filtered, the seed ranks the kept documents only, and the budget
    // fills from them (a filter after the budget cut would starve it).
    let statement = format!(
        "EXPLAIN SELECT SPANS FROM * WHERE meta.group = 'kept' {seed} BUDGET {budget} TOKENS"
    );
    let result = db.query(&statement, &Default::default()).unwrap();
    let Rows::Selection(filtered) = &result.rows else {
        panic!("not a selection")
    };
    assert!(
        filtered
            .items
            .iter()
            .all(|item| kept_ids.contains(&item.doc.as_str()))
    );
    assert!(
        filtered.tokens_used * 10 >= budget.min(kept_tokens) * 9,
        "{} of {budget} tokens used ({kept_tokens} in the kept documents)",
        filtered.tokens_used
    );
    let seed_stage = result.stages.iter().find(|s| s.operator == "seed").unwrap();
    assert!(
        seed_stage
            .detail
            .ends_with("narrowed by WHERE to 4 documents"),
        "{seed_stage:?}"
    );
    let filter = result
        .stages
        .iter()
        .find(|s| s.operator == "filter")
        .unwrap();
    assert_eq!(
        filter.rows_in, filter.rows_out,
        "the seed held only matching documents"
    );
    // A condition on nodes beside it still filters candidates.
    let nodes = selection(
        &db,
        &format!("SELECT NODES FROM * WHERE meta.group = 'kept' AND level = 1 {seed} LIMIT 5"),
    );
    assert!(!nodes.items.is_empty());
    assert!(
        nodes
            .items
            .iter()
            .all(|item| item.level == 1 && kept_ids.contains(&item.doc.as_str()))
    );
    // OR with a condition on nodes cannot narrow the seed, and still holds.
    let either = selection(
        &db,
        &format!("SELECT NODES FROM * WHERE meta.group = 'kept' OR level = 0 {seed} LIMIT 40"),
    );
    assert!(
        either
            .items
            .iter()
            .all(|item| item.level == 0 || kept_ids.contains(&item.doc.as_str()))
    );
}

#[test]
fn bad_metadata_and_bad_conditions_are_refused_saying_where() {
    let (_dir, db) = store();
    ingest_with(&db, "a", "One sentence. Another.", json!({"year": 2020}));
    for (condition, at) in [
        ("meta.", "column 6"),
        ("meta.9lives = 1", "column 6"),
        ("meta.year BETWEEN 1 AND 'x'", "column 19"),
        ("meta.year = 1 AND level = 2", "column 27"),
        ("meta.year ~ 1", "column 11"),
        ("meta.year IN ()", "column 15"),
    ] {
        match db.documents_where(condition) {
            Err(Error::Query(error)) => {
                assert!(error.to_string().contains(at), "{condition}: {error}")
            }
            other => panic!("{condition}: {other:?}"),
        }
    }
    let options = IngestOptions {
        metadata: Metadata::default(),
        ..markdown()
    };
    db.ingest_bytes("b", b"Text.".to_vec(), options).unwrap();
    assert!(matches!(
        Metadata::from_json(&json!({"nested": {"a": 1}})),
        Err(Error::InvalidMetadata { key, .. }) if key == "nested"
    ));
    assert!(matches!(
        db.update_metadata("a", &[("bad key".into(), MetaValue::Bool(true))], &[]),
        Err(Error::InvalidMetadata { .. })
    ));
    assert_eq!(
        db.metadata("a").unwrap(),
        metadata(json!({"year": 2020})),
        "nothing half-changed"
    );
    assert!(matches!(db.metadata("zz"), Err(Error::NoSuchDocument(_))));
    assert!(matches!(
        db.update_metadata("zz", &[], &[]),
        Err(Error::NoSuchDocument(_))
    ));
}

#[test]
fn the_command_line_gives_lists_and_changes_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for name in ["a", "b", "c"] {
        std::fs::write(
            docs.join(format!("{name}.md")),
            format!("# {name}\n\nText of {name}.\n"),
        )
        .unwrap();
    }
    let meta_file = dir.path().join("meta.json");
    std::fs::write(&meta_file, r#"{"company": "Boeing", "year": 2019}"#).unwrap();
    let ingest = |file: &str, meta: &[&str]| {
        let mut args = vec![
            "ingest",
            "-q",
            file,
            "--meta-json",
            meta_file.to_str().unwrap(),
        ];
        for pair in meta {
            args.extend(["--meta", pair]);
        }
        let out = edudb(&db, &args);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let path = |name: &str| {
        docs.join(format!("{name}.md"))
            .to_string_lossy()
            .into_owned()
    };
    ingest(&path("a"), &[]);
    ingest(
        &path("b"),
        &["year=2021", r#"tags:=["risk","cash"]"#, "form=10-K"],
    );
    ingest(&path("c"), &["company=Apple", "filed=2021-03-01"]);
    let listed = |condition: &str| {
        let out = edudb(&db, &["docs", "--where", condition, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        rows.iter()
            .map(|row| row["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed("meta.company = 'Boeing' AND meta.year >= 2020"),
        ["b"]
    );
    assert_eq!(
        listed("meta.tags CONTAINS 'risk' OR meta.filed > '2021-01-01'"),
        ["b", "c"]
    );
    assert_eq!(listed("NOT EXISTS meta.form"), ["a", "c"]);
    let all: Vec<Value> = serde_json::from_slice(&edudb(&db, &["docs", "--json"]).stdout).unwrap();
    assert_eq!(
        all[1]["metadata"],
        json!({"company": "Boeing", "year": 2021, "tags": ["risk", "cash"], "form": "10-K"})
    );
    let text_listing = text(&edudb(&db, &["docs", "--where", "meta.year = 2019"]));
    assert!(
        text_listing.contains("a ") && !text_listing.contains("b "),
        "{text_listing}"
    );

    let out = edudb(
        &db,
        &["meta", "a", "set", "year=2022", "cik=0000320193", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let changed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        changed["metadata"],
        json!({"company": "Boeing", "year": 2022, "cik": "0000320193"})
    );
    assert!(edudb(&db, &["meta", "a", "unset", "cik"]).status.success());
    assert_eq!(listed("meta.year = 2022"), ["a"]);
    assert!(text(&edudb(&db, &["meta", "a"])).contains("year = 2022"));
    // Refusals exit 1 and say what.
    for args in [
        &["docs", "--where", "meta.year >"][..],
        &["meta", "a", "set", "year"],
        &["meta", "zz"],
        &["ingest", "-q", &path("a"), "--meta", "bad key=1"],
    ] {
        let out = edudb(&db, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: "),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(edudb(&db, &["check"]).status.success());
}

#[test]
fn a_served_store_takes_lists_and_changes_metadata_over_http() {
    let (_dir, path) = super::serve::fixture();
    let running = super::serve::start(&path, ServeOptions::default());
    let client = Client::connect(path.to_str().unwrap(), None).unwrap();
    let options = IngestOptions {
        metadata: metadata(json!({"company": "Boeing", "year": 2021})),
        ..markdown()
    };
    client
        .ingest_bytes("filing", b"# Filing\n\nRevenue grew.".to_vec(), options)
        .unwrap();
    let listed = client.documents(Some("meta.year >= 2020")).unwrap();
    assert_eq!(listed[0]["id"], "filing", "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["metadata"]["company"], "Boeing");
    let changed = client
        .update_metadata(
            "filing",
            &json!({"year": 2019, "tags": ["risk"]}),
            &["company".to_owned()],
        )
        .unwrap();
    assert_eq!(changed["metadata"], json!({"year": 2019, "tags": ["risk"]}));
    assert_eq!(client.metadata("filing").unwrap(), changed);
    assert_eq!(
        client.documents(Some("meta.year >= 2020")).unwrap(),
        json!([])
    );
    match client.documents(Some("meta.year >")) {
        Err(Error::Served { class, message, .. }) => {
            assert_eq!(class, "user");
            assert!(message.contains("column"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        client.update_metadata("filing", &json!({"bad key": 1}), &[]),
        Err(Error::Served { class, .. }) if class == "user"
    ));
    drop(running);
}

#[test]
fn a_source_s_own_metadata_is_kept_under_what_the_caller_gives() {
    let (_dir, db) = store();
    let options = |format: &str, given: Value| IngestOptions {
        format: Some(format.parse().unwrap()),
        metadata: metadata(given),
        ..IngestOptions::default()
    };
    let page = "<html><head><title>Moss care</title><meta name='author' content='A. Gardener'>\
                <meta name='keywords' content='moss, shade'></head><body><h1>Moss</h1>\
                <p>Keep moss damp and shaded.</p></body></html>";
    db.ingest_bytes("page", page.as_bytes().to_vec(), options("html", json!({})))
        .unwrap();
    let notes = "---\ntitle: Fern notes\nyear: 2021\ntags: [ferns, shade]\n---\n\n# Ferns\n\n\
                 Ferns like shade too.\n";
    db.ingest_bytes(
        "notes",
        notes.as_bytes().to_vec(),
        options("markdown", json!({"year": 2024, "source": "caller"})),
    )
    .unwrap();
    assert_eq!(
        db.metadata("page").unwrap().to_json(),
        json!({"title": "Moss care", "author": "A. Gardener", "keywords": ["moss", "shade"]})
    );
    // The caller's keys win; the front matter's others stay.
    assert_eq!(
        db.metadata("notes").unwrap().to_json(),
        json!({"title": "Fern notes", "year": 2024, "tags": ["ferns", "shade"], "source": "caller"})
    );
    // The front matter is kept in the stored text, and in no EDU.
    let stored = db.document("notes").unwrap();
    assert!(stored.text.starts_with("---\ntitle: Fern notes"));
    let edus = db.edus("notes", None).unwrap();
    assert!(edus.iter().all(|e| !e.text.contains("tags:")), "{edus:?}");
    let ids = |condition: &str| -> Vec<String> {
        (db.documents_where(condition).unwrap().into_iter())
            .map(|d| d.id)
            .collect()
    };
    assert_eq!(ids("meta.tags CONTAINS 'shade'"), ["notes"]);
    assert_eq!(ids("meta.keywords CONTAINS 'shade'"), ["page"]);
    assert_eq!(ids("meta.author = 'A. Gardener'"), ["page"]);
}

#[test]
fn a_pdf_s_information_dictionary_is_its_metadata() {
    let (_dir, db) = store();
    let release =
        crate::support::shared_data().join("financebench_dev/pdfs/AMCOR_2023Q4_EARNINGS.pdf");
    db.ingest_bytes(
        "release",
        std::fs::read(&release).unwrap(),
        IngestOptions::default(),
    )
    .unwrap();
    let read = db.metadata("release").unwrap();
    assert_eq!(
        read.get("title").map(MetaValue::to_json),
        Some(json!("Amcor 4Q 2023 Exhibit 99.1 - June 30, 2023"))
    );
    assert_eq!(
        read.get("author").map(MetaValue::to_json),
        Some(json!("anonymous"))
    );
    // The creation date is a date, in RFC 3339, so it compares as one.
    assert_eq!(
        read.get("created").map(MetaValue::to_json),
        Some(json!("2023-08-15T23:42:20Z"))
    );
    let ids = |condition: &str| -> Vec<String> {
        (db.documents_where(condition).unwrap().into_iter())
            .map(|d| d.id)
            .collect()
    };
    assert_eq!(
        ids("meta.created >= '2023-08-15' AND meta.created < '2023-08-16'"),
        ["release"]
    );
    assert!(ids("meta.created < '2023-01-01'").is_empty());
}
