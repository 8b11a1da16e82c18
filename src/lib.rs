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

#[doc(hidden)]
pub mod ask;
#[doc(hidden)]
pub mod compute;
mod db;
mod engine;
#[doc(hidden)]
pub mod error;
pub mod eval;
#[doc(hidden)]
pub mod ingest;
#[doc(hidden)]
pub mod memory;
#[doc(hidden)]
pub mod model;
#[doc(hidden)]
pub mod progress;
#[doc(hidden)]
pub mod query;
pub mod serve;
mod shards;
#[doc(hidden)]
pub mod storage;

pub use ask::{AskOptions, AskResult, AskStep, Evidence, Stopped};
pub use compute::chat::http::{ChatConfig, HttpChat};
pub use compute::chat::{ChatModel, ChatReply, ChatRequest};
pub use compute::dag_index::DagIndex;
pub use compute::device::Device;
pub use compute::embed::http::HttpConfig;
pub use compute::embed::{Embedder, EmbedderConfig};
pub use compute::propagate::PropagateOptions;
pub use db::Db;
pub use engine::OpenOptions;
pub use engine::backup::BackupReport;
pub use engine::dag_index::DagHit;
pub use engine::reads::{CheckReport, Damaged, EduText, SearchHit, Stats};
pub use engine::salvage::SalvageReport;
pub use engine::vacuum::VacuumReport;
pub use engine::write::{IngestFailure, IngestReport};
pub use error::{ChatError, EmbedError, Error, Result};
pub use ingest::dag::attention::AttentionSource;
pub use ingest::dag::ip::IpMaker;
pub use ingest::dag::supplied::SuppliedAttention;
pub use ingest::pipeline::{IngestOptions, IpMakerKind, Structurer};
pub use ingest::prepared::{PreparedDocument, Preparer};
pub use ingest::sources::Source;
pub use ingest::tree::TreeBuilder;
pub use memory::{
    ContextItem, ContextKind, Placement, Role, SessionContext, SessionMeta, SessionView, TurnInput,
    TurnReceipt,
};
pub use model::cost::LlmCost;
pub use model::dag::{Dag, DagListing};
pub use model::dialogue::Dialogue;
pub use model::document::{DocMeta, Document, Format};
pub use model::edu::{Edu, EduKind, Span};
pub use model::metadata::{MetaValue, Metadata};
pub use model::pages::{BoxPt, LineBox, Page, PageBox, PageLayout};
pub use model::rank::{RankedHit, Target};
pub use model::tree::{Node, NodeKind, Tree};
pub use progress::{CancelToken, NoProgress, Progress};
pub use query::{Item, Param, Params, Query, QueryError, QueryResult, Rows, Selection, Stage};
pub use shards::{MANIFEST_FILE, MAX_SHARDS, ShardSet, shard_of};
pub use storage::store::LogRecovery;
pub use storage::vectors::VectorCounts;
