//! The GPU tests: the kernels against their CPU references on every kernel
//! device the build has (`gpu`). A binary of their own, so that a build
//! with the kernel features (`cuda`, `kernel-emulation`) compiles only them
//! and not every integration test again; without either feature it is
//! empty.

#![cfg(any(feature = "cuda", feature = "kernel-emulation"))]

mod gpu;
