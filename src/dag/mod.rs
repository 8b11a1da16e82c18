//! The weighted DAG of information points (PECAN's hierarchical weighted
//! graph), built once per document at ingest, stored in the document's own
//! atomic batch, and read by every PROPAGATE query.
//!
//! - Level 1: chunks of about [`DagConfig::chunk_tokens`] tokens, cut at
//!   EDU boundaries, tiling the document.
//! - Level l + 1: information points (IPs) made from batches of level-l
//!   nodes filling a window of [`DagConfig::window_tokens`], until at most
//!   [`DagConfig::top_nodes`] nodes remain. An IP is extractive
//!   ([`ip::IpMaker`]): a few salient EDUs of its batch, so its text is real
//!   source text with coordinates.
//! - Edges run from each IP to the lower nodes of its batch, weighted by
//!   attention aggregated from token to node level ([`attention`],
//!   [`aggregate`]), each node's out-weights normalised to sum 1.
//!
//! The record is a CSR of out-edges archived with rkyv, so it is read in
//! place without parsing. [`propagate`] runs PECAN's `z = Eᵀ r` over it.

pub mod attention;
pub mod build;
pub mod index;
pub mod ip;
pub mod supplied;

pub use crate::compute::{aggregate, propagate};
pub use crate::model::dag::*;
pub use build::{DagConfig, build};
