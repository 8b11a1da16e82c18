//! The integration tests, as one binary: each module was once a binary of
//! its own, and `support` holds what they share. The crash tests, which
//! SIGKILL child processes, stay a binary of their own (`tests/crash/`), as
//! do the GPU tests (`tests/kernels/`), built with the kernel features.

mod scripted;
mod support;

mod api_surface;
mod ask;
mod backup;
mod chat;
mod cli;
mod client;
mod console;
mod dag;
mod db;
mod embedding_http;
mod eval;
mod fuzz;
mod local_model;
mod memory;
mod metadata;
mod openapi;
mod pdf;
mod prepared;
mod properties;
mod query;
mod serve;
mod shards;
mod tokens;
mod vectors;
mod written_points;
