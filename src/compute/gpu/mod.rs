//! The CUDA kernels' host side: attention aggregation
//! ([`KernelDevice::segment_mean`], [`KernelDevice::vector_attention`]) and
//! score propagation ([`KernelDevice::upload`], [`DeviceGraph`]), over
//! either device that runs `kernels/*.cu`:
//!
//! - `Gpu` (feature `cuda`): a CUDA GPU, the kernels compiled with NVRTC
//!   when it opens. Nothing here panics or prints when CUDA is missing:
//!   `Gpu::open` says why, and [`crate::compute::device::Device`] falls
//!   back to the CPU.
//! - `Emulator` (feature `kernel-emulation`, tests only): the same sources
//!   run on the CPU by the HIP CPU Runtime.
//!
//! The CPU references in [`crate::compute::aggregate`] and
//! [`crate::compute::propagate`] are the oracles of both.

mod attention;
mod backend;
#[cfg(feature = "kernel-emulation")]
mod emulator;
mod propagate;
#[cfg(feature = "cuda")]
mod runtime;

use crate::compute::aggregate::{AttentionWindow, NodeWeights, VectorWindow};
use crate::compute::propagate::{PropagateOptions, PropagationGraph};
use crate::error::Result;

#[cfg(feature = "kernel-emulation")]
pub use emulator::Emulator;
pub use propagate::{DeviceGraph, TOP_K_MAX};
#[cfg(feature = "cuda")]
pub use runtime::{Gpu, compile, nvrtc_present};

/// A device that runs the kernels: the batched operations, each the kernel
/// form of a CPU reference.
pub trait KernelDevice: backend::Backend + Sized {
    /// Segment means of given attention matrices, all windows in one
    /// launch (the kernel form of
    /// [`crate::compute::aggregate::segment_mean`]).
    fn segment_mean(&self, windows: &[AttentionWindow]) -> Result<Vec<NodeWeights>> {
        attention::segment_mean(self, windows)
    }

    /// Attention from token vectors aggregated to node level by the fused
    /// online-softmax kernel (the kernel form of
    /// [`crate::compute::aggregate::vector_attention`]); the token-level
    /// matrix never reaches device memory.
    fn vector_attention(&self, windows: &[VectorWindow]) -> Result<Vec<NodeWeights>> {
        attention::vector_attention(self, windows)
    }

    /// The same weights as [`KernelDevice::vector_attention`], with each
    /// window's softmax matrix materialised and then aggregated: the
    /// baseline the fused kernel is measured against, and a check of it.
    fn materialised_attention(&self, windows: &[VectorWindow]) -> Result<Vec<NodeWeights>> {
        attention::materialised_attention(self, windows)
    }

    /// Checks `graph` and copies it to the device for [`DeviceGraph`]'s
    /// batches.
    fn upload(&self, graph: &PropagationGraph) -> Result<DeviceGraph<'_, Self>> {
        propagate::upload(self, graph)
    }

    /// [`crate::compute::propagate::propagate`] on the device: uploads
    /// `graph`, runs, and returns the node-major `N × batch` scores.
    fn propagate(
        &self,
        graph: &PropagationGraph,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
    ) -> Result<Vec<f32>> {
        self.upload(graph)?.propagate(seeds, batch, options)
    }

    /// Propagates on the device and keeps each query's `k` best nodes (see
    /// [`DeviceGraph::propagate_top_k`]).
    fn propagate_top_k(
        &self,
        graph: &PropagationGraph,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        self.upload(graph)?
            .propagate_top_k(seeds, batch, options, k)
    }
}

impl<B: backend::Backend> KernelDevice for B {}
