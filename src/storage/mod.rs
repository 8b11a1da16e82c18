//! Persistence: the document store ([`store`], the only module that calls
//! sled; the source of truth; its large records in files of their own,
//! [`record_files`]; its vectors read in either layout,
//! [`vector_record`]), the full-text index ([`fulltext`],
//! tantivy) and the vector index ([`vectors`], hnsw_rs), both derived from
//! the store; [`file_lock`] takes the store's OS file locks, which
//! [`fork_release`] lets forked children drop their copies of; the byte
//! form of a prepared document, made of the store's records
//! ([`prepared`]). This layer imports `model`, `compute` (the vector
//! index's distance), `error` and ingest's prepared documents (to encode
//! them); it neither analyses nor embeds.

pub mod file_lock;
pub mod fork_release;
pub mod fulltext;
pub mod prepared;
pub mod record_files;
pub mod store;
pub mod vector_record;
pub mod vectors;
