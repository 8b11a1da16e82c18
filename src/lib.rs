//! edudb: an embedded document database that stores documents as
//! addressable EDU coordinates with a structural tree over them.

pub mod document;
pub mod error;
pub mod fulltext;
pub mod ingest;
pub mod layout;
pub mod segment;
pub mod store;
pub mod tokens;
pub mod tree;
