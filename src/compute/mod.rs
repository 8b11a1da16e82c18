//! Arithmetic over records, with no storage: the embedders (text →
//! vectors, [`embed`]; the local transformer they and the DAG's
//! attention can run on, [`transformer`]), the CPU reference arithmetic of the DAG
//! ([`aggregate`]: attention from token to node level; [`propagate`]:
//! batched score propagation and top-k), the kernels' host side (`gpu`:
//! a CUDA GPU with feature `cuda`, their CPU emulation with feature
//! `kernel-emulation`) and the [`device::Device`] that picks between them. The CPU
//! functions are the oracles the kernels are tested against. This layer
//! imports only `model` and `error`.

pub mod aggregate;
pub mod chat;
pub mod dag_index;
pub mod device;
pub mod embed;
#[cfg(any(feature = "cuda", feature = "kernel-emulation"))]
pub mod gpu;
pub mod propagate;
pub mod quantize;
pub mod transformer;
pub mod transport;
pub mod vector;
