//! What a real model costs, on the CPU: all-MiniLM-L6-v2 in-process
//! (candle) against the same model behind the numpy reference server
//! (HTTP on loopback), and the DAG built with the model's attention
//! against the hashed stand-in:
//!
//! - `embed_sentences`: 64 sentences of about 25 tokens, one call;
//! - `embed_chunks`: 16 chunks of 256 model tokens (truncated), one call;
//! - `dag_build`: one RFC's DAG (12 KB: the same information points, edges
//!   from computed hashed attention or from the model's attention);
//! - `document`: what ingest does with the model for that RFC (its EDU and
//!   node vectors, then its DAG on the model's attention) against
//!   embedding its text once in 256-token chunks, the floor of any ingest
//!   that reads every token with the model.
//!
//! Needs `EDUDB_LOCAL_MODEL` (`.ci/embedding-server model-dir`); the HTTP
//! rows also `EDUDB_EMBEDDING_URL` (`.ci/embedding-server start`) and are
//! left out without it. `cargo bench --bench embed` (`-- --quick` for a
//! short run). Throughput (sentences/s, tokens/s) is printed with the
//! ratios.

mod common;

use std::sync::Arc;
use std::time::SystemTime;

use criterion::Criterion;
use edudb::compute::device::Device;
use edudb::compute::embed::Embedder;
use edudb::compute::embed::http::{HttpConfig, HttpEmbedder};
use edudb::compute::embed::local::LocalEmbedder;
use edudb::ingest::dag::attention::{AttentionSource, ComputedAttention};
use edudb::ingest::dag::ip::EduVectors;
use edudb::ingest::dag::model_attention::ModelAttention;
use edudb::ingest::pipeline::{analyze, build_dag, embed_document};
use edudb::{Document, Format};

/// 64 different sentences of 20 to 30 model tokens.
fn sentences() -> Vec<String> {
    let subjects = [
        "The harbour committee",
        "A retired chemist",
        "My neighbour's daughter",
        "The regional pilot union",
    ];
    let verbs = [
        "carefully reviewed",
        "quietly ignored",
        "painted over",
        "publicly described",
    ];
    let objects = [
        "the old maps of the northern coast before the storm",
        "a violin that had belonged to her grandfather",
        "quantum dots grown on silicon wafers last spring",
        "the new tax law and its many exceptions",
    ];
    let mut out = Vec::new();
    for s in subjects {
        for v in verbs {
            for o in objects {
                out.push(format!("{s} {v} {o}, as everyone expected."));
            }
        }
    }
    out
}

/// 16 chunks of RFC text long enough to fill the 256-token limit.
fn chunks(doc: &Document) -> Vec<String> {
    doc.text
        .as_bytes()
        .chunks(1600)
        .take(16)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// The whole of `doc`'s text in pieces of at most 900 bytes cut at
/// whitespace (under the model's 256 tokens each).
fn doc_chunks(doc: &Document) -> Vec<String> {
    let mut out = vec![String::new()];
    for word in doc.text.split_inclusive(char::is_whitespace) {
        if out.last().unwrap().len() + word.len() > 900 {
            out.push(String::new());
        }
        out.last_mut().unwrap().push_str(word);
    }
    out
}

fn rfc() -> Document {
    let path = common::shared_data().join("rust_rfcs/text/0201-error-chaining.md");
    let text = std::fs::read_to_string(path).expect("RFC corpus in ../shared/data");
    analyze("rfc", text, Format::Markdown).unwrap()
}

fn bench_embed(
    c: &mut Criterion,
    group: &str,
    texts: &[String],
    embedders: &[(&str, &dyn Embedder)],
) {
    let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group(group);
    group.sample_size(10);
    for (name, embedder) in embedders {
        group.bench_function(*name, |b| b.iter(|| embedder.embed(&inputs).unwrap()));
    }
    group.finish();
}

fn main() {
    let Some(dir) = std::env::var_os("EDUDB_LOCAL_MODEL") else {
        println!(
            "embed: EDUDB_LOCAL_MODEL is not set (.ci/embedding-server model-dir); nothing to measure"
        );
        return;
    };
    let started = std::time::Instant::now();
    let local = LocalEmbedder::load(std::path::Path::new(&dir)).unwrap();
    println!(
        "embed: model loaded in {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let http = std::env::var("EDUDB_EMBEDDING_URL")
        .ok()
        .map(|url| HttpEmbedder::new(HttpConfig::new(url, "all-MiniLM-L6-v2")).unwrap());
    let mut embedders: Vec<(&str, &dyn Embedder)> = vec![("local_candle", &local)];
    if let Some(http) = &http {
        embedders.push(("http_numpy", http));
    }
    let doc = rfc();
    let model = local.transformer().unwrap();
    let sentence_texts = sentences();
    let chunk_texts = chunks(&doc);
    let tokens = |texts: &[String]| -> usize {
        texts
            .iter()
            .map(|t| model.tokens(t).unwrap().len().min(256) + 2)
            .sum()
    };
    let (sentence_tokens, chunk_tokens) = (tokens(&sentence_texts), tokens(&chunk_texts));

    let vectors = embed_document(&doc, &local).unwrap();
    let hashed = ComputedAttention::new(Device::Cpu);
    let by_model = ModelAttention::new(Arc::clone(&model), Device::Cpu);
    let sources: [(&str, &dyn AttentionSource); 2] = [
        ("hashed_attention", &hashed),
        ("model_attention", &by_model),
    ];

    let run_started = SystemTime::now();
    let mut criterion = common::criterion();
    bench_embed(
        &mut criterion,
        "embed_sentences",
        &sentence_texts,
        &embedders,
    );
    bench_embed(&mut criterion, "embed_chunks", &chunk_texts, &embedders);
    let mut group = criterion.benchmark_group("dag_build");
    group.sample_size(10);
    for (name, source) in sources {
        group.bench_function(name, |b| {
            b.iter(|| {
                build_dag(
                    &doc,
                    EduVectors::packed(&vectors.edus, vectors.dimension as usize),
                    source,
                )
                .unwrap()
            })
        });
    }
    group.finish();
    let whole_text = doc_chunks(&doc);
    let whole_inputs: Vec<&str> = whole_text.iter().map(String::as_str).collect();
    let mut group = criterion.benchmark_group("document");
    group.sample_size(10);
    group.bench_function("embed_text_once", |b| {
        b.iter(|| local.embed(&whole_inputs).unwrap())
    });
    group.bench_function("vectors_and_dag", |b| {
        b.iter(|| {
            let vectors = embed_document(&doc, &local).unwrap();
            build_dag(
                &doc,
                EduVectors::packed(&vectors.edus, vectors.dimension as usize),
                &by_model,
            )
            .unwrap()
        })
    });
    group.finish();
    criterion.final_summary();

    let others: Vec<&str> = embedders.iter().skip(1).map(|(n, _)| *n).collect();
    for (group, texts, tokens) in [
        ("embed_sentences", &sentence_texts, sentence_tokens),
        ("embed_chunks", &chunk_texts, chunk_tokens),
    ] {
        common::print_ratios(group, "local_candle", &others, run_started);
        for (name, _) in &embedders {
            if let Some(ns) = common::median_ns(group, name, run_started) {
                let seconds = ns / 1e9;
                println!(
                    "  {name:<28} {:>8.1} texts/s {:>8.0} tokens/s",
                    texts.len() as f64 / seconds,
                    tokens as f64 / seconds
                );
            }
        }
    }
    common::print_ratios(
        "dag_build",
        "hashed_attention",
        &["model_attention"],
        run_started,
    );
    common::print_ratios(
        "document",
        "embed_text_once",
        &["vectors_and_dag"],
        run_started,
    );
    for name in ["embed_text_once", "vectors_and_dag"] {
        if let Some(ns) = common::median_ns("document", name, run_started) {
            println!(
                "  {name:<28} {:>8.0} document tokens (o200k)/s",
                doc.meta.tokens as f64 / (ns / 1e9)
            );
        }
    }
    println!(
        "dag_build: {} EDUs, {} tokens (o200k), {} DAG nodes",
        doc.edus.len(),
        doc.meta.tokens,
        build_dag(
            &doc,
            EduVectors::packed(&vectors.edus, vectors.dimension as usize),
            &by_model
        )
        .unwrap()
        .nodes
        .len()
    );
}
