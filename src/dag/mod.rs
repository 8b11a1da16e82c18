//! Old paths of the DAG modules, kept while the layers move.

pub mod index;

pub use crate::compute::{aggregate, propagate};
pub use crate::ingest::dag::build::{DagConfig, build};
pub use crate::ingest::dag::{attention, ip, supplied};
pub use crate::model::dag::*;
