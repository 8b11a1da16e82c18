//! End-to-end tests of the `edudb` binary: JSON shapes, exit codes, and
//! error messages.

mod documents;
mod eval;
mod fixtures;
mod session;
mod shards;
mod store;
