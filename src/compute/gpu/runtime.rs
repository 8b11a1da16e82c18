//! The CUDA context: the [`Gpu`] handle, NVRTC compilation of the kernels,
//! launch geometry and error mapping.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr,
    LaunchConfig, sys,
};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use crate::error::{Error, Result};

/// Source of the attention-aggregation kernels.
const ATTENTION_SOURCE: &str = include_str!("../../../kernels/attention_aggregate.cu");
/// Source of the propagation and top-k kernels.
const PROPAGATE_SOURCE: &str = include_str!("../../../kernels/propagate.cu");

/// Threads per block of every launch (the kernels' layouts assume 256).
pub(super) const THREADS: u32 = 256;

/// An open CUDA device with the kernels compiled and loaded.
#[derive(Debug)]
pub struct Gpu {
    pub(super) stream: Arc<CudaStream>,
    pub(super) name: String,
    pub(super) kernels: Kernels,
}

/// The loaded kernels, by their `extern "C"` names.
#[derive(Debug)]
pub(super) struct Kernels {
    pub(super) segment_mean: CudaFunction,
    pub(super) fused_attention: CudaFunction,
    pub(super) sum_query_tiles: CudaFunction,
    pub(super) softmax_rows: CudaFunction,
    pub(super) propagate_batch: CudaFunction,
    pub(super) propagate_edges: CudaFunction,
    pub(super) top_k: CudaFunction,
}

/// Whether the NVRTC library can be loaded (no GPU or driver needed).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library's candidate names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles both kernel sources to PTX for a virtual architecture such as
/// `compute_90`; the error holds NVRTC's log. Needs NVRTC, not a GPU.
pub fn compile(arch: &str) -> std::result::Result<[Ptx; 2], String> {
    let one = |name: &str, source: &str| {
        let options = CompileOptions {
            name: Some(name.to_owned()),
            options: vec![format!("--gpu-architecture={arch}")],
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(source, options).map_err(|e| match e {
            CompileError::CompileError { log, .. } => {
                format!("{name} ({arch}): {}", log.to_string_lossy())
            }
            other => format!("{name} ({arch}): {other}"),
        })
    };
    Ok([
        one("attention_aggregate.cu", ATTENTION_SOURCE)?,
        one("propagate.cu", PROPAGATE_SOURCE)?,
    ])
}

impl Gpu {
    /// Opens device 0 and compiles the kernels for it. Fails, without
    /// panicking, when the driver, NVRTC or a device is missing or the
    /// kernels do not build; the message says which.
    pub fn open() -> std::result::Result<Gpu, String> {
        // SAFETY: only tries to dlopen the library's candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver library (libcuda) found".into());
        }
        if !nvrtc_present() {
            return Err("no NVRTC library (libnvrtc) found".into());
        }
        // cudarc panics when a symbol is missing from an old library; turn
        // that into an error too.
        std::panic::catch_unwind(Gpu::open_present)
            .unwrap_or_else(|_| Err("the CUDA libraries do not match cudarc's CUDA 13 API".into()))
    }

    pub(super) fn open_present() -> std::result::Result<Gpu, String> {
        let count = CudaContext::device_count().map_err(|e| format!("CUDA init: {e}"))?;
        if count < 1 {
            return Err("no CUDA device".into());
        }
        let context = CudaContext::new(0).map_err(|e| format!("CUDA context: {e}"))?;
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| format!("compute capability: {e}"))?;
        let name = context.name().map_err(|e| format!("device name: {e}"))?;
        let [attention, propagate] = compile(&format!("compute_{major}{minor}"))?;
        let load = |ptx: Ptx| {
            context
                .load_module(ptx)
                .map_err(|e| format!("loading kernels: {e}"))
        };
        let (attention, propagate) = (load(attention)?, load(propagate)?);
        let function = |module: &Arc<CudaModule>, name: &str| {
            module
                .load_function(name)
                .map_err(|e| format!("kernel {name}: {e}"))
        };
        let kernels = Kernels {
            segment_mean: function(&attention, "segment_mean")?,
            fused_attention: function(&attention, "fused_attention")?,
            sum_query_tiles: function(&attention, "sum_query_tiles")?,
            softmax_rows: function(&attention, "softmax_rows")?,
            propagate_batch: function(&propagate, "propagate_batch")?,
            propagate_edges: function(&propagate, "propagate_edges")?,
            top_k: function(&propagate, "top_k")?,
        };
        Ok(Gpu {
            stream: context.default_stream(),
            name: format!("{name} (sm_{major}{minor})"),
            kernels,
        })
    }

    /// The device's name and compute capability.
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// The stream every call runs on, for callers that time or stage their
    /// own device work (the benches).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Copies `data` to a new device buffer (of one default element when
    /// `data` is empty, since CUDA allocates no empty buffers).
    pub(super) fn to_device<T: DeviceRepr + Default + Clone>(
        &self,
        data: &[T],
    ) -> Result<CudaSlice<T>> {
        let result = if data.is_empty() {
            self.stream.clone_htod(&[T::default()])
        } else {
            self.stream.clone_htod(data)
        };
        result.map_err(gpu_error("upload"))
    }

    /// A device buffer of `len` 4-byte elements (at least one), every
    /// element set to the bit pattern `poison`, so that an element no kernel
    /// writes shows up (NaN for scores) instead of passing as stale data.
    pub(super) fn poisoned<T: DeviceRepr>(&self, len: usize, poison: u32) -> Result<CudaSlice<T>> {
        debug_assert_eq!(std::mem::size_of::<T>(), 4);
        let len = len.max(1);
        // SAFETY: every element is set by the memset below before any use.
        let mut buffer = unsafe { self.stream.alloc::<T>(len) }.map_err(gpu_error("alloc"))?;
        {
            let (pointer, _record) = buffer.device_ptr_mut(&self.stream);
            // SAFETY: `pointer` addresses `len` 4-byte elements.
            unsafe { sys::cuMemsetD32Async(pointer, poison, len, self.stream.cu_stream()) }
                .result()
                .map_err(gpu_error("memset"))?;
        }
        Ok(buffer)
    }

    /// Copies a device buffer back to the host, waiting for the stream: any
    /// failure of the kernels before it surfaces here.
    pub(super) fn download<T: DeviceRepr>(&self, buffer: &CudaSlice<T>) -> Result<Vec<T>> {
        let host = self
            .stream
            .clone_dtoh(buffer)
            .map_err(gpu_error("download"))?;
        self.stream.synchronize().map_err(gpu_error("kernel"))?;
        Ok(host)
    }
}

/// A launch of `blocks` blocks of [`THREADS`] threads; fails when the grid
/// would be too large for one launch.
pub(super) fn grid(blocks: usize, shared_mem_bytes: u32) -> Result<LaunchConfig> {
    let blocks = u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| Error::Gpu(format!("{blocks} blocks are too many for one launch")))?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes,
    })
}

/// Maps a CUDA error to [`Error::Gpu`], naming the step that failed.
pub(super) fn gpu_error<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Gpu(format!("{what}: {e}"))
}
