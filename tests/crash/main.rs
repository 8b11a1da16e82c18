//! Crash safety: `edudb ingest` and `edudb rm` are killed with SIGKILL at
//! random moments, many rounds over the same store. After every kill the
//! store must open, pass `check` (every document whole, the full-text index
//! caught up), and hold only documents that equal a complete analysis of
//! their source file. `edudb session add` and `session rm` get the same
//! treatment: every turn a session lists is whole; so does a server killed
//! mid-write. A full disk and damage to each of the store's files must
//! likewise leave every committed document whole or named.

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
