//! Query latency over a store of more than 100,000 EDUs (the Rust RFCs plus
//! the 2WikiMultihopQA passages, 50 passages per Markdown document with a
//! heading each): a typical SEED+BUDGET query, a TRAVERSE query and a
//! PROPAGATE query (down the weighted DAG), against
//! a plain tantivy BM25 top-10 (with the hits' stored text) over the same
//! EDU texts in the same run. The medians are printed as ratios to tantivy.
//! The edudb queries run with the document cache warm (a service asking many
//! questions of one store), and once more with the cache off. The seed
//! query also runs filtered by a metadata condition that keeps a tenth of
//! the documents (`WHERE meta.shard = 3`), and by one that keeps a
//! hundredth (`WHERE meta.slice = 7`), their medians printed as ratios to
//! the unfiltered one. The seed and PROPAGATE queries also run on a shard
//! set of four stores holding the same documents (the fan-out and merge
//! over its stores), printed as ratios to the same queries on one store.
//!
//! `cargo bench --bench query` (add `-- --quick` for a short run).

mod common;

use std::cell::Cell;
use std::time::SystemTime;

use criterion::Criterion;
use edudb::{Db, OpenOptions, Params, ShardSet};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{IndexRecordOption, STORED, Schema, TextFieldIndexing, TextOptions};
use tantivy::{Index, IndexReader, TantivyDocument};

const GROUP: &str = "query";
const MIN_EDUS: u64 = 100_000;

/// Questions mixing the two corpora's vocabulary; each iteration takes the next.
const QUESTIONS: &[&str] = &[
    "borrow checker lifetimes of temporaries",
    "trait objects and dynamic dispatch",
    "who was the queen of Lotharingia",
    "unsafe blocks inside unsafe functions",
    "which film was directed by the younger director",
    "macro hygiene and expansion order",
    "where was the bishop born",
    "default type parameters for generic structs",
    "the football club founded in the city",
    "error handling with the question mark operator",
];

fn build_store(dir: &std::path::Path) -> Db {
    let (db, report) = common::markdown_store(dir, common::wiki2_documents());
    let edus = db.stats().unwrap().edus;
    assert!(edus >= MIN_EDUS, "store has {edus} EDUs");
    println!(
        "query bench store: {} documents, {edus} EDUs",
        report.documents.len()
    );
    db
}

/// The baseline: one tantivy document per EDU text (the same text edudb
/// ranks), same stemming tokenizer, text stored.
fn tantivy_index(db: &Db, dir: &std::path::Path) -> (Index, IndexReader) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let field = builder.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(indexing) | STORED,
    );
    let path = dir.join("tantivy");
    std::fs::create_dir_all(&path).unwrap();
    let index = Index::create_in_dir(&path, builder.build()).unwrap();
    let mut writer = index.writer::<TantivyDocument>(128 * 1024 * 1024).unwrap();
    for meta in db.documents().unwrap() {
        for edu in db.edus(&meta.id, None).unwrap() {
            let mut doc = TantivyDocument::default();
            doc.add_text(field, &edu.text);
            writer.add_document(doc).unwrap();
        }
    }
    writer.commit().unwrap();
    writer.wait_merging_threads().unwrap();
    let reader = index.reader().unwrap();
    (index, reader)
}

fn next_question(counter: &Cell<usize>) -> &'static str {
    let i = counter.get();
    counter.set(i + 1);
    QUESTIONS[i % QUESTIONS.len()]
}

/// A shard set of `SHARDS` stores holding the same documents as the
/// bench's store.
const SHARDS: usize = 4;

fn build_shard_set(dir: &std::path::Path) -> ShardSet {
    let set = ShardSet::create(dir.join("shards"), SHARDS, &OpenOptions::default()).unwrap();
    let mut sources =
        edudb::ingest::sources::expand(&[common::shared_data().join("rust_rfcs/text")], None)
            .unwrap();
    sources.extend(common::wiki2_documents());
    let markdown = edudb::IngestOptions {
        format: Some(edudb::Format::Markdown),
        ..edudb::IngestOptions::default()
    };
    set.ingest(
        &sources,
        markdown,
        &edudb::NoProgress,
        &edudb::CancelToken::new(),
    )
    .unwrap();
    set
}

fn bench_query(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let db = build_store(dir.path());
    let set = build_shard_set(dir.path());
    let (index, reader) = tantivy_index(&db, dir.path());
    let field = index.schema().get_field("text").unwrap();
    let parser = QueryParser::for_index(&index, vec![field]);
    let seed_budget = db
        .prepare("SELECT FROM * SEED BM25($q) BUDGET 512 TOKENS")
        .unwrap();
    let traverse = db
        .prepare("SELECT FROM * SEED BM25($q) TRAVERSE BUDGET 512 TOKENS")
        .unwrap();
    let propagate = db
        .prepare("SELECT FROM * SEED BM25($q) PROPAGATE BUDGET 512 TOKENS")
        .unwrap();
    // Every tenth document in shard 3, every hundredth in slice 7:
    // filters that keep a tenth and a hundredth.
    for (i, meta) in db.documents().unwrap().iter().enumerate() {
        let keys = [
            (
                "shard".to_owned(),
                edudb::MetaValue::Number((i % 10) as f64),
            ),
            (
                "slice".to_owned(),
                edudb::MetaValue::Number((i % 100) as f64),
            ),
        ];
        db.update_metadata(&meta.id, &keys, &[]).unwrap();
    }
    let filtered = db
        .prepare("SELECT FROM * WHERE meta.shard = 3 SEED BM25($q) BUDGET 512 TOKENS")
        .unwrap();
    let filtered_narrow = db
        .prepare("SELECT FROM * WHERE meta.slice = 7 SEED BM25($q) BUDGET 512 TOKENS")
        .unwrap();
    // Without the step across documents: what naming sections costs.
    let propagate_within = db
        .prepare("SELECT FROM * SEED BM25($q) PROPAGATE ACROSS 0 BUDGET 512 TOKENS")
        .unwrap();

    let mut group = c.benchmark_group(GROUP);
    let counter = Cell::new(0);
    group.bench_function("tantivy_top10", |b| {
        b.iter(|| {
            let (query, _) = parser.parse_query_lenient(next_question(&counter));
            let searcher = reader.searcher();
            let top = searcher
                .search(&query, &TopDocs::with_limit(10).order_by_score())
                .unwrap();
            top.iter()
                .map(|(_, address)| searcher.doc::<TantivyDocument>(*address).unwrap())
                .collect::<Vec<_>>()
        })
    });
    for (name, statement) in [
        ("seed_budget_512", &seed_budget),
        ("seed_budget_512_filtered_tenth", &filtered),
        ("seed_budget_512_filtered_hundredth", &filtered_narrow),
        ("traverse_budget_512", &traverse),
        ("propagate_budget_512", &propagate),
        ("propagate_within_budget_512", &propagate_within),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let params = Params::new().text("q", next_question(&counter));
                db.run(statement, &params).unwrap()
            })
        });
    }
    for (name, statement) in [
        ("seed_budget_512_four_shards", &seed_budget),
        ("propagate_budget_512_four_shards", &propagate),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let params = Params::new().text("q", next_question(&counter));
                set.run(statement, &params).unwrap()
            })
        });
    }
    // The same query with every document decoded afresh: the first query
    // that touches a document, or a store much larger than the cache.
    db.set_document_cache_bytes(0);
    group.bench_function("seed_budget_512_uncached", |b| {
        b.iter(|| {
            let params = Params::new().text("q", next_question(&counter));
            db.run(&seed_budget, &params).unwrap()
        })
    });
    group.finish();
}

fn main() {
    let run_started = SystemTime::now();
    let mut criterion = common::criterion();
    bench_query(&mut criterion);
    criterion.final_summary();
    common::print_ratios(
        GROUP,
        "tantivy_top10",
        &[
            "seed_budget_512",
            "traverse_budget_512",
            "propagate_budget_512",
            "propagate_within_budget_512",
            "seed_budget_512_uncached",
        ],
        run_started,
    );
    common::print_ratios(
        GROUP,
        "seed_budget_512",
        &[
            "seed_budget_512_filtered_tenth",
            "seed_budget_512_filtered_hundredth",
            "seed_budget_512_four_shards",
        ],
        run_started,
    );
    common::print_ratios(
        GROUP,
        "propagate_budget_512",
        &["propagate_budget_512_four_shards"],
        run_started,
    );
}
