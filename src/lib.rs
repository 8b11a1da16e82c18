//! edudb: an embedded document database that stores documents as
//! addressable EDU coordinates (elementary discourse units, each an exact
//! byte range of the original text) with a structural tree over them, a
//! full-text index, and crash-safe persistence.
//!
//! Start with [`Db`]:
//!
//! ```no_run
//! # fn main() -> edudb::Result<()> {
//! let db = edudb::Db::create("my.db")?;
//! db.ingest_bytes("intro", b"# Intro\n\nEDUs are clauses. Trees nest.".to_vec(), Default::default())?;
//! for hit in db.search("clauses", 5)? {
//!     println!("{} {} {:?}", hit.doc, hit.edus, hit.text);
//! }
//! # Ok(()) }
//! ```

pub mod compute;
/// Old paths of the DAG modules, kept while the layers move.
pub mod dag {
    pub use crate::compute::{aggregate, propagate};
    pub use crate::ingest::dag::build::{DagConfig, build};
    pub use crate::ingest::dag::{attention, ip, supplied};
    pub use crate::model::dag::*;
}
pub mod db;
mod engine;
pub mod error;
pub mod eval;
pub mod ingest;
pub mod memory;
pub mod model;
pub mod progress;
pub mod query;
pub mod storage;

pub use db::Db;
pub use engine::OpenOptions;
pub use engine::dag_index::DagHit;
pub use engine::reads::{CheckReport, EduText, SearchHit, Stats};
pub use engine::write::{IngestFailure, IngestReport};
pub use error::{Error, Result};
pub use ingest::pipeline::IngestOptions;
pub use memory::{
    ContextItem, ContextKind, Placement, Role, SessionContext, SessionMeta, SessionView,
    TurnReceipt,
};
pub use model::document::{DocMeta, Document, Format};
pub use model::edu::{Edu, EduKind, Span};
pub use model::rank::{RankedHit, Target};
pub use model::tree::{Node, NodeKind};
pub use progress::{CancelToken, NoProgress, Progress};
pub use query::{Item, Params, Query, QueryError, QueryResult, Rows, Selection, Stage};

// Old paths, kept while the layers move.
#[cfg(feature = "cuda")]
pub use compute::gpu;
pub use compute::{device, embed};
pub use ingest::sources::Source;
pub use ingest::tree::TreeBuilder;
pub use ingest::{layout, segment, sources, tree};
pub use model::tree::Tree;
pub use model::{document, rank, tokens};
pub use storage::{fulltext, store, vectors};
