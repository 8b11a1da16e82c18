//! The CUDA context: the [`Gpu`] handle, NVRTC compilation of the kernels,
//! and the [`Backend`] that runs the host code's launches on it.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, LaunchArgs,
    LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use crate::compute::gpu::backend::{self, Backend, Element, Kernel, THREADS};
use crate::error::{Error, Result};

/// Source of the attention-aggregation kernels.
const ATTENTION_SOURCE: &str = include_str!("../../../kernels/attention_aggregate.cu");
/// Source of the propagation and top-k kernels.
const PROPAGATE_SOURCE: &str = include_str!("../../../kernels/propagate.cu");

/// An open CUDA device with the kernels compiled and loaded.
#[derive(Debug)]
pub struct Gpu {
    stream: Arc<CudaStream>,
    name: String,
    kernels: Kernels,
}

/// The loaded kernels, by their `extern "C"` names.
#[derive(Debug)]
struct Kernels {
    segment_mean: CudaFunction,
    fused_attention: CudaFunction,
    sum_query_tiles: CudaFunction,
    softmax_rows: CudaFunction,
    propagate_batch: CudaFunction,
    propagate_edges: CudaFunction,
    top_k: CudaFunction,
}

impl Kernels {
    fn get(&self, kernel: Kernel) -> &CudaFunction {
        match kernel {
            Kernel::SegmentMean => &self.segment_mean,
            Kernel::FusedAttention => &self.fused_attention,
            Kernel::SumQueryTiles => &self.sum_query_tiles,
            Kernel::SoftmaxRows => &self.softmax_rows,
            Kernel::PropagateBatch => &self.propagate_batch,
            Kernel::PropagateEdges => &self.propagate_edges,
            Kernel::TopK => &self.top_k,
        }
    }
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
        Gpu::libraries()?;
        // cudarc panics when a symbol is missing from an old library; turn
        // that into an error too.
        crate::error::catch_quietly(Gpu::open_present)
            .unwrap_or_else(|_| Err("the CUDA libraries do not match cudarc's CUDA 13 API".into()))
    }

    fn open_present() -> std::result::Result<Gpu, String> {
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

    /// Whether the CUDA driver library and NVRTC load (cheap: nothing is
    /// initialised); `Err` says which is missing.
    pub fn libraries() -> std::result::Result<(), String> {
        // SAFETY: only tries to dlopen the library's candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver library (libcuda) found".into());
        }
        if !nvrtc_present() {
            return Err("no NVRTC library (libnvrtc) found".into());
        }
        Ok(())
    }

    /// The stream every call runs on, for callers that time or stage their
    /// own device work (the benches).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl Backend for Gpu {
    type Buffer<T: Element> = CudaSlice<T>;
    type Launch<'a> = CudaLaunch<'a>;

    fn to_device<T: Element>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        let result = if data.is_empty() {
            self.stream.clone_htod(&[T::default()])
        } else {
            self.stream.clone_htod(data)
        };
        result.map_err(gpu_error("upload"))
    }

    fn poisoned<T: Element>(&self, len: usize, poison: u32) -> Result<CudaSlice<T>> {
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

    fn scratch(&self, len: usize) -> Result<CudaSlice<f32>> {
        // SAFETY: callers write every element before reading it (the
        // trait's contract).
        unsafe { self.stream.alloc::<f32>(len.max(1)) }.map_err(gpu_error("alloc"))
    }

    fn write_at(&self, buffer: &mut CudaSlice<f32>, offset: usize, data: &[f32]) -> Result<()> {
        self.stream
            .memcpy_htod(data, &mut buffer.slice_mut(offset..offset + data.len()))
            .map_err(gpu_error("upload"))
    }

    fn duplicate(&self, buffer: &CudaSlice<f32>) -> Result<CudaSlice<f32>> {
        self.stream.clone_dtod(buffer).map_err(gpu_error("copy"))
    }

    fn download<T: Element>(&self, buffer: &CudaSlice<T>) -> Result<Vec<T>> {
        let host = self
            .stream
            .clone_dtoh(buffer)
            .map_err(gpu_error("download"))?;
        self.stream.synchronize().map_err(gpu_error("kernel"))?;
        Ok(host)
    }

    fn launcher(&self, kernel: Kernel) -> CudaLaunch<'_> {
        CudaLaunch {
            kernel,
            args: self.stream.launch_builder(self.kernels.get(kernel)),
        }
    }
}

/// A launch on the GPU being gathered (cudarc's builder).
pub struct CudaLaunch<'a> {
    kernel: Kernel,
    args: LaunchArgs<'a>,
}

impl<'a> backend::Launch<'a, Gpu> for CudaLaunch<'a> {
    fn buffer<T: Element>(&mut self, buffer: &'a CudaSlice<T>) -> &mut Self {
        self.args.arg(buffer);
        self
    }

    fn value<T: Element>(&mut self, value: &'a T) -> &mut Self {
        self.args.arg(value);
        self
    }

    unsafe fn launch(&mut self, blocks: usize, shared_bytes: u32) -> Result<()> {
        let config = LaunchConfig {
            grid_dim: (backend::grid_blocks(blocks)?, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: shared_bytes,
        };
        // SAFETY: the caller's contract (arguments match the kernel).
        unsafe { self.args.launch(config) }
            .map(drop)
            .map_err(gpu_error(self.kernel.name()))
    }
}

/// Maps a CUDA error to [`Error::Gpu`], naming the step that failed.
fn gpu_error<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Gpu(format!("{what}: {e}"))
}
