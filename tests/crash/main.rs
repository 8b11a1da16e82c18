//! Crash safety: `edudb ingest` and `edudb rm` are killed with SIGKILL at
//! random moments, many rounds over the same store. After every kill the
//! store must open, pass `check` (every document whole, the full-text index
//! caught up), and hold only documents that equal a complete analysis of
//! their source file. `edudb session add` and `session rm` get the same
//! treatment: every turn a session lists is whole.

#![cfg(unix)]

// The integration tests' helpers; these tests use only some of them.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;

mod damage;
mod full_disk;
mod harness;
mod kills;
mod server;
