//! Which device runs the batched arithmetic (attention aggregation at
//! ingest, score propagation at query time): the CPU reference
//! implementations in [`crate::compute::aggregate`] and
//! [`crate::compute::propagate`], or CUDA kernels when the crate is
//! built with the `cuda` feature and a GPU with its driver and NVRTC is
//! present at run time.
//!
//! [`Device::detect`] decides once and logs one line saying which device
//! serves and why. `EDUDB_DEVICE=cpu` forces the CPU. Inputs smaller than
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
    /// A CUDA GPU through cudarc; small inputs still run on the CPU.
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::compute::gpu::Gpu>),
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
        match crate::compute::gpu::Gpu::open() {
            Ok(gpu) => {
                tracing::info!("batched arithmetic runs on the GPU: {}", gpu.name());
                Device::Cuda(Arc::new(gpu))
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

    /// A short name for EXPLAIN and logs: `cpu` or `cuda:<GPU name>`.
    pub fn name(&self) -> String {
        match self {
            Device::Cpu => "cpu".to_owned(),
            #[cfg(feature = "cuda")]
            Device::Cuda(gpu) => format!("cuda:{}", gpu.name()),
        }
    }

    /// Segment means of given attention matrices (see
    /// [`aggregate::segment_mean`]).
    pub fn segment_mean(&self, windows: &[AttentionWindow]) -> Result<Vec<NodeWeights>> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(gpu) = self {
            let work: usize = windows.iter().map(|w| w.attention.len()).sum();
            if work >= GPU_MIN_SEGMENT_MEAN_WORK
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
        if let Device::Cuda(gpu) = self {
            let work: usize = windows
                .iter()
                .map(|w| w.queries.len() * w.key_tokens())
                .sum();
            if work >= GPU_MIN_ATTENTION_WORK
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
            Device::Cuda(gpu) if graph.edges() * batch >= GPU_MIN_PROPAGATION_WORK => Some(gpu),
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
