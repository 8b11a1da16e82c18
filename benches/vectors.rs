//! The vector index over more than 100,000 vectors of the default dimension
//! (the EDUs of the Rust RFCs and the 2WikiMultihopQA and MuSiQue passages,
//! embedded by the built-in hashed embedder): embedding throughput, index
//! build time, and query time and recall@10 of the graph (at several search
//! efforts) against exact brute-force search over the same vectors, all in
//! one run: edudb's exact search (which reads the stored vectors through the
//! store) and a plain in-memory scan of the same texts' vectors, the
//! cheapest brute force there is. Ratios are printed at the end.
//!
//! `cargo bench --bench vectors` (add `-- --quick` for a short run).

mod common;

use std::time::{Instant, SystemTime};

use criterion::Throughput;
use edudb::compute::embed::Embedder;
use edudb::compute::embed::hashed::{DEFAULT_DIMENSION, HashedEmbedder};
use edudb::storage::vectors::EF_SEARCH;
use edudb::{Db, Target};

const GROUP: &str = "vectors";
const MIN_VECTORS: usize = 100_000;
/// Queries for recall: EDU texts spread over the store, cut to their first
/// half so no query is identical to an indexed text.
const RECALL_QUERIES: usize = 200;
const K: usize = 10;
/// Graph search efforts the recall curve is measured at.
const SEARCH_EFFORTS: [usize; 6] = [32, 64, 128, 256, 512, 1024];

fn build_store(dir: &std::path::Path) -> (Db, Vec<String>) {
    let mut passages = common::wiki2_documents();
    passages.extend(common::passage_documents(
        "musique/hipporag_musique_train100_corpus.json",
        "musique",
    ));
    let (db, _) = common::markdown_store(dir, passages);
    let mut texts = Vec::new();
    for meta in db.documents().unwrap() {
        texts.extend(db.edus(&meta.id, None).unwrap().into_iter().map(|e| e.text));
    }
    (db, texts)
}

fn main() {
    let run_started = SystemTime::now();
    let dir = tempfile::tempdir().unwrap();
    let (db, texts) = build_store(dir.path());

    // Build: ingest stores the vectors; the graph is built on first use.
    let started = Instant::now();
    let counts = db.vector_counts().unwrap();
    let build = started.elapsed();
    assert!(
        counts.edus >= MIN_VECTORS,
        "only {} EDU vectors",
        counts.edus
    );
    println!(
        "vectors: built the index over {} node and {} EDU vectors of dimension {DEFAULT_DIMENSION} in {:.1} s",
        counts.nodes,
        counts.edus,
        build.as_secs_f64()
    );

    // Recall@10 of the graph against brute force, on the EDU vectors, and
    // the mean graph query time, at several search efforts.
    let step = texts.len() / RECALL_QUERIES;
    let queries: Vec<&str> = (0..RECALL_QUERIES)
        .map(|i| common::half(&texts[i * step]))
        .collect();
    let key = |h: &edudb::RankedHit| (h.doc.clone(), h.span.first);
    let truths: Vec<Vec<_>> = queries
        .iter()
        .map(|q| {
            let truth = db.nearest(q, Target::Edus, K, true).unwrap();
            truth.iter().map(key).collect()
        })
        .collect();
    for effort in SEARCH_EFFORTS {
        db.set_vector_search_effort(effort).unwrap();
        let (mut found, mut wanted) = (0usize, 0usize);
        let started = Instant::now();
        for (query, truth) in queries.iter().zip(&truths) {
            let graph = db.nearest(query, Target::Edus, K, false).unwrap();
            let graph_keys: std::collections::HashSet<_> = graph.iter().map(key).collect();
            wanted += truth.len();
            found += truth.iter().filter(|k| graph_keys.contains(k)).count();
        }
        let mean = started.elapsed() / queries.len() as u32;
        println!(
            "vectors: search effort {effort:>4}: recall@{K} {:.3} over {} queries, {:.2} ms per query{}",
            found as f64 / wanted.max(1) as f64,
            queries.len(),
            mean.as_secs_f64() * 1e3,
            if effort == EF_SEARCH {
                " (default)"
            } else {
                ""
            }
        );
    }
    db.set_vector_search_effort(EF_SEARCH).unwrap();

    let mut c = common::criterion();
    let mut group = c.benchmark_group(GROUP);
    let embedder = HashedEmbedder::new(DEFAULT_DIMENSION).unwrap();
    let batch: Vec<&str> = texts.iter().take(1000).map(String::as_str).collect();
    group.throughput(Throughput::Bytes(
        batch.iter().map(|t| t.len() as u64).sum(),
    ));
    group.bench_function("embed_1000_edus", |b| {
        b.iter(|| embedder.embed(&batch).unwrap())
    });
    group.throughput(Throughput::Elements(1));
    let mut next = 0usize;
    let mut query = || {
        next += 1;
        queries[next % queries.len()]
    };
    group.bench_function("exact_top10", |b| {
        b.iter(|| db.nearest(query(), Target::Edus, K, true).unwrap())
    });
    group.bench_function("hnsw_top10", |b| {
        b.iter(|| db.nearest(query(), Target::Edus, K, false).unwrap())
    });
    // Brute force at its cheapest: every EDU text's vector in one flat
    // in-memory matrix, scanned per query (embedding the query included,
    // as in the two functions above).
    let all: Vec<&str> = texts.iter().map(String::as_str).collect();
    let matrix: Vec<f32> = embedder.embed(&all).unwrap().concat();
    println!(
        "vectors: in-memory brute force over {} vectors ({:.0} MiB)",
        all.len(),
        (matrix.len() * 4) as f64 / (1024.0 * 1024.0)
    );
    let mut scores = Vec::new();
    group.bench_function("brute_force_in_memory_top10", |b| {
        b.iter(|| {
            let q = embedder.embed(&[query()]).unwrap().pop().unwrap();
            common::flat_scan(&matrix, DEFAULT_DIMENSION, &q, K, &mut scores)
        })
    });
    group.finish();
    c.final_summary();
    common::print_ratios(GROUP, "exact_top10", &["hnsw_top10"], run_started);
    common::print_ratios(
        GROUP,
        "brute_force_in_memory_top10",
        &["hnsw_top10"],
        run_started,
    );
}
