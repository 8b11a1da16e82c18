//! The kernels of `kernels/*.cu` run on the CPU by AMD's HIP CPU Runtime
//! (feature `kernel-emulation`, for tests): the same sources, compiled as
//! C++ through `kernels/emulation/cuda_shim.h` by `build.rs`, with real
//! block and warp semantics (shared memory, barriers, 32-lane shuffles).
//! Slow, and no model of GPU timing; it shows that the kernels compute the
//! right values and stay inside their buffers (run under AddressSanitizer
//! in CI). See kernels/README.md, "Emulation".

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Mutex;

use crate::compute::gpu::backend::{self, Backend, Element, Kernel, THREADS};
use crate::error::{Error, Result};

unsafe extern "C" {
    /// `kernels/emulation/emulate.cpp`: runs `kernel` and waits for it.
    fn edudb_emulate(
        kernel: u32,
        blocks: u32,
        threads: u32,
        shared_bytes: u32,
        args: *const *mut c_void,
    ) -> i32;
}

/// Serialises launches (see [`EmulatedLaunch`]'s `launch`).
static LAUNCHES: Mutex<()> = Mutex::new(());

/// The CPU emulation of the GPU, a kernel device like `Gpu` (feature
/// `cuda`).
#[derive(Debug, Default)]
pub struct Emulator;

impl Emulator {
    /// The emulator (nothing to open or load).
    pub fn new() -> Emulator {
        Emulator
    }

    /// What runs the kernels, for logs and test output.
    pub fn name(&self) -> String {
        "HIP-CPU emulation".to_owned()
    }
}

/// A buffer in host memory that kernels write through raw pointers.
pub struct HostBuffer<T> {
    elements: *mut [T],
}

impl<T: Element> HostBuffer<T> {
    fn from_vec(mut elements: Vec<T>) -> HostBuffer<T> {
        if elements.is_empty() {
            elements.push(T::default());
        }
        HostBuffer {
            elements: Box::into_raw(elements.into_boxed_slice()),
        }
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: `elements` is a live boxed slice; kernels write it only
        // inside `edudb_emulate`, which returns before any read here.
        unsafe { &*self.elements }
    }
}

impl<T> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `elements` came from `Box::into_raw` and is freed once.
        drop(unsafe { Box::from_raw(self.elements) });
    }
}

impl Backend for Emulator {
    type Buffer<T: Element> = HostBuffer<T>;
    type Launch<'a> = EmulatedLaunch<'a>;

    fn to_device<T: Element>(&self, data: &[T]) -> Result<HostBuffer<T>> {
        Ok(HostBuffer::from_vec(data.to_vec()))
    }

    fn poisoned<T: Element>(&self, len: usize, poison: u32) -> Result<HostBuffer<T>> {
        debug_assert_eq!(std::mem::size_of::<T>(), 4);
        let mut value = T::default();
        // SAFETY: `T` is a 4-byte plain-data type (asserted above).
        unsafe { std::ptr::write_unaligned((&raw mut value).cast::<u32>(), poison) };
        Ok(HostBuffer::from_vec(vec![value; len.max(1)]))
    }

    fn scratch(&self, len: usize) -> Result<HostBuffer<f32>> {
        // NaN, so that an element read before it is written shows.
        self.poisoned(len, f32::NAN.to_bits())
    }

    fn write_at(&self, buffer: &mut HostBuffer<f32>, offset: usize, data: &[f32]) -> Result<()> {
        // SAFETY: `&mut` excludes every other access to the buffer.
        let elements = unsafe { &mut *buffer.elements };
        elements
            .get_mut(offset..offset + data.len())
            .ok_or_else(|| Error::Gpu("emulation: a write past the end of a buffer".into()))?
            .copy_from_slice(data);
        Ok(())
    }

    fn duplicate(&self, buffer: &HostBuffer<f32>) -> Result<HostBuffer<f32>> {
        Ok(HostBuffer::from_vec(buffer.as_slice().to_vec()))
    }

    fn download<T: Element>(&self, buffer: &HostBuffer<T>) -> Result<Vec<T>> {
        Ok(buffer.as_slice().to_vec())
    }

    fn launcher(&self, kernel: Kernel) -> EmulatedLaunch<'_> {
        EmulatedLaunch {
            kernel,
            values: Vec::new(),
            borrows: PhantomData,
        }
    }
}

/// A launch being gathered: each argument's value (an address for a
/// buffer), as `edudb_emulate` reads them.
pub struct EmulatedLaunch<'a> {
    kernel: Kernel,
    values: Vec<u64>,
    /// The buffers passed stay borrowed until the launch.
    borrows: PhantomData<&'a ()>,
}

impl<'a> backend::Launch<'a, Emulator> for EmulatedLaunch<'a> {
    fn buffer<T: Element>(&mut self, buffer: &'a HostBuffer<T>) -> &mut Self {
        self.values
            .push(buffer.elements.cast::<T>() as usize as u64);
        self
    }

    fn value<T: Element>(&mut self, value: &'a T) -> &mut Self {
        let mut slot = 0u64;
        debug_assert!(std::mem::size_of::<T>() <= std::mem::size_of::<u64>());
        // SAFETY: `T` is plain data of at most 8 bytes, copied bytewise.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(value).cast::<u8>(),
                (&raw mut slot).cast::<u8>(),
                std::mem::size_of::<T>(),
            )
        };
        self.values.push(slot);
        self
    }

    unsafe fn launch(&mut self, blocks: usize, shared_bytes: u32) -> Result<()> {
        let blocks = backend::grid_blocks(blocks)?;
        let args: Vec<*mut c_void> = self
            .values
            .iter_mut()
            .map(|value| (value as *mut u64).cast::<c_void>())
            .collect();
        // One launch at a time, as on a GPU's single stream: the runtime's
        // queue is not documented as safe for launches from many threads.
        let _one_at_a_time = LAUNCHES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: the caller's contract: the arguments match the kernel's
        // and every index stays inside the buffers, which live until here.
        let status = unsafe {
            edudb_emulate(
                self.kernel as u32,
                blocks,
                THREADS,
                shared_bytes,
                args.as_ptr(),
            )
        };
        match status {
            0 => Ok(()),
            2 => Err(Error::Gpu(format!(
                "emulation: {}: {shared_bytes} bytes of dynamic shared memory (at most 48 KiB)",
                self.kernel.name()
            ))),
            other => Err(Error::Gpu(format!(
                "emulation: {} failed (status {other})",
                self.kernel.name()
            ))),
        }
    }
}
