//! The index's schema: its fields, and the errors of a damaged index.

use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};

use crate::error::Error;

/// Stored in the `node` field of EDU entries.
pub(super) const NO_NODE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub(super) doc: Field,
    pub(super) node: Field,
    pub(super) first: Field,
    pub(super) last: Field,
    /// EDU texts.
    pub(super) text: Field,
    /// Section titles.
    pub(super) title: Field,
    /// Node representations.
    pub(super) node_text: Field,
    /// Session turns' EDU texts: kept apart so `*` never ranks them.
    pub(super) turn_text: Field,
    /// Session turns' node representations.
    pub(super) turn_node_text: Field,
    /// Which of the four ranked fields the entry has (its name), so each
    /// field's BM25 statistics count only its own entries.
    pub(super) kind: Field,
}

/// Wraps a tantivy error, keeping it as the source.
pub(super) fn fulltext<E: std::error::Error + Send + Sync + 'static>(err: E) -> Error {
    Error::FullText {
        source: Box::new(err),
    }
}

/// An index entry that breaks the schema's guarantees (a missing column
/// or value): the index is damaged, and `reindex` rebuilds it.
pub(super) fn damaged(message: String) -> Error {
    Error::Corrupt {
        key: "full-text index".into(),
        message,
    }
}

pub(super) fn schema() -> Schema {
    let mut builder = Schema::builder();
    builder.add_text_field("doc", STRING | FAST);
    builder.add_u64_field("node", FAST);
    builder.add_u64_field("first", FAST);
    builder.add_u64_field("last", FAST);
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let text = TextOptions::default().set_indexing_options(indexing);
    builder.add_text_field("text", text.clone());
    builder.add_text_field("title", text.clone());
    builder.add_text_field("node_text", text.clone());
    builder.add_text_field("turn_text", text.clone());
    builder.add_text_field("turn_node_text", text);
    builder.add_text_field("kind", STRING);
    builder.build()
}
