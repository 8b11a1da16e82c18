//! Ingest: bytes to everything a document's atomic batch holds. Where
//! inputs come from ([`sources`]), layout extraction ([`layout`]), EDU
//! segmentation ([`segment`]), tree building ([`tree`]), the pipeline that
//! runs them and embeds the result ([`pipeline`]), the weighted DAG's
//! construction ([`dag`]), and preparing documents apart from any store
//! ([`prepared`]). Pure: nothing here touches storage. This layer
//! imports `model`, `compute` and `error` only.

pub mod dag;
pub mod layout;
pub mod pipeline;
pub mod prepared;
pub mod segment;
pub mod sources;
pub mod tree;

pub use pipeline::{
    IngestOptions, Structurer, analyze, analyze_structured, analyze_with, check_bytes, decode,
    detect_format,
};
