//! GPU benchmark of the CUDA kernels (needs `--features cuda` and a GPU;
//! without one it says so in one line and exits 0).
//!
//! Propagation over random DAG-like graphs, parents anywhere before a node
//! or (as in real DAGs) close before it (up to 10M edges, batches
//! 1..256): time per call (3 steps), achieved GB/s on the fewest bytes a
//! step must move (graph once, current/seed/next scores once each) against
//! the device-to-device copy bandwidth measured in the same run, GFLOP/s
//! (2 per edge and query per step), the speed-up over the CPU reference,
//! and one step against cuSPARSE SpMM on the same CSR.
//!
//! Attention windows up to 8K × 8K tokens: the fused online-softmax kernel
//! against materialise-then-aggregate on the GPU and against the CPU.
//! Attention times include the same uploads and downloads on both GPU paths.
//!
//! The CPU/GPU crossover: whole calls as `compute::device::Device` makes
//! them (uploads, launches and downloads included) against the CPU
//! reference on all cores, over growing inputs, and the smallest work at
//! which the GPU wins: what `GPU_MIN_PROPAGATION_WORK`,
//! `GPU_MIN_ATTENTION_WORK` and `GPU_MIN_SEGMENT_MEAN_WORK` are set from.
//!
//! With `EDUDB_GPU_JSON=PATH` it also writes one JSON report (what
//! `.ci/gpu-check` collects): the device, its copy bandwidth, propagation
//! at 1k, 100k and 10M edges by 1, 64 and 1,024 queries per batch beside
//! the CPU reference, and the attention rows; without a GPU, the same
//! shape with every measurement `null` and each row saying why.
//!
//! `cargo bench --features cuda --bench gpu`

use std::ffi::c_void;
use std::time::Instant;

use cudarc::cusparse::sys as cs;
use cudarc::driver::{CudaSlice, DevicePtr, sys};
use edudb::compute::aggregate::{self, AttentionWindow, Segments, VectorWindow};
use edudb::compute::device::{
    GPU_MIN_ATTENTION_WORK, GPU_MIN_PROPAGATION_WORK, GPU_MIN_SEGMENT_MEAN_WORK,
};
use edudb::compute::gpu::{Gpu, KernelDevice};
use edudb::compute::propagate::{self, PropagateOptions, PropagationGraph};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

fn main() {
    let report = std::env::var_os("EDUDB_GPU_JSON").map(std::path::PathBuf::from);
    let gpu = match Gpu::open() {
        Ok(gpu) => gpu,
        Err(why) => {
            println!("no GPU ({why}): nothing to benchmark");
            if let Some(path) = report {
                let reason = format!("not measured: no GPU ({why})");
                write_report(&path, &unmeasured(&reason));
            }
            return;
        }
    };
    println!("device: {}", gpu.name());
    let copy = copy_bandwidth(&gpu);
    println!("device-to-device copy: {copy:.0} GB/s (bytes read + written)\n");
    let grid = grid(&gpu, copy);
    propagation(&gpu, copy);
    lanes_per_node(&gpu);
    let attention = attention(&gpu);
    crossover(&gpu);
    if let Some(path) = report {
        write_report(
            &path,
            &json!({
                "device": gpu.name(),
                "copy_gbs": copy,
                "propagation": grid,
                "attention": attention,
            }),
        );
    }
}

/// Edges of the grid's graphs (`.ci/gpu-check`'s JSON).
const GRID_EDGES: [usize; 3] = [1_000, 100_000, 10_000_000];
/// Queries per batch of the grid.
const GRID_BATCHES: [usize; 3] = [1, 64, 1024];
/// Largest edges × queries the CPU reference is timed at in the grid (past
/// it, one CPU call takes minutes of the device machine's time).
const GRID_CPU_WORK: usize = 1 << 30;
/// Steps of propagation per call in the grid.
const GRID_STEPS: u32 = 3;
/// Windows × tokens of the attention rows.
const ATTENTION_SHAPES: [(usize, u32); 4] = [(16, 512), (4, 2048), (1, 4096), (1, 8192)];

/// Writes the JSON `report` to `path`.
fn write_report(path: &std::path::Path, report: &Value) {
    let text = serde_json::to_string_pretty(report).expect("JSON");
    std::fs::write(path, text + "\n").expect("the report is writable");
    println!("report written to {}", path.display());
}

/// The report's shape with every measurement `null` and each row's
/// `status` saying why.
fn unmeasured(reason: &str) -> Value {
    let propagation: Vec<Value> = (GRID_EDGES.iter())
        .flat_map(|&edges| GRID_BATCHES.map(|batch| (edges, batch)))
        .map(|(edges, batch)| grid_row(edges, None, batch, None, reason))
        .collect();
    let attention: Vec<Value> = (ATTENTION_SHAPES.iter())
        .map(|&(windows, tokens)| attention_row(windows, tokens, None, reason))
        .collect();
    json!({
        "device": null,
        "copy_gbs": null,
        "propagation": propagation,
        "attention": attention,
    })
}

/// One propagation cell of the grid, for a graph of about `edges` edges
/// (`graph_edges` exactly, when built): `measured` is (ms per call, GB/s,
/// share of a copy, ms of the CPU reference or `None`).
fn grid_row(
    edges: usize,
    graph_edges: Option<usize>,
    batch: usize,
    measured: Option<(f64, f64, f64, Option<f64>)>,
    status: &str,
) -> Value {
    let (ms, gbs, of_copy, cpu_ms) = measured.map_or((None, None, None, None), |(a, b, c, d)| {
        (Some(a), Some(b), Some(c), d)
    });
    json!({
        "edges": edges,
        "graph_edges": graph_edges,
        "queries": batch,
        "steps": GRID_STEPS,
        "gpu_ms": ms,
        "gbs": gbs,
        "of_copy": of_copy,
        "cpu_ms": cpu_ms,
        "gpu_faster": cpu_ms.zip(ms).map(|(cpu, gpu)| cpu > gpu),
        "status": status,
    })
}

/// One attention row: `measured` is (fused ms, materialised ms, CPU ms).
fn attention_row(
    windows: usize,
    tokens: u32,
    measured: Option<(f64, f64, f64)>,
    status: &str,
) -> Value {
    let (fused, materialised, cpu) =
        measured.map_or((None, None, None), |(a, b, c)| (Some(a), Some(b), Some(c)));
    json!({
        "windows": windows,
        "tokens": tokens,
        "fused_ms": fused,
        "materialised_ms": materialised,
        "cpu_ms": cpu,
        "status": status,
    })
}

/// Propagation at [`GRID_EDGES`] × [`GRID_BATCHES`] on local DAG-like
/// graphs (ten parents per node on average, among the 512 nodes before
/// it), as whole device calls of [`GRID_STEPS`] steps, with the CPU
/// reference beside each cell small enough ([`GRID_CPU_WORK`]); the 1,000
/// edges and 1 query cell is the launch-overhead floor of one small
/// document.
fn grid(gpu: &Gpu, copy: f64) -> Vec<Value> {
    let mut rng = StdRng::seed_from_u64(5);
    let mut rows = Vec::new();
    println!("grid, {GRID_STEPS} steps: ms per call | GB/s (of copy) | CPU ms");
    for edges in GRID_EDGES {
        let nodes = edges / 10;
        let graph = dag(&mut rng, nodes, 10, Some(512));
        let device = gpu.upload(&graph).expect("upload");
        for batch in GRID_BATCHES {
            let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random()).collect();
            let on_device = device.upload_seeds(&seeds, batch).expect("seeds");
            let options = PropagateOptions {
                steps: GRID_STEPS,
                alpha: 0.5,
            };
            let ms = device_ms(gpu, 10, || {
                device
                    .propagate_device(&on_device, batch, options)
                    .expect("propagate");
            });
            let cpu_ms = (graph.edges() * batch <= GRID_CPU_WORK).then(|| {
                wall_ms(1, || {
                    propagate::propagate(&graph, &seeds, batch, options);
                })
            });
            let scores = (nodes * batch) as f64;
            let bytes = GRID_STEPS as f64
                * ((nodes + 1) as f64 * 4.0 + graph.edges() as f64 * 8.0 + 3.0 * scores * 4.0);
            let gbs = bytes / (ms * 1e-3) / 1e9;
            println!(
                "  E {edges:>9}, B {batch:>4}: {ms:>9.3} ms | {gbs:>6.0} GB/s ({:>3.0}%) | {}",
                100.0 * gbs / copy,
                cpu_ms.map_or("not timed".to_owned(), |ms| format!("{ms:.3}"))
            );
            let status = if cpu_ms.is_some() {
                "measured"
            } else {
                "measured; the CPU reference not timed (too large)"
            };
            rows.push(grid_row(
                edges,
                Some(graph.edges()),
                batch,
                Some((ms, gbs, gbs / copy, cpu_ms)),
                status,
            ));
        }
    }
    println!();
    rows
}

/// Median time in ms of `f`'s device work over `reps` runs after a warm-up,
/// measured with events on the GPU's stream.
fn device_ms(gpu: &Gpu, reps: usize, mut f: impl FnMut()) -> f64 {
    let stream = gpu.stream();
    let event = || {
        stream
            .context()
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .expect("event")
    };
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let (start, end) = (event(), event());
            start.record(stream).expect("record");
            f();
            end.record(stream).expect("record");
            f64::from(start.elapsed_ms(&end).expect("elapsed"))
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Median wall time in ms of `f` (which waits for its own results).
fn wall_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// GB/s of a 1 GiB device-to-device copy, counting bytes read and written.
fn copy_bandwidth(gpu: &Gpu) -> f64 {
    let bytes = 1usize << 30;
    let stream = gpu.stream();
    let source = stream.alloc_zeros::<u8>(bytes).expect("alloc");
    let mut target = stream.alloc_zeros::<u8>(bytes).expect("alloc");
    let ms = device_ms(gpu, 10, || {
        stream.memcpy_dtod(&source, &mut target).expect("copy")
    });
    2.0 * bytes as f64 / (ms * 1e-3) / 1e9
}

/// A random DAG-like graph: each node but the first takes a random number
/// of parents (mean `degree`) among the `reach` nodes before it (all of
/// them when `reach` is `None`: the worst case for cache reuse; a real
/// DAG's parents are its window's nodes, a few hundred ids away).
fn dag(rng: &mut StdRng, nodes: usize, degree: usize, reach: Option<usize>) -> PropagationGraph {
    let mut edges = Vec::with_capacity(nodes * degree);
    for to in 1..nodes {
        let first = reach.map_or(0, |reach| to.saturating_sub(reach));
        for _ in 0..rng.random_range(0..=2 * degree) {
            edges.push((
                rng.random_range(first..to) as u32,
                to as u32,
                rng.random::<f32>() / degree as f32,
            ));
        }
    }
    PropagationGraph::from_edges(nodes, edges)
}

fn propagation(gpu: &Gpu, copy: f64) {
    let mut rng = StdRng::seed_from_u64(7);
    let steps = 3;
    println!(
        "propagation, {steps} steps: ms per call | GB/s (of copy) | GFLOP/s | × CPU | one step vs cuSPARSE SpMM"
    );
    for (nodes, degree, reach) in [
        (100_000, 10, None),
        (1_000_000, 10, None),
        (250_000, 40, None),
        (1_000_000, 10, Some(512)),
    ] {
        let graph = dag(&mut rng, nodes, degree, reach);
        if let Some(reach) = reach {
            println!("  parents among the {reach} nodes before each node:");
        }
        let device = gpu.upload(&graph).expect("upload");
        let spmm = Spmm::new(gpu, &graph);
        for batch in [1usize, 8, 32, 128, 256] {
            let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random()).collect();
            let on_device = device.upload_seeds(&seeds, batch).expect("seeds");
            let options = PropagateOptions { steps, alpha: 0.5 };
            let ms = device_ms(gpu, 10, || {
                device
                    .propagate_device(&on_device, batch, options)
                    .expect("propagate");
            });
            let one_step = PropagateOptions {
                steps: 1,
                alpha: 0.5,
            };
            let step_ms = device_ms(gpu, 10, || {
                device
                    .propagate_device(&on_device, batch, one_step)
                    .expect("propagate");
            });
            let spmm_ms = spmm.time(gpu, &on_device, batch);
            let cpu_ms = wall_ms(1, || {
                propagate::propagate(&graph, &seeds, batch, options);
            });
            let edges = graph.edges() as f64;
            let scores = (nodes * batch) as f64;
            let bytes =
                steps as f64 * ((nodes + 1) as f64 * 4.0 + edges * 8.0 + 3.0 * scores * 4.0);
            let gbs = bytes / (ms * 1e-3) / 1e9;
            let gflops = steps as f64 * 2.0 * edges * batch as f64 / (ms * 1e-3) / 1e9;
            println!(
                "  N {nodes:>9}, E {:>9}, B {batch:>3}: {ms:>9.3} ms | {gbs:>6.0} GB/s ({:>3.0}%) | {gflops:>7.1} | {:>7.1}× | {step_ms:.3} vs {spmm_ms:.3} ms ({:.2}×)",
                graph.edges(),
                100.0 * gbs / copy,
                cpu_ms / ms,
                spmm_ms / step_ms
            );
        }
    }
    println!();
}

/// The small-batch kernel (B < 32) with each lane count per node, one step,
/// on graphs of mean in-degree 10 and 40, parents anywhere or local.
fn lanes_per_node(gpu: &Gpu) {
    let mut rng = StdRng::seed_from_u64(17);
    println!(
        "small batches, one step, ms by lanes per node (default: mean in-degree over 4 for B = 1, over 2 above, rounded up to a power of two)"
    );
    let one_step = PropagateOptions {
        steps: 1,
        alpha: 0.5,
    };
    for (nodes, degree, reach) in [
        (1_000_000, 10, None),
        (1_000_000, 10, Some(512)),
        (250_000, 40, None),
    ] {
        let graph = dag(&mut rng, nodes, degree, reach);
        for batch in [1usize, 8] {
            let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random()).collect();
            let times: Vec<String> = [1u32, 2, 4, 8, 16, 32]
                .into_iter()
                .map(|lanes| {
                    let device = gpu
                        .upload(&graph)
                        .and_then(|device| device.with_lanes_per_node(lanes))
                        .expect("upload");
                    let on_device = device.upload_seeds(&seeds, batch).expect("seeds");
                    let ms = device_ms(gpu, 10, || {
                        device
                            .propagate_device(&on_device, batch, one_step)
                            .expect("propagate");
                    });
                    format!("{lanes}: {ms:.3}")
                })
                .collect();
            println!(
                "  N {nodes:>8}, degree {degree}, {}, B {batch}: {}",
                reach.map_or("parents anywhere".to_owned(), |r| format!(
                    "parents within {r}"
                )),
                times.join(" | ")
            );
        }
    }
    println!();
}

/// cuSPARSE SpMM on the target-grouped CSR (the graph's transpose): C = A·B
/// with B and C the N × batch node-major scores.
struct Spmm {
    handle: cs::cusparseHandle_t,
    matrix: cs::cusparseSpMatDescr_t,
    nodes: usize,
    // The CSR arrays the descriptor points into.
    _arrays: (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<f32>),
}

impl Spmm {
    fn new(gpu: &Gpu, graph: &PropagationGraph) -> Spmm {
        let stream = gpu.stream();
        let as_i32 = |v: &[u32]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
        let offsets = stream.clone_htod(&as_i32(&graph.offsets)).expect("upload");
        let columns = stream.clone_htod(&as_i32(&graph.parents)).expect("upload");
        let values = stream.clone_htod(&graph.weights).expect("upload");
        let handle = cudarc::cusparse::result::create().expect("cusparse");
        let mut matrix = std::ptr::null_mut();
        let n = graph.nodes() as i64;
        // SAFETY: the handle and the CSR arrays live as long as `Spmm`.
        unsafe {
            cs::cusparseSetStream(handle, stream.cu_stream() as cs::cudaStream_t)
                .result()
                .expect("stream");
            cs::cusparseCreateCsr(
                &mut matrix,
                n,
                n,
                graph.edges() as i64,
                pointer(gpu, &offsets),
                pointer(gpu, &columns),
                pointer(gpu, &values),
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                cs::cudaDataType::CUDA_R_32F,
            )
            .result()
            .expect("csr");
        }
        Spmm {
            handle,
            matrix,
            nodes: graph.nodes(),
            _arrays: (offsets, columns, values),
        }
    }

    /// Median ms of one SpMM of the graph with `scores` (N × batch).
    fn time(&self, gpu: &Gpu, scores: &CudaSlice<f32>, batch: usize) -> f64 {
        let stream = gpu.stream();
        let output = stream
            .alloc_zeros::<f32>(self.nodes * batch)
            .expect("alloc");
        let dense = |buffer: &CudaSlice<f32>| {
            let mut descriptor = std::ptr::null_mut();
            let (rows, columns) = (self.nodes as i64, batch as i64);
            // SAFETY: `buffer` holds rows × columns floats, row-major.
            unsafe {
                cs::cusparseCreateDnMat(
                    &mut descriptor,
                    rows,
                    columns,
                    columns,
                    pointer(gpu, buffer),
                    cs::cudaDataType::CUDA_R_32F,
                    cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                )
                .result()
                .expect("dense");
            }
            descriptor
        };
        let (b, c) = (dense(scores), dense(&output));
        let (one, zero) = (1.0f32, 0.0f32);
        let op = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        let algorithm = cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT;
        let mut size = 0usize;
        // SAFETY: descriptors and scalars outlive the calls; the work buffer
        // is as large as cuSPARSE asks.
        unsafe {
            cs::cusparseSpMM_bufferSize(
                self.handle,
                op,
                op,
                (&one as *const f32).cast(),
                self.matrix,
                b,
                (&zero as *const f32).cast(),
                c,
                cs::cudaDataType::CUDA_R_32F,
                algorithm,
                &mut size,
            )
            .result()
            .expect("buffer size");
        }
        let work = stream.alloc_zeros::<u8>(size.max(1)).expect("alloc");
        let ms = device_ms(gpu, 10, || {
            // SAFETY: as above.
            unsafe {
                cs::cusparseSpMM(
                    self.handle,
                    op,
                    op,
                    (&one as *const f32).cast(),
                    self.matrix,
                    b,
                    (&zero as *const f32).cast(),
                    c,
                    cs::cudaDataType::CUDA_R_32F,
                    algorithm,
                    pointer(gpu, &work),
                )
                .result()
                .expect("spmm");
            }
        });
        // SAFETY: the descriptors are no longer used.
        unsafe {
            cs::cusparseDestroyDnMat(b).result().expect("destroy");
            cs::cusparseDestroyDnMat(c).result().expect("destroy");
        }
        ms
    }
}

impl Drop for Spmm {
    fn drop(&mut self) {
        // SAFETY: created in `new`, used by no one else.
        unsafe {
            cs::cusparseDestroySpMat(self.matrix);
            cs::cusparseDestroy(self.handle);
        }
    }
}

/// The raw device address of a buffer, for cuSPARSE.
fn pointer<T>(gpu: &Gpu, buffer: &CudaSlice<T>) -> *mut c_void {
    let (address, _record) = buffer.device_ptr(gpu.stream());
    address as *mut c_void
}

/// Fused attention against materialise-then-aggregate and the CPU at
/// [`ATTENTION_SHAPES`], printed and returned as report rows.
fn attention(gpu: &Gpu) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut rng = StdRng::seed_from_u64(11);
    let dimension = 64;
    println!(
        "attention, d = {dimension}, nodes of 64 tokens: ms | fused GFLOP/s | materialised | CPU"
    );
    for (windows, tokens) in ATTENTION_SHAPES {
        let segments = Segments::from_lengths(std::iter::repeat_n(64, tokens as usize / 64));
        let vectors: Vec<(Vec<f32>, Vec<f32>)> = (0..windows)
            .map(|_| {
                let mut random = || {
                    (0..tokens as usize * dimension)
                        .map(|_| rng.random_range(-1.0..1.0))
                        .collect()
                };
                (random(), random())
            })
            .collect();
        let batch: Vec<VectorWindow> = vectors
            .iter()
            .map(|(queries, keys)| VectorWindow {
                queries,
                keys,
                dimension,
                query_segments: &segments,
                key_segments: &segments,
            })
            .collect();
        let fused = wall_ms(5, || {
            gpu.vector_attention(&batch).expect("fused");
        });
        let materialised = wall_ms(5, || {
            gpu.materialised_attention(&batch).expect("materialised");
        });
        let cpu = wall_ms(1, || {
            aggregate::vector_attention_batch(&batch);
        });
        let flops = 2.0 * windows as f64 * (tokens as f64).powi(2) * dimension as f64;
        println!(
            "  {windows:>2} × {tokens:>4}²: fused {fused:>9.3} ms ({:>6.0} GFLOP/s) | materialised {materialised:>9.3} ms ({:.1}× the fused) | CPU {cpu:>10.1} ms ({:.0}× the fused)",
            flops / (fused * 1e-3) / 1e9,
            materialised / fused,
            cpu / fused
        );
        rows.push(attention_row(
            windows,
            tokens,
            Some((fused, materialised, cpu)),
            "measured",
        ));
    }
    rows
}

/// One row of a crossover sweep: the work, the CPU's and the GPU's median
/// whole-call times.
struct Crossing {
    work: usize,
    cpu_ms: f64,
    gpu_ms: f64,
}

/// Prints a sweep and the smallest work from which the GPU wins at every
/// larger size measured.
fn report(what: &str, threshold: usize, rows: &[Crossing]) {
    for row in rows {
        println!(
            "  {what} work {:>10} (2^{:<2}): CPU {:>9.3} ms | GPU {:>9.3} ms ({:.2}×)",
            row.work,
            row.work.ilog2(),
            row.cpu_ms,
            row.gpu_ms,
            row.cpu_ms / row.gpu_ms
        );
    }
    let from = rows
        .iter()
        .rposition(|row| row.gpu_ms >= row.cpu_ms)
        .map_or(Some(0), |last_loss| {
            (last_loss + 1 < rows.len()).then_some(last_loss + 1)
        });
    match from {
        Some(at) => println!(
            "  {what}: the GPU wins from work 2^{} (threshold now 2^{})",
            rows[at].work.ilog2(),
            threshold.ilog2()
        ),
        None => println!(
            "  {what}: the GPU never wins up to 2^{} (threshold now 2^{})",
            rows.last().map_or(0, |row| row.work.ilog2()),
            threshold.ilog2()
        ),
    }
}

fn crossover(gpu: &Gpu) {
    let mut rng = StdRng::seed_from_u64(13);
    println!("\nCPU/GPU crossover, whole calls (uploads and downloads included), CPU on all cores");
    let options = PropagateOptions {
        steps: 3,
        alpha: 0.5,
    };
    for batch in [1usize, 16] {
        let rows: Vec<Crossing> = (14..=26)
            .step_by(2)
            .map(|shift| {
                let work = 1usize << shift;
                let nodes = (work / batch / 10).max(16);
                let graph = dag(&mut rng, nodes, 10, None);
                let seeds: Vec<f32> = (0..nodes * batch).map(|_| rng.random()).collect();
                let cpu_ms = wall_ms(5, || {
                    let scores = propagate::propagate(&graph, &seeds, batch, options);
                    propagate::top_k(&scores, batch, 10);
                });
                let gpu_ms = wall_ms(5, || {
                    gpu.propagate_top_k(&graph, &seeds, batch, options, 10)
                        .expect("propagate");
                });
                Crossing {
                    work: graph.edges() * batch,
                    cpu_ms,
                    gpu_ms,
                }
            })
            .collect();
        report(
            &format!("propagation, B {batch:>2},"),
            GPU_MIN_PROPAGATION_WORK,
            &rows,
        );
    }
    let dimension = 64;
    let rows: Vec<Crossing> = [32u32, 64, 128, 256, 512, 1024, 2048]
        .into_iter()
        .map(|tokens| {
            let segments = Segments::from_lengths(std::iter::repeat_n(32, tokens as usize / 32));
            let mut random = || -> Vec<f32> {
                (0..tokens as usize * dimension)
                    .map(|_| rng.random_range(-1.0..1.0))
                    .collect()
            };
            let (queries, keys) = (random(), random());
            let window = VectorWindow {
                queries: &queries,
                keys: &keys,
                dimension,
                query_segments: &segments,
                key_segments: &segments,
            };
            let windows = std::slice::from_ref(&window);
            Crossing {
                work: queries.len() * tokens as usize,
                cpu_ms: wall_ms(5, || {
                    aggregate::vector_attention_batch(windows);
                }),
                gpu_ms: wall_ms(5, || {
                    gpu.vector_attention(windows).expect("fused");
                }),
            }
        })
        .collect();
    report("attention, d 64,", GPU_MIN_ATTENTION_WORK, &rows);
    let rows: Vec<Crossing> = [128u32, 256, 512, 1024, 2048, 4096]
        .into_iter()
        .map(|tokens| {
            let segments = Segments::from_lengths(std::iter::repeat_n(32, tokens as usize / 32));
            let attention: Vec<f32> = (0..(tokens as usize).pow(2))
                .map(|_| rng.random::<f32>() / tokens as f32)
                .collect();
            let window = AttentionWindow {
                attention: &attention,
                query_tokens: tokens as usize,
                key_tokens: tokens as usize,
                query_segments: &segments,
                key_segments: &segments,
            };
            let windows = std::slice::from_ref(&window);
            Crossing {
                work: attention.len(),
                cpu_ms: wall_ms(5, || {
                    aggregate::segment_mean_batch(windows);
                }),
                gpu_ms: wall_ms(5, || {
                    gpu.segment_mean(windows).expect("segment mean");
                }),
            }
        })
        .collect();
    report("segment mean,", GPU_MIN_SEGMENT_MEAN_WORK, &rows);
}
