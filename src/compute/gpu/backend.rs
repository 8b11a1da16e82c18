//! The seam between the kernels' host code (`attention`, `propagate`) and
//! what runs them: a CUDA GPU (`Gpu`, feature `cuda`) or the CPU
//! emulation of the same kernel sources (`Emulator`, feature
//! `kernel-emulation`). The host code builds the same tables and makes the
//! same launches on both, so the emulation tests it too.
//!
//! Sealed: the traits are public so that [`super::KernelDevice`] can name
//! them, but this module is private, so no other crate implements them.

use crate::error::{Error, Result};

/// Threads per block of every launch (the kernels' layouts assume 256).
pub const THREADS: u32 = 256;

/// The kernels, by their `extern "C"` names; the discriminants are the ids
/// `kernels/emulation/emulate.cpp` dispatches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kernel {
    SegmentMean = 0,
    FusedAttention = 1,
    SumQueryTiles = 2,
    SoftmaxRows = 3,
    PropagateBatch = 4,
    PropagateEdges = 5,
    TopK = 6,
}

impl Kernel {
    /// The kernel's name in `kernels/*.cu`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::SegmentMean => "segment_mean",
            Kernel::FusedAttention => "fused_attention",
            Kernel::SumQueryTiles => "sum_query_tiles",
            Kernel::SoftmaxRows => "softmax_rows",
            Kernel::PropagateBatch => "propagate_batch",
            Kernel::PropagateEdges => "propagate_edges",
            Kernel::TopK => "top_k",
        }
    }
}

/// A type buffers hold and kernels take by value: plain `#[repr(C)]` data
/// laid out as the kernel sources declare it.
///
/// # Safety
/// Implementors are `#[repr(C)]` (or primitive), have no padding the
/// kernels read, and are valid for every bit pattern the kernels write.
#[cfg(feature = "cuda")]
pub unsafe trait Element: cudarc::driver::DeviceRepr + Copy + Default + 'static {}

/// A type buffers hold and kernels take by value: plain `#[repr(C)]` data
/// laid out as the kernel sources declare it.
///
/// # Safety
/// Implementors are `#[repr(C)]` (or primitive), have no padding the
/// kernels read, and are valid for every bit pattern the kernels write.
#[cfg(not(feature = "cuda"))]
pub unsafe trait Element: Copy + Default + 'static {}

// SAFETY: primitives.
unsafe impl Element for f32 {}
// SAFETY: primitives.
unsafe impl Element for u32 {}
// SAFETY: primitives.
unsafe impl Element for i32 {}

/// Memory and launches on one kind of device.
pub trait Backend {
    /// A buffer of `T` in the device's memory.
    type Buffer<T: Element>;
    /// The arguments of one launch being gathered.
    type Launch<'a>: Launch<'a, Self>
    where
        Self: 'a;

    /// A new buffer holding `data` (one default element when `data` is
    /// empty: no buffer is empty).
    fn to_device<T: Element>(&self, data: &[T]) -> Result<Self::Buffer<T>>;

    /// A buffer of `len` (at least one) 4-byte elements, every one set to
    /// the bit pattern `poison`, so that an element no kernel writes shows
    /// up (NaN for scores) instead of passing as stale data.
    fn poisoned<T: Element>(&self, len: usize, poison: u32) -> Result<Self::Buffer<T>>;

    /// A buffer of `len` (at least one) floats whose contents the caller
    /// writes before any read (uninitialised where the device allows).
    fn scratch(&self, len: usize) -> Result<Self::Buffer<f32>>;

    /// Copies `data` into `buffer` at element `offset`.
    fn write_at(&self, buffer: &mut Self::Buffer<f32>, offset: usize, data: &[f32]) -> Result<()>;

    /// A copy of `buffer`.
    fn duplicate(&self, buffer: &Self::Buffer<f32>) -> Result<Self::Buffer<f32>>;

    /// `buffer`'s contents, once every launch before has finished: a kernel
    /// failure surfaces here at the latest.
    fn download<T: Element>(&self, buffer: &Self::Buffer<T>) -> Result<Vec<T>>;

    /// Starts gathering the arguments of a launch of `kernel`.
    fn launcher(&self, kernel: Kernel) -> Self::Launch<'_>;
}

/// The arguments of one kernel launch, in the kernel's parameter order.
pub trait Launch<'a, B: Backend + ?Sized> {
    /// Passes a buffer (the kernel gets its address).
    fn buffer<T: Element>(&mut self, buffer: &'a B::Buffer<T>) -> &mut Self;

    /// Passes a value.
    fn value<T: Element>(&mut self, value: &'a T) -> &mut Self;

    /// Launches `blocks` blocks of [`THREADS`] threads with `shared_bytes`
    /// of dynamic shared memory.
    ///
    /// # Safety
    /// The arguments match the kernel's parameters, and every index the
    /// kernel forms from them stays inside the buffers passed.
    unsafe fn launch(&mut self, blocks: usize, shared_bytes: u32) -> Result<()>;
}

/// `blocks` as a grid dimension, or an error when one launch cannot hold
/// that many blocks.
pub fn grid_blocks(blocks: usize) -> Result<u32> {
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| Error::Gpu(format!("{blocks} blocks are too many for one launch")))
}
