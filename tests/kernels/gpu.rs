//! The CUDA kernels against their CPU references (`compute::aggregate`,
//! `compute::propagate`) on fresh random inputs of many shapes, on every
//! kernel device the build has: the CPU emulation of the same kernel
//! sources (feature `kernel-emulation`; `.ci/run` runs it, once under
//! AddressSanitizer) and a CUDA GPU (feature `cuda`). Without a GPU the
//! CUDA half of each test says it was skipped; the NVRTC test needs only
//! libnvrtc (no GPU, no driver).
//!
//! Every output buffer is poisoned with NaN before the kernels run
//! (`Backend::poisoned`), so an element no kernel writes comes back as NaN,
//! and NaN never passes a comparison here.
//!
//! Error bounds, f32 outputs:
//! - segment_mean: both sides sum in f64; they differ only in the order of
//!   additions and the final rounding: |gpu − cpu| ≤ 1e-6·|cpu| + 1e-9.
//! - vector_attention (fused and materialised): f32 logits summed in another
//!   order than the CPU's dot product, f32 softmax: per window
//!   ‖gpu − cpu‖ / ‖cpu‖ ≤ 1e-4, and per element |gpu − cpu| ≤ 1e-3·|cpu| + 1e-6.
//! - propagate: f32 sums in another order; scores stay within [0, 1] here:
//!   |gpu − cpu| ≤ 1e-5.
//! - top_k on exact inputs (steps = 0): identical lists.
#[cfg(feature = "cuda")]
use std::sync::OnceLock;

use edudb::compute::aggregate::{self, AttentionWindow, NodeWeights, Segments, VectorWindow};
#[cfg(feature = "kernel-emulation")]
use edudb::compute::gpu::Emulator;
use edudb::compute::gpu::KernelDevice;
#[cfg(feature = "cuda")]
use edudb::compute::gpu::{self, Gpu};
use edudb::compute::propagate::{self, PropagateOptions, PropagationGraph};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The GPU shared by the tests, or why there is none.
#[cfg(feature = "cuda")]
fn gpu(test: &str) -> Option<&'static Gpu> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    match GPU.get_or_init(Gpu::open) {
        Ok(gpu) => Some(gpu),
        Err(why) => {
            // Set on a lent GPU machine, so a broken driver load cannot pass by skipping.
            assert!(
                std::env::var_os("EDUDB_REQUIRE_GPU").is_none(),
                "EDUDB_REQUIRE_GPU is set but no GPU opened: {why}"
            );
            println!("{test}: skipped on CUDA, no usable GPU ({why})");
            None
        }
    }
}

/// Runs `case(device, rng)` on the CPU emulation and on the GPU, each that
/// this build has (the GPU only when one opens).
macro_rules! on_every_device {
    ($test:literal, $case:ident) => {{
        #[cfg(feature = "kernel-emulation")]
        $case(&Emulator::new(), &mut rng(concat!($test, ", emulated")));
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu($test) {
            $case(gpu, &mut rng(concat!($test, ", cuda")));
        }
    }};
}

/// A fresh seed, printed so that a failure can be replayed.
fn rng(test: &str) -> StdRng {
    let seed: u64 = rand::random();
    println!("{test}: seed {seed}");
    StdRng::seed_from_u64(seed)
}

#[cfg(feature = "cuda")]
#[test]
fn kernels_compile_with_nvrtc() {
    if !gpu::nvrtc_present() {
        // CI installs NVRTC and sets this, so the check cannot pass by skipping.
        assert!(
            std::env::var_os("EDUDB_REQUIRE_NVRTC").is_none(),
            "EDUDB_REQUIRE_NVRTC is set but libnvrtc was not found (check LD_LIBRARY_PATH)"
        );
        println!("kernels_compile_with_nvrtc: skipped, libnvrtc not found (set LD_LIBRARY_PATH)");
        return;
    }
    for arch in ["compute_75", "compute_90"] {
        if let Err(log) = gpu::compile(arch) {
            panic!("NVRTC rejected the kernels: {log}");
        }
    }
}

/// Random segments over `tokens` tokens: ragged lengths, some empty, some
/// single-token, and gaps of tokens in no segment.
fn segments(rng: &mut StdRng, tokens: u32, max_len: u32) -> Segments {
    let mut ranges = Vec::new();
    let mut at = 0;
    while at < tokens {
        let gap = if rng.random_bool(0.2) {
            rng.random_range(1..=3)
        } else {
            0
        };
        at = (at + gap).min(tokens);
        let len = match rng.random_range(0..10) {
            0 => 0,
            1 => 1,
            _ => rng.random_range(1..=max_len),
        }
        .min(tokens.saturating_sub(at));
        ranges.push(at..at + len);
        at += len;
    }
    Segments(ranges)
}

/// `(query tokens, key tokens, longest segment)` of the windows tested.
const SHAPES: [(u32, u32, u32); 9] = [
    (0, 5, 2),
    (5, 0, 2),
    (1, 1, 1),
    (3, 7, 1),
    (17, 33, 4),
    (64, 64, 64),
    (65, 130, 9),
    (200, 3000, 1),
    (130, 5000, 700),
];

fn assert_close(
    what: &str,
    gpu: &[NodeWeights],
    cpu: &[NodeWeights],
    relative: f32,
    absolute: f32,
    norm: f64,
) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: window count");
    for (index, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        assert_eq!(
            (g.rows, g.columns),
            (c.rows, c.columns),
            "{what}: window {index} shape"
        );
        let (mut diff, mut size) = (0f64, 0f64);
        for (at, (&a, &b)) in g.weights.iter().zip(&c.weights).enumerate() {
            assert!(
                (a - b).abs() <= relative * b.abs() + absolute,
                "{what}: window {index}, weight {at}: gpu {a}, cpu {b}"
            );
            diff += f64::from(a - b).powi(2);
            size += f64::from(b).powi(2);
        }
        assert!(
            diff.sqrt() <= norm * size.sqrt() + 1e-12,
            "{what}: window {index}: relative error {}",
            diff.sqrt() / size.sqrt()
        );
    }
}

#[test]
fn segment_mean_matches_cpu() {
    on_every_device!("segment_mean_matches_cpu", segment_mean_case);
}

fn segment_mean_case(gpu: &impl KernelDevice, rng: &mut StdRng) {
    for _ in 0..3 {
        let owned: Vec<_> = SHAPES
            .iter()
            .map(|&(tq, tk, max_len)| {
                let attention: Vec<f32> = (0..tq * tk).map(|_| rng.random::<f32>()).collect();
                (
                    attention,
                    tq as usize,
                    tk as usize,
                    segments(rng, tq, max_len),
                    segments(rng, tk, max_len),
                )
            })
            .collect();
        let windows: Vec<AttentionWindow> = owned
            .iter()
            .map(|(attention, tq, tk, q, k)| AttentionWindow {
                attention,
                query_tokens: *tq,
                key_tokens: *tk,
                query_segments: q,
                key_segments: k,
            })
            .collect();
        let cpu: Vec<_> = windows.iter().map(aggregate::segment_mean).collect();
        let got = gpu.segment_mean(&windows).expect("segment_mean");
        assert_close("segment_mean", &got, &cpu, 1e-6, 1e-9, 1e-6);
        for (one, reference) in windows.iter().zip(&cpu) {
            let alone = gpu
                .segment_mean(std::slice::from_ref(one))
                .expect("one window");
            assert_close(
                "segment_mean alone",
                &alone,
                std::slice::from_ref(reference),
                1e-6,
                1e-9,
                1e-6,
            );
        }
    }
}

#[test]
fn vector_attention_matches_cpu() {
    on_every_device!("vector_attention_matches_cpu", vector_attention_case);
}

fn vector_attention_case(gpu: &impl KernelDevice, rng: &mut StdRng) {
    for dimension in [1usize, 3, 16, 64, 100] {
        let owned: Vec<_> = SHAPES
            .iter()
            .map(|&(tq, tk, max_len)| {
                let mut vectors = |tokens: u32| -> Vec<f32> {
                    (0..tokens as usize * dimension)
                        .map(|_| rng.random_range(-1.0..1.0))
                        .collect()
                };
                let (queries, keys) = (vectors(tq), vectors(tk));
                (
                    queries,
                    keys,
                    segments(rng, tq, max_len),
                    segments(rng, tk, max_len),
                )
            })
            .collect();
        let windows: Vec<VectorWindow> = owned
            .iter()
            .map(|(queries, keys, q, k)| VectorWindow {
                queries,
                keys,
                dimension,
                query_segments: q,
                key_segments: k,
            })
            .collect();
        let cpu: Vec<_> = windows.iter().map(aggregate::vector_attention).collect();
        let fused = gpu.vector_attention(&windows).expect("vector_attention");
        assert_close(
            &format!("fused, d = {dimension}"),
            &fused,
            &cpu,
            1e-3,
            1e-6,
            1e-4,
        );
        let materialised = gpu
            .materialised_attention(&windows)
            .expect("materialised_attention");
        assert_close(
            &format!("materialised, d = {dimension}"),
            &materialised,
            &cpu,
            1e-3,
            1e-6,
            1e-4,
        );
    }
}

/// A random DAG-like graph: edges run from lower to higher ids, some nodes
/// have no parents, in-degrees are ragged, out-weights sum to at most 1.
fn graph(rng: &mut StdRng, nodes: usize, max_parents: usize) -> PropagationGraph {
    let mut edges = Vec::new();
    for to in 1..nodes {
        if rng.random_bool(0.2) {
            continue;
        }
        for _ in 0..rng.random_range(1..=max_parents) {
            let from = rng.random_range(0..to);
            edges.push((
                from as u32,
                to as u32,
                rng.random_range(0.0..1.0f32) / max_parents as f32,
            ));
        }
    }
    PropagationGraph::from_edges(nodes, edges)
}

#[test]
fn propagate_matches_cpu() {
    on_every_device!("propagate_matches_cpu", propagate_case);
}

fn propagate_case(gpu: &impl KernelDevice, rng: &mut StdRng) {
    for (nodes, max_parents) in [(0, 1), (1, 1), (5, 2), (300, 3), (2000, 40), (5000, 6)] {
        let graph = graph(rng, nodes, max_parents);
        let device = gpu.upload(&graph).expect("upload");
        for batch in [1usize, 7, 32, 33, 132, 256] {
            let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random::<f32>()).collect();
            for steps in [0, 1, 2, 5] {
                let options = PropagateOptions {
                    steps,
                    alpha: rng.random_range(0.0..1.0),
                };
                let cpu = propagate::propagate(&graph, &seeds, batch, options);
                let got = device.propagate(&seeds, batch, options).expect("propagate");
                assert_eq!(got.len(), cpu.len());
                for (at, (a, b)) in got.iter().zip(&cpu).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "{nodes} nodes, batch {batch}, {steps} steps: score {at}: gpu {a}, cpu {b}"
                    );
                }
                let once = gpu
                    .propagate(&graph, &seeds, batch, options)
                    .expect("one-shot propagate");
                assert_eq!(once, got, "one-shot and device-resident graph agree");
            }
        }
    }
}

#[test]
fn every_lane_count_per_node_matches_cpu() {
    on_every_device!("every_lane_count_per_node_matches_cpu", lanes_case);
}

fn lanes_case(gpu: &impl KernelDevice, rng: &mut StdRng) {
    let graph = graph(rng, 3000, 40);
    let options = PropagateOptions {
        steps: 2,
        alpha: 0.7,
    };
    for batch in [1usize, 5] {
        let seeds: Vec<f32> = (0..3000 * batch).map(|_| rng.random::<f32>()).collect();
        let cpu = propagate::propagate(&graph, &seeds, batch, options);
        for lanes in [1, 2, 4, 8, 16, 32] {
            let device = gpu
                .upload(&graph)
                .and_then(|device| device.with_lanes_per_node(lanes))
                .expect("upload");
            let got = device.propagate(&seeds, batch, options).expect("propagate");
            for (at, (a, b)) in got.iter().zip(&cpu).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5,
                    "{lanes} lanes, batch {batch}: score {at}: gpu {a}, cpu {b}"
                );
            }
        }
    }
    for bad in [0, 3, 64] {
        let refused = gpu
            .upload(&graph)
            .and_then(|device| device.with_lanes_per_node(bad));
        assert!(refused.is_err(), "{bad} lanes per node must be refused");
    }
}

#[test]
fn top_k_matches_cpu() {
    on_every_device!("top_k_matches_cpu", top_k_case);
}

fn top_k_case(gpu: &impl KernelDevice, rng: &mut StdRng) {
    for (nodes, batch) in [(1, 1), (10, 7), (3000, 32), (70_000, 33), (500, 256)] {
        let graph = graph(rng, nodes, 3);
        // Few distinct values, so ties are common; zeros, negatives and NaN
        // must be left out.
        let seeds: Vec<f32> = (0..nodes * batch)
            .map(|_| match rng.random_range(0..10) {
                0 => 0.0,
                1 => -0.5,
                2 => f32::NAN,
                n => n as f32 / 8.0,
            })
            .collect();
        let cpu_scores = propagate::propagate(
            &graph,
            &seeds,
            batch,
            PropagateOptions {
                steps: 0,
                alpha: 0.5,
            },
        );
        for k in [0, 1, 5, 64, 65] {
            let options = PropagateOptions {
                steps: 0,
                alpha: 0.5,
            };
            let got = gpu
                .propagate_top_k(&graph, &seeds, batch, options, k)
                .expect("top_k");
            assert_eq!(
                got,
                propagate::top_k(&cpu_scores, batch, k),
                "{nodes} nodes, batch {batch}, k {k}"
            );
        }
        // After propagation the lists may differ where scores are within
        // rounding; compare the k-th scores instead.
        let options = PropagateOptions {
            steps: 3,
            alpha: 0.6,
        };
        let clean: Vec<f32> = seeds
            .iter()
            .map(|s| if s.is_nan() { 0.0 } else { s.max(0.0) })
            .collect();
        let scores_clean = propagate::propagate(&graph, &clean, batch, options);
        let got = gpu
            .propagate_top_k(&graph, &clean, batch, options, 10)
            .expect("top_k after steps");
        for (b, (list, reference)) in got
            .iter()
            .zip(propagate::top_k(&scores_clean, batch, 10))
            .enumerate()
        {
            assert_eq!(list.len(), reference.len(), "query {b}");
            for ((_, a), (_, r)) in list.iter().zip(&reference) {
                assert!((a - r).abs() <= 1e-5, "query {b}: gpu {a}, cpu {r}");
            }
        }
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    on_every_device!("bad_input_is_an_error_not_a_panic", bad_input_case);
}

fn bad_input_case(gpu: &impl KernelDevice, _rng: &mut StdRng) {
    let graph = PropagationGraph::from_edges(3, [(0, 1, 1.0), (1, 2, 1.0)]);
    let options = PropagateOptions {
        steps: 2,
        alpha: 0.5,
    };
    assert!(gpu.propagate(&graph, &[1.0; 5], 2, options).is_err());
    let broken = PropagationGraph {
        offsets: vec![0, 1],
        parents: vec![7],
        weights: vec![1.0],
    };
    assert!(gpu.propagate(&broken, &[1.0], 1, options).is_err());
    let (q, k) = (Segments::from_lengths([2]), Segments::from_lengths([9]));
    let window = AttentionWindow {
        attention: &[0.5; 8],
        query_tokens: 2,
        key_tokens: 4,
        query_segments: &q,
        key_segments: &k,
    };
    assert!(gpu.segment_mean(&[window]).is_err());
}

/// `Device::detect` (what ingest and queries use) serves inputs on either
/// side of its CPU/GPU thresholds with the CPU reference's results: the
/// small ones on the CPU, the large ones on the GPU when there is one.
#[cfg(feature = "cuda")]
#[test]
fn the_detected_device_matches_the_cpu_on_both_sides_of_its_thresholds() {
    use edudb::compute::device::{Device, GPU_MIN_ATTENTION_WORK, GPU_MIN_PROPAGATION_WORK};

    let device = Device::detect();
    let on_gpu = gpu("the_detected_device_matches_the_cpu").is_some();
    let mut rng = rng("the_detected_device_matches_the_cpu");
    let options = PropagateOptions {
        steps: 2,
        alpha: 0.5,
    };
    for (nodes, batch) in [(200, 1), (20_000, 4), (60_000, 32)] {
        let graph = graph(&mut rng, nodes, 6);
        let large = graph.edges() * batch >= GPU_MIN_PROPAGATION_WORK;
        let expected_device = if on_gpu && large { "cuda" } else { "cpu" };
        assert_eq!(device.propagation_device(&graph, batch), expected_device);
        let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random::<f32>()).collect();
        let got = device
            .propagate_top_k(&graph, &seeds, batch, options, 10)
            .expect("propagate_top_k");
        let scores = propagate::propagate(&graph, &seeds, batch, options);
        let reference = propagate::top_k(&scores, batch, 10);
        for (b, (list, want)) in got.iter().zip(&reference).enumerate() {
            assert_eq!(list.len(), want.len(), "{nodes} nodes, query {b}");
            for ((_, a), (_, r)) in list.iter().zip(want) {
                assert!(
                    (a - r).abs() <= 1e-5,
                    "{nodes} nodes, query {b}: {a} vs {r}"
                );
            }
        }
    }
    let dimension = 64;
    for tokens in [64u32, 1024] {
        let work = (tokens as usize).pow(2) * dimension;
        println!(
            "attention over {tokens}² tokens: {} the GPU threshold",
            if work >= GPU_MIN_ATTENTION_WORK {
                "above"
            } else {
                "below"
            }
        );
        let mut vectors = || -> Vec<f32> {
            (0..tokens as usize * dimension)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect()
        };
        let (queries, keys) = (vectors(), vectors());
        let segments = self::segments(&mut rng, tokens, 40);
        let window = VectorWindow {
            queries: &queries,
            keys: &keys,
            dimension,
            query_segments: &segments,
            key_segments: &segments,
        };
        let cpu = [aggregate::vector_attention(&window)];
        let got = device
            .vector_attention(std::slice::from_ref(&window))
            .expect("vector_attention");
        assert_close("detected device", &got, &cpu, 1e-3, 1e-6, 1e-4);
    }
}
