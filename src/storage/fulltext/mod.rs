//! The full-text index (tantivy, BM25 over English-stemmed terms).
//!
//! Two kinds of entry: one per EDU (its text) and one per tree node (its
//! *representation*: title, child titles and leading text, the unit that
//! node-level ranking scores; for sections also the title alone, so plain
//! search finds headings). Each kind has its own text fields, so ranking one
//! kind is a plain union of term queries, which tantivy answers top-k with
//! block-max WAND instead of scoring every matching entry. Coordinates live
//! in fast fields, so ranking never decompresses stored documents.
//!
//! It is derived state: sled is the source of truth. Each commit records, in
//! tantivy's own commit payload, the store sequence number it has applied,
//! so after a crash the store replays the change log past that point.
//!
//! Files: `schema` (fields, errors), `writer` ([`FullText`]), `reader`
//! ([`FullTextReader`]), `set` ([`FullTextSet`]: rankings, over one index
//! or a shard set's, scored with statistics summed over them), `scope` (a
//! ranking within some documents) and `directory` (the directory tantivy
//! writes through).

pub mod directory;
mod floor;
mod reader;
mod rescore;
mod schema;
mod scope;
mod set;
#[cfg(test)]
mod tests;
mod writer;

pub use crate::model::document::representation;
pub use reader::FullTextReader;
pub use set::FullTextSet;
pub use writer::{FullText, PreparedCommit};
