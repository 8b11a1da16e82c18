//! Ingest throughput on the Rust RFC corpus: edudb's whole pipeline (decode,
//! layout, EDUs, tokens, tree, vectors, DAG, sled batch, tantivy), its
//! full-text entries alone and its analysis alone, against indexing the
//! same files into tantivy alone. After criterion, the
//! medians are printed as ratios to the tantivy baseline of the same run.
//!
//! `cargo bench --bench ingest` (add `-- --quick` for a short run).

mod common;

use std::path::PathBuf;
use std::time::SystemTime;

use criterion::{BatchSize, Criterion, Throughput};
use edudb::{CancelToken, Db, IngestOptions, NoProgress, Source};
use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::{Index, TantivyDocument};

/// Files taken from the corpus, in name order: enough text for stable
/// timings, few enough that one iteration stays well under a second.
const FILES: usize = 60;
const GROUP: &str = "ingest";

fn corpus() -> Vec<Source> {
    let dir = common::shared_data().join("rust_rfcs/text");
    let mut sources =
        edudb::ingest::sources::expand(&[dir], None).expect("RFC corpus in ../shared/data");
    sources.sort_by(|a, b| a.id.cmp(&b.id));
    sources.truncate(FILES);
    sources
}

fn edudb_full(sources: &[Source]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::create(dir.path().join("store")).unwrap();
    let report = db
        .ingest(
            sources,
            IngestOptions::default(),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(report.documents.len(), sources.len());
    dir
}

fn edudb_analysis(texts: &[(String, String, PathBuf)]) -> usize {
    texts
        .iter()
        .map(|(id, text, path)| {
            let format = edudb::ingest::detect_format(Some(path), text);
            edudb::ingest::analyze(id, text.clone(), format)
                .unwrap()
                .edus
                .len()
        })
        .sum()
}

/// edudb's full-text work alone: the entries `Db::ingest` makes for the
/// analysed documents (one per EDU, one per tree node), one commit. The
/// analysis is done before timing; this bounds what a whole ingest can
/// reach against the baseline.
fn edudb_fulltext_entries(docs: &[edudb::model::document::Document]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut index = edudb::storage::fulltext::FullText::open(dir.path()).unwrap();
    for doc in docs {
        index.replace(doc).unwrap();
    }
    index.commit(1).unwrap();
    dir
}

/// The baseline: one tantivy document per file, the same English stemming
/// tokenizer edudb uses, one commit.
fn tantivy_alone(texts: &[(String, String, PathBuf)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let text_field = builder.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(indexing),
    );
    let index = Index::create_in_dir(dir.path(), builder.build()).unwrap();
    let mut writer = index.writer::<TantivyDocument>(64 * 1024 * 1024).unwrap();
    for (_, text, _) in texts {
        let mut doc = TantivyDocument::default();
        doc.add_text(text_field, text);
        writer.add_document(doc).unwrap();
    }
    writer.commit().unwrap();
    writer.wait_merging_threads().unwrap();
    dir
}

fn bench_ingest(c: &mut Criterion) {
    let sources = corpus();
    let texts: Vec<(String, String, PathBuf)> = sources
        .iter()
        .map(|source| {
            let bytes = source.read().unwrap();
            let path = source.path().unwrap().to_owned();
            (source.id.clone(), String::from_utf8(bytes).unwrap(), path)
        })
        .collect();
    let bytes: usize = texts.iter().map(|(_, text, _)| text.len()).sum();
    let analysed: Vec<_> = texts
        .iter()
        .map(|(id, text, path)| {
            let format = edudb::ingest::detect_format(Some(path), text);
            edudb::ingest::analyze(id, text.clone(), format).unwrap()
        })
        .collect();

    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    group.bench_function("tantivy_alone", |b| {
        b.iter_batched(|| (), |()| tantivy_alone(&texts), BatchSize::PerIteration)
    });
    group.bench_function("edudb_full", |b| {
        b.iter_batched(|| (), |()| edudb_full(&sources), BatchSize::PerIteration)
    });
    group.bench_function("edudb_fulltext_entries", |b| {
        b.iter_batched(
            || (),
            |()| edudb_fulltext_entries(&analysed),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("edudb_analysis_1_thread", |b| {
        b.iter(|| edudb_analysis(&texts))
    });
    group.finish();
}

fn main() {
    let run_started = SystemTime::now();
    let mut criterion = common::criterion();
    bench_ingest(&mut criterion);
    criterion.final_summary();
    common::print_ratios(
        GROUP,
        "tantivy_alone",
        &[
            "edudb_full",
            "edudb_fulltext_entries",
            "edudb_analysis_1_thread",
        ],
        run_started,
    );
}
