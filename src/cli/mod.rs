//! The `edudb` binary: its command line ([`args`]), running it ([`run`]),
//! and the commands, one module per kind ([`documents`], [`retrieval`],
//! [`maintenance`], [`metadata`], [`serving`], [`session`], [`eval`], [`mcp`],
//! [`demo`]). All printing happens here, never in the library.

mod args;
mod bars;
mod console;
mod context;
mod demo;
mod documents;
mod eval;
mod failure;
mod highlight;
mod maintenance;
mod mcp;
mod meta_values;
mod metadata;
mod render;
mod retrieval;
mod route;
mod run;
mod serving;
mod session;

pub use run::main;
