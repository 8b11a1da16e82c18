//! CUDA implementations of the batched arithmetic (built with the `cuda`
//! feature): attention aggregation ([`Gpu::segment_mean`],
//! [`Gpu::vector_attention`]) and score propagation ([`Gpu::upload`],
//! [`DeviceGraph`]). The kernels are `kernels/*.cu`, compiled with NVRTC
//! when a [`Gpu`] opens; the CPU references in [`crate::dag`] are their
//! oracles. Nothing here panics or prints when CUDA is missing:
//! [`Gpu::open`] says why, and [`crate::compute::device::Device`] falls back to the
//! CPU.

mod attention;
mod propagate;
mod runtime;

pub use propagate::{DeviceGraph, TOP_K_MAX};
pub use runtime::{Gpu, compile, nvrtc_present};
