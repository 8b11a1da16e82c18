//! Building the weighted DAG of information points (PECAN's hierarchical
//! weighted graph) once per document at ingest; the record itself is
//! [`crate::model::dag::Dag`].
//!
//! - Level 1: chunks of about [`build::DagConfig::chunk_tokens`] tokens,
//!   cut at EDU boundaries, tiling the document.
//! - Level l + 1: information points (IPs) made from batches of level-l
//!   nodes filling a window of [`build::DagConfig::window_tokens`], until
//!   at most [`build::DagConfig::top_nodes`] nodes remain. An IP is real
//!   source text with coordinates ([`ip::IpMaker`]): by default the EDUs
//!   of its batch that share a rare term, across the lower nodes that
//!   mention it ([`bridge`]), and for the budget left a few salient EDUs
//!   ([`ip::ExtractiveIpMaker`]); with a chat model, points it writes in
//!   its own words ([`llm::LlmIpWriter`], PECAN's bullet points), stored
//!   with their text and given coordinates by attention.
//! - Edges run from each IP to the lower nodes of its batch, weighted by
//!   attention aggregated from token to node level ([`attention`],
//!   [`crate::compute::aggregate`]), each node's out-weights normalised to
//!   sum 1. The attention is a local transformer's when the store embeds
//!   with one ([`model_attention`]), else computed from hashed token
//!   vectors.

pub mod attention;
pub mod bridge;
pub mod build;
pub mod ip;
pub mod llm;
pub mod model_attention;
pub mod supplied;
