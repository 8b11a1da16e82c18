//! The weighted DAG on the CPU (the GPU's figures come from `benches/gpu.rs`
//! on a machine with one):
//!
//! - `dag_build`: building one large RFC's DAG (chunks, information points,
//!   computed attention) against analysing the same document (layout,
//!   EDUs, tokens, tree) in the same run: the DAG's share of ingest;
//! - `dag_attention`: attention from token vectors aggregated to node
//!   level one row at a time (the CPU reference of the fused kernel)
//!   against materialising the softmax matrix and then aggregating it;
//! - `dag_propagate`: batched propagation and top-10 over a DAG-shaped
//!   graph of 1M edges for 1 to 256 queries at once, against one query:
//!   the ratio is what a batch costs relative to a single query.
//!
//! `cargo bench --bench dag` (add `-- --quick` for a short run).

mod common;

use std::hint::black_box;
use std::time::SystemTime;

use criterion::Criterion;
use edudb::compute::aggregate::{self, AttentionWindow, Segments, VectorWindow};
use edudb::compute::device::Device;
use edudb::compute::embed::Embedder;
use edudb::compute::embed::hashed::HashedEmbedder;
use edudb::compute::propagate::{self, PropagateOptions, PropagationGraph};
use edudb::ingest::dag::attention::ComputedAttention;
use edudb::ingest::dag::build::{DagConfig, build};
use edudb::ingest::dag::ip::{EduVectors, ExtractiveIpMaker};
use edudb::{Document, Format};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BATCHES: [usize; 4] = [1, 16, 64, 256];

fn largest_rfc() -> Document {
    let dir = common::shared_data().join("rust_rfcs/text");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    edudb::ingest::analyze("largest", text, Format::Markdown).unwrap()
}

fn bench_build(c: &mut Criterion) {
    let doc = largest_rfc();
    let embedder = HashedEmbedder::new(256).unwrap();
    let texts: Vec<&str> = doc
        .edus
        .iter()
        .map(|e| &doc.text[e.start as usize..e.end as usize])
        .collect();
    let vectors: Vec<f32> = embedder.embed(&texts).unwrap().concat();
    println!(
        "dag_build: {} EDUs, {} tokens",
        doc.edus.len(),
        doc.meta.tokens
    );
    let mut group = c.benchmark_group("dag_build");
    group.sample_size(10);
    group.bench_function("analyse", |b| {
        b.iter(|| edudb::ingest::analyze("largest", doc.text.clone(), Format::Markdown).unwrap())
    });
    let attention = ComputedAttention::new(Device::Cpu);
    group.bench_function("dag", |b| {
        b.iter(|| {
            build(
                &doc,
                &EduVectors::Full {
                    values: &vectors,
                    dimension: 256,
                },
                &DagConfig::default(),
                &ExtractiveIpMaker::default(),
                None,
                &attention,
            )
            .unwrap()
            .0
        })
    });
    group.finish();
}

fn bench_attention(c: &mut Criterion) {
    // One default-sized window: 2,048 key tokens in 7 chunks, 256 query
    // tokens in 12 points, 64-dimensional token vectors.
    let mut rng = StdRng::seed_from_u64(7);
    let d = 64;
    let (tq, tk) = (256usize, 2048usize);
    let mut random =
        |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0..1.0)).collect() };
    let (queries, keys) = (random(tq * d), random(tk * d));
    let query_segments = Segments::from_lengths([21, 21, 21, 21, 21, 21, 21, 21, 22, 22, 22, 22]);
    let key_segments = Segments::from_lengths([292, 292, 292, 292, 292, 292, 296]);
    let window = VectorWindow {
        queries: &queries,
        keys: &keys,
        dimension: d,
        query_segments: &query_segments,
        key_segments: &key_segments,
    };
    let mut group = c.benchmark_group("dag_attention");
    group.bench_function("materialise_then_aggregate", |b| {
        b.iter(|| {
            let scale = 1.0 / (d as f32).sqrt();
            let mut matrix = vec![0f32; tq * tk];
            for (x, row) in matrix.chunks_exact_mut(tk).enumerate() {
                let q = &queries[x * d..][..d];
                for (y, cell) in row.iter_mut().enumerate() {
                    *cell = edudb::compute::embed::dot(q, &keys[y * d..][..d]) * scale;
                }
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f32 = row
                    .iter_mut()
                    .map(|v| {
                        *v = (*v - max).exp();
                        *v
                    })
                    .sum();
                row.iter_mut().for_each(|v| *v /= sum);
            }
            aggregate::segment_mean(&AttentionWindow {
                attention: &matrix,
                query_tokens: tq,
                key_tokens: tk,
                query_segments: &query_segments,
                key_segments: &key_segments,
            })
        })
    });
    group.bench_function("row_at_a_time", |b| {
        b.iter(|| aggregate::vector_attention(black_box(&window)))
    });
    group.finish();
}

/// A DAG-shaped graph: `levels` levels, each node of a level pointing at
/// 4 to 12 nodes of the level below (weights normalised), about `edges` edges.
fn dag_graph(edges: usize) -> PropagationGraph {
    let mut rng = StdRng::seed_from_u64(11);
    let per_node = 8usize;
    let mut level_sizes = vec![edges / per_node];
    while *level_sizes.last().unwrap() > 64 {
        let next = level_sizes.last().unwrap() / 4;
        level_sizes.push(next);
    }
    let mut starts = vec![0usize];
    for size in &level_sizes {
        starts.push(starts.last().unwrap() + size);
    }
    let nodes = *starts.last().unwrap() + level_sizes[0] * per_node / 2;
    let mut list = Vec::new();
    // Level 0 of the list points into an implicit chunk level after all others.
    let chunk_start = *starts.last().unwrap();
    let chunks = nodes - chunk_start;
    for (l, size) in level_sizes.iter().enumerate() {
        let (below_start, below) = if l == 0 {
            (chunk_start, chunks)
        } else {
            (starts[l - 1], level_sizes[l - 1])
        };
        for i in 0..*size {
            let fanout = rng.random_range(4..=12).min(below);
            let at = (i * below / size).min(below - fanout);
            let weights: Vec<f32> = (0..fanout).map(|_| rng.random_range(0.1..1.0)).collect();
            let sum: f32 = weights.iter().sum();
            for (k, w) in weights.iter().enumerate() {
                list.push((
                    (starts[l] + i) as u32,
                    (below_start + at + k) as u32,
                    w / sum,
                ));
            }
        }
    }
    PropagationGraph::from_edges(nodes, list)
}

fn bench_propagate(c: &mut Criterion) {
    let graph = dag_graph(1_000_000);
    println!(
        "dag_propagate: {} nodes, {} edges",
        graph.nodes(),
        graph.edges()
    );
    let mut rng = StdRng::seed_from_u64(3);
    let options = PropagateOptions {
        steps: 4,
        alpha: 0.5,
    };
    let mut group = c.benchmark_group("dag_propagate");
    group.sample_size(10);
    for batch in BATCHES {
        let seeds: Vec<f32> = (0..graph.nodes() * batch)
            .map(|_| {
                if rng.random_bool(0.01) {
                    rng.random_range(0.0..1.0)
                } else {
                    0.0
                }
            })
            .collect();
        group.bench_function(format!("batch_{batch}"), |b| {
            b.iter(|| {
                let scores = propagate::propagate(&graph, &seeds, batch, options);
                propagate::top_k(&scores, batch, 10)
            })
        });
    }
    group.finish();
}

fn main() {
    let run_started = SystemTime::now();
    let mut criterion = common::criterion();
    bench_build(&mut criterion);
    bench_attention(&mut criterion);
    bench_propagate(&mut criterion);
    criterion.final_summary();
    common::print_ratios("dag_build", "analyse", &["dag"], run_started);
    common::print_ratios(
        "dag_attention",
        "materialise_then_aggregate",
        &["row_at_a_time"],
        run_started,
    );
    common::print_ratios(
        "dag_propagate",
        "batch_1",
        &["batch_16", "batch_64", "batch_256"],
        run_started,
    );
}
