//! The weighted DAG of information points (PECAN's hierarchical weighted
//! graph), built once per document at ingest and persisted with it.

pub mod aggregate;
pub mod propagate;
