//! The vector index's graph on real model vectors: the EDU texts of
//! `benches/vectors.rs` (the Rust RFCs and the 2WikiMultihopQA and MuSiQue
//! passages, more than 100,000 indexed EDUs) embedded by all-MiniLM-L6-v2
//! in-process, put into the graph the store's index uses (same hnsw_rs
//! settings and distance), and its recall@10 and query time against an
//! in-memory flat scan of the same vectors, in one run. Queries are EDU
//! texts spread over the corpus, cut to their first half, embedded before
//! timing: both sides get the same query vectors, so only search is timed.
//! (Node vectors are left out: embedding the nodes' longer representations
//! would triple the embedding time and they are not what is measured.)
//!
//! Embedding takes minutes on a CPU, so the vectors are cached once in
//! `~/.cache/edudb/bench/` (keyed by the model's identity); the first run
//! says how long the embedding took.
//!
//! Needs `EDUDB_LOCAL_MODEL` (`.ci/embedding-server model-dir`).
//! `cargo bench --bench vectors_model` (add `-- --quick` for a short run).

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use edudb::compute::embed::Embedder;
use edudb::compute::embed::local::LocalEmbedder;
use edudb::compute::quantize::quantize;
use edudb::ingest::pipeline::analyze;
use edudb::storage::vector_record::Row;
use edudb::storage::vectors::{EF_SEARCH, Graph};
use edudb::{EduKind, Format, Span};

const GROUP: &str = "vectors_model";
const MIN_VECTORS: usize = 100_000;
const RECALL_QUERIES: usize = 200;
const K: usize = 10;
/// Graph search efforts the recall curve is measured at.
/// (The graph searches at least `2k` = 20 candidates.)
const SEARCH_EFFORTS: [usize; 7] = [20, 32, 48, 64, 96, 128, 256];
/// The recall the target asks for.
const TARGET_RECALL: f64 = 0.95;
const CACHE_MAGIC: &[u8; 8] = b"EDUVEC01";

/// New vectors between saves of the cache, so an interrupted first run
/// keeps most of its work.
const SAVE_EVERY: usize = 20_000;
/// Texts given to the model per call.
const EMBED_BATCH: usize = 1_024;

/// Vectors of `texts` from `cache`, embedding (and caching) those it lacks,
/// with the time the model took.
fn embed_cached(
    model: &LocalEmbedder,
    cache: &mut HashMap<String, Vec<f32>>,
    path: &Path,
    texts: &[&str],
) -> (Vec<Vec<f32>>, usize, f64) {
    let mut missing: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !cache.contains_key(*t))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let started = Instant::now();
    let mut since_save = 0;
    for (i, batch) in missing.chunks(EMBED_BATCH).enumerate() {
        let vectors = model.embed(batch).unwrap();
        for (text, vector) in batch.iter().zip(vectors) {
            cache.insert((*text).to_owned(), vector);
        }
        since_save += batch.len();
        if since_save >= SAVE_EVERY {
            save_cache(path, cache);
            since_save = 0;
            eprintln!(
                "{GROUP}: embedded {} of {} texts in {:.0} s",
                (i + 1) * EMBED_BATCH,
                missing.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if !missing.is_empty() {
        save_cache(path, cache);
    }
    let vectors = texts.iter().map(|t| cache[*t].clone()).collect();
    (vectors, missing.len(), seconds)
}

/// The cache file of the model with `identity`.
fn cache_path(identity: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/edudb/bench").join(format!(
        "minilm-vectors-{:08x}.bin",
        crc32fast::hash(identity.as_bytes())
    ))
}

/// Reads a cache written by [`save_cache`]; empty when absent or unreadable
/// (it is then rebuilt).
fn load_cache(path: &Path, dimension: usize) -> HashMap<String, Vec<f32>> {
    let read = || -> std::io::Result<HashMap<String, Vec<f32>>> {
        let mut input = BufReader::new(std::fs::File::open(path)?);
        let mut word = [0u8; 8];
        input.read_exact(&mut word)?;
        if &word != CACHE_MAGIC {
            return Err(std::io::Error::other("not a vector cache"));
        }
        input.read_exact(&mut word)?;
        let count = u64::from_le_bytes(word);
        let mut cache = HashMap::new();
        let mut row = vec![0u8; dimension * 4];
        for _ in 0..count {
            let mut len = [0u8; 4];
            input.read_exact(&mut len)?;
            let mut text = vec![0u8; u32::from_le_bytes(len) as usize];
            input.read_exact(&mut text)?;
            input.read_exact(&mut row)?;
            let vector = (row.chunks_exact(4))
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let text = String::from_utf8(text).map_err(std::io::Error::other)?;
            cache.insert(text, vector);
        }
        Ok(cache)
    };
    match read() {
        Ok(cache) => cache,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
        Err(err) => {
            eprintln!("{GROUP}: ignoring the cache {} ({err})", path.display());
            HashMap::new()
        }
    }
}

/// Writes every cached vector to `path` (through a temporary file, so an
/// interrupted write leaves the old cache).
fn save_cache(path: &Path, cache: &HashMap<String, Vec<f32>>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let partial = path.with_extension("partial");
    let mut out = BufWriter::new(std::fs::File::create(&partial).unwrap());
    out.write_all(CACHE_MAGIC).unwrap();
    out.write_all(&(cache.len() as u64).to_le_bytes()).unwrap();
    for (text, vector) in cache {
        out.write_all(&(text.len() as u32).to_le_bytes()).unwrap();
        out.write_all(text.as_bytes()).unwrap();
        for x in vector {
            out.write_all(&x.to_le_bytes()).unwrap();
        }
    }
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::rename(&partial, path).unwrap();
}

/// The non-heading EDU texts (what the store's EDU graph indexes) of the
/// RFCs and the 2Wiki and MuSiQue passage documents.
fn corpus_edu_texts() -> Vec<String> {
    let mut sources =
        edudb::ingest::sources::expand(&[common::shared_data().join("rust_rfcs/text")], None)
            .expect("RFC corpus in ../shared/data");
    sources.extend(common::wiki2_documents());
    sources.extend(common::passage_documents(
        "musique/hipporag_musique_train100_corpus.json",
        "musique",
    ));
    let mut texts = Vec::new();
    for source in sources {
        let bytes = source.read().unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let doc = analyze(&source.id, text, Format::Markdown).unwrap();
        texts.extend(
            (doc.edus.iter())
                .filter(|e| e.kind != EduKind::Heading)
                .map(|e| doc.text[e.start as usize..e.end as usize].to_owned()),
        );
    }
    texts
}

fn main() {
    let run_started = SystemTime::now();
    let Some(model_dir) = std::env::var_os("EDUDB_LOCAL_MODEL") else {
        println!(
            "{GROUP}: EDUDB_LOCAL_MODEL is not set (.ci/embedding-server model-dir); nothing to measure"
        );
        return;
    };
    let model = LocalEmbedder::load(Path::new(&model_dir)).unwrap();
    let dimension = model.dimension();
    let path = cache_path(&model.identity());
    let started = Instant::now();
    let mut cache = load_cache(&path, dimension);
    println!(
        "{GROUP}: {} cached vectors read from {} in {:.1} s",
        cache.len(),
        path.display(),
        started.elapsed().as_secs_f64()
    );

    let texts = corpus_edu_texts();
    assert!(texts.len() >= MIN_VECTORS, "only {} EDU texts", texts.len());
    let step = texts.len() / RECALL_QUERIES;
    let query_texts: Vec<&str> = (0..RECALL_QUERIES)
        .map(|i| common::half(&texts[i * step]))
        .collect();
    let mut wanted: Vec<&str> = texts.iter().map(String::as_str).collect();
    wanted.extend(&query_texts);
    let (mut vectors, embedded, seconds) = embed_cached(&model, &mut cache, &path, &wanted);
    let queries = vectors.split_off(texts.len());
    if embedded > 0 {
        println!(
            "{GROUP}: the model embedded {embedded} texts in {seconds:.0} s ({:.0} texts/s, {} threads)",
            embedded as f64 / seconds,
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
    } else {
        println!("{GROUP}: every vector came from the cache");
    }
    drop(cache);

    // The graph as the store builds it, one row per EDU (it skips zero
    // vectors, which would shift its ids from the rows': the model gives
    // none).
    assert!(vectors.iter().all(|v| v.iter().any(|&x| x != 0.0)));
    let started = Instant::now();
    let stored = quantize(&vectors.concat(), dimension);
    let mut graph = Graph::empty();
    let rows = (0..vectors.len())
        .map(|i| {
            let (codes, scale) = stored.row(i, dimension).expect("a row per vector");
            let id = i as u32;
            (id, Span::new(id, id), Row::Packed(codes, scale))
        })
        .collect();
    graph.add("corpus", rows);
    println!(
        "{GROUP}: built the graph over {} EDU vectors of dimension {dimension} in {:.1} s",
        vectors.len(),
        started.elapsed().as_secs_f64()
    );
    let matrix: Vec<f32> = vectors.concat();
    drop(vectors);
    println!(
        "{GROUP}: flat matrix of {} vectors ({:.0} MiB)",
        matrix.len() / dimension,
        (matrix.len() * 4) as f64 / (1024.0 * 1024.0)
    );

    // Recall@10 of the graph against the exact scan, and the mean graph
    // query time, at several search efforts. A hit scoring at least the
    // exact k-th score counts (the corpus repeats short EDUs, and which of
    // equal vectors the scan keeps is arbitrary).
    let mut scores = Vec::new();
    let truths: Vec<(HashSet<usize>, f32)> = (queries.iter())
        .map(|q| {
            let best = common::flat_scan(&matrix, dimension, q, K, &mut scores);
            let kth = best.last().map_or(f32::MIN, |&(score, _)| score);
            (best.iter().map(|&(_, i)| i).collect(), kth)
        })
        .collect();
    let mut enough = None;
    for effort in SEARCH_EFFORTS {
        let mut found = 0usize;
        let started = Instant::now();
        for (query, (truth, kth)) in queries.iter().zip(&truths) {
            let hits = graph.search(query, K, effort, None);
            found += (hits.iter())
                .filter(|&&(i, score)| truth.contains(&i) || score >= kth - 1e-6)
                .count();
        }
        let mean = started.elapsed() / queries.len() as u32;
        let recall = found as f64 / (K * queries.len()) as f64;
        if recall >= TARGET_RECALL && enough.is_none() {
            enough = Some(effort);
        }
        println!(
            "{GROUP}: search effort {effort:>4}: recall@{K} {recall:.3} over {} queries, {:.2} ms per query{}",
            queries.len(),
            mean.as_secs_f64() * 1e3,
            if effort == EF_SEARCH {
                " (default)"
            } else {
                ""
            }
        );
    }

    let mut c = common::criterion();
    let mut group = c.benchmark_group(GROUP);
    let mut next = 0usize;
    let mut query = || {
        next += 1;
        queries[next % queries.len()].as_slice()
    };
    group.bench_function("flat_scan_top10", |b| {
        b.iter(|| common::flat_scan(&matrix, dimension, query(), K, &mut scores))
    });
    group.bench_function("hnsw_top10_default_effort", |b| {
        b.iter(|| graph.search(query(), K, EF_SEARCH, None))
    });
    let mut measured = vec!["hnsw_top10_default_effort"];
    match enough {
        Some(effort) => {
            println!(
                "{GROUP}: effort {effort} is the least measured that reaches recall {TARGET_RECALL}"
            );
            group.bench_function("hnsw_top10_recall_095", |b| {
                b.iter(|| graph.search(query(), K, effort, None))
            });
            measured.push("hnsw_top10_recall_095");
        }
        None => println!("{GROUP}: no measured effort reaches recall {TARGET_RECALL}"),
    }
    group.finish();
    c.final_summary();
    common::print_ratios(GROUP, "flat_scan_top10", &measured, run_started);
}
