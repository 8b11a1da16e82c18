//! Which device runs the batched arithmetic (attention aggregation at
//! ingest, score propagation at query time): the CPU reference
//! implementations in [`crate::compute::aggregate`] and
//! [`crate::compute::propagate`], or CUDA kernels when the crate is
//! built with the `cuda` feature and a GPU with its driver and NVRTC is
//! present at run time.
//!
//! [`Device::detect`] decides once and logs one line saying which device
//! serves and why: a GPU when the CUDA driver and NVRTC load. The GPU is
//! opened (its context made, the kernels compiled with NVRTC: about a
//! quarter of a second) only when an input first crosses a threshold, so
//! a command whose work stays small never pays for it.
//! `EDUDB_DEVICE=cpu` forces the CPU. Inputs smaller than
//! a threshold stay on the CPU even with a GPU, where the launch and copy
//! overhead would cost more than the arithmetic (the thresholds are the
//! crossovers `benches/gpu.rs` measured on an H200 against 16 CPU cores;
//! docs/benchmarks.md). The
//! GPU is never required: failing to find or start it, or a failure while
//! it runs (out of memory, a kernel fault; logged), falls back to the CPU.

#[cfg(feature = "cuda")]
use std::sync::Arc;

#[cfg(feature = "cuda")]
use crate::compute::gpu::KernelDevice;

use crate::compute::aggregate::{self, AttentionWindow, NodeWeights, VectorWindow};
use crate::compute::propagate::{self, PropagateOptions, PropagationGraph};
use crate::error::Result;

/// Below this many multiply-adds (query tokens × key tokens × dimension)
/// a batch of attention windows from token vectors runs on the CPU.
pub const GPU_MIN_ATTENTION_WORK: usize = 1 << 20;
/// Below this many attention entries a batch of given attention matrices
/// is aggregated on the CPU.
pub const GPU_MIN_SEGMENT_MEAN_WORK: usize = 1 << 18;
/// Below this many edge × query products a propagation runs on the CPU.
pub const GPU_MIN_PROPAGATION_WORK: usize = 1 << 16;

/// A GPU result, or `None` (logged) when the GPU failed at run time (out
/// of memory, a kernel fault), so the caller computes it on the CPU.
/// Malformed input is returned as the error it is.
#[cfg(feature = "cuda")]
fn served<T>(result: Result<T>) -> Option<Result<T>> {
    match result {
        Err(crate::error::Error::Gpu(why)) => {
            tracing::warn!("GPU failed ({why}); computing on the CPU instead");
            None
        }
        other => Some(other),
    }
}

/// Where batched arithmetic runs.
#[derive(Debug, Clone)]
pub enum Device {
    /// The CPU reference implementations, on all cores.
    Cpu,
    /// A CUDA GPU through cudarc, opened on first use; small inputs still
    /// run on the CPU.
    #[cfg(feature = "cuda")]
    Cuda(Arc<LazyGpu>),
}

/// A GPU whose libraries load, opened the first time an input is large
/// enough for it; one that fails to open is logged once and the CPU serves
/// instead.
#[cfg(feature = "cuda")]
#[derive(Debug, Default)]
pub struct LazyGpu(std::sync::OnceLock<Option<crate::compute::gpu::Gpu>>);

#[cfg(feature = "cuda")]
impl LazyGpu {
    /// The GPU, opened now if it was not yet; `None` when it cannot open.
    pub fn get(&self) -> Option<&crate::compute::gpu::Gpu> {
        self.0
            .get_or_init(|| match crate::compute::gpu::Gpu::open() {
                Ok(gpu) => {
                    tracing::info!("opened the GPU: {}", gpu.name());
                    Some(gpu)
                }
                Err(why) => {
                    tracing::warn!("the GPU did not open ({why}); computing on the CPU");
                    None
                }
            })
            .as_ref()
    }

    /// The GPU if it is open already.
    fn opened(&self) -> Option<&crate::compute::gpu::Gpu> {
        self.0.get().and_then(Option::as_ref)
    }
}

impl Device {
    /// The best device available: a GPU when built with `cuda` and one
    /// starts (unless `EDUDB_DEVICE=cpu`), else the CPU. Logs which, once
    /// per call.
    pub fn detect() -> Device {
        if std::env::var("EDUDB_DEVICE").is_ok_and(|v| v.eq_ignore_ascii_case("cpu")) {
            tracing::info!("batched arithmetic runs on the CPU (EDUDB_DEVICE=cpu)");
            return Device::Cpu;
        }
        Device::detect_gpu()
    }

    #[cfg(feature = "cuda")]
    fn detect_gpu() -> Device {
        match crate::compute::gpu::Gpu::libraries() {
            Ok(()) => {
                tracing::info!(
                    "batched arithmetic runs on the GPU when large enough (opened on first use)"
                );
                Device::Cuda(Arc::default())
            }
            Err(why) => {
                tracing::info!("batched arithmetic runs on the CPU: no usable GPU ({why})");
                Device::Cpu
            }
        }
    }

    #[cfg(not(feature = "cuda"))]
    fn detect_gpu() -> Device {
        tracing::info!("batched arithmetic runs on the CPU (built without the cuda feature)");
        Device::Cpu
    }

    /// A short name for logs: `cpu`, `cuda:<GPU name>` once the GPU is
    /// open, or `cuda` before.
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_owned(),
            #[cfg(feature = "cuda")]
            Device::Cuda(lazy) => match lazy.opened() {
                Some(gpu) => format!("cuda:{}", gpu.name()),
                None => "cuda".to_owned(),
            },
        }
    }

    /// Segment means of given attention matrices (see
    /// [`aggregate::segment_mean`]).
    pub fn segment_mean(&self, windows: &[AttentionWindow]) -> Result<Vec<NodeWeights>> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(lazy) = self {
            let work: usize = windows.iter().map(|w| w.attention.len()).sum();
            if work >= GPU_MIN_SEGMENT_MEAN_WORK
                && let Some(gpu) = lazy.get()
                && let Some(weights) = served(gpu.segment_mean(windows))
            {
                return weights;
            }
        }
        Ok(aggregate::segment_mean_batch(windows))
    }

    /// Attention from token vectors, aggregated to node level (see
    /// [`aggregate::vector_attention`]).
    pub fn vector_attention(&self, windows: &[VectorWindow]) -> Result<Vec<NodeWeights>> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(lazy) = self {
            let work: usize = windows
                .iter()
                .map(|w| w.queries.len() * w.key_tokens())
                .sum();
            if work >= GPU_MIN_ATTENTION_WORK
                && let Some(gpu) = lazy.get()
                && let Some(weights) = served(gpu.vector_attention(windows))
            {
                return weights;
            }
        }
        Ok(aggregate::vector_attention_batch(windows))
    }

    /// The GPU, when one would serve a propagation of `batch` queries
    /// over `graph` (large enough to beat the launch and copy overhead).
    #[cfg(feature = "cuda")]
    fn gpu_for_propagation(
        &self,
        graph: &PropagationGraph,
        batch: usize,
    ) -> Option<&crate::compute::gpu::Gpu> {
        match self {
            Device::Cuda(lazy) if graph.edges() * batch >= GPU_MIN_PROPAGATION_WORK => lazy.get(),
            _ => None,
        }
    }

    /// Which device a propagation of `batch` queries over `graph` runs on:
    /// `cpu` or `cuda` (for EXPLAIN).
    pub fn propagation_device(&self, graph: &PropagationGraph, batch: usize) -> &'static str {
        #[cfg(feature = "cuda")]
        if self.gpu_for_propagation(graph, batch).is_some() {
            return "cuda";
        }
        let _ = (graph, batch);
        "cpu"
    }

    /// Propagates `batch` node-major score vectors and keeps each query's
    /// `k` best nodes (see [`propagate::propagate`] and [`propagate::top_k`]).
    pub fn propagate_top_k(
        &self,
        graph: &PropagationGraph,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu_for_propagation(graph, batch)
            && let Some(top) = served(gpu.propagate_top_k(graph, seeds, batch, options, k))
        {
            return top;
        }
        let scores = propagate::propagate(graph, seeds, batch, options);
        Ok(propagate::top_k(&scores, batch, k))
    }
}
