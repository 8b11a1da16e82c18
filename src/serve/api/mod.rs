//! [`Api`]: the calls of the served API, answered with its JSON bodies
//! (the CLI's `--json` contracts, described by `GET /openapi.json`). A
//! [`Db`](crate::Db) answers them itself ([`store`]), as the server does
//! (the server's handlers call these), a [`ShardSet`](crate::ShardSet)
//! answers them over its stores ([`shard_set`]), and a
//! [`Client`](super::Client) asks a server for them, so a caller holding
//! any of them (the Python package, an agent framework) sees the same
//! answers.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::ask::AskOptions;
use crate::engine::reads::{Damaged, SearchHit, Stats};
use crate::engine::write::IngestReport;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::memory::TurnInput;
use crate::model::cost::LlmCost;
use crate::model::document::DocMeta;
use crate::model::metadata::Metadata;
use crate::progress::{CancelToken, Progress};
use crate::query::{Params, Query};
use crate::storage::vectors::VectorCounts;

mod shard_set;
mod store;

/// A store's calls with JSON answers, local or served.
pub trait Api {
    /// Every document (those meeting `condition`, a WHERE condition on
    /// their metadata, when given), each with its metadata and, when built
    /// with a language model, what that cost (`docs --json`).
    fn documents(&self, condition: Option<&str>) -> Result<Value>;

    /// Document `id`'s metadata: `{id, metadata}` (`meta --json`).
    fn metadata(&self, id: &str) -> Result<Value>;

    /// Sets the keys of the JSON object `set` and removes the keys
    /// `unset` in document `id`'s metadata, without re-ingesting it:
    /// `{id, metadata}` as it now is (`meta DOC set|unset --json`).
    fn update_metadata(&self, id: &str, set: &Value, unset: &[String]) -> Result<Value>;

    /// Stores `bytes` as document `id` (replacing one of that id) as
    /// `options` say (its format, else the one sniffed); the ingest
    /// receipt.
    fn ingest_bytes(&self, id: &str, bytes: Vec<u8>, options: IngestOptions) -> Result<Value>;

    /// Ingests `sources` as [`Db::ingest`] does: `{documents, failures}`,
    /// a source with bad content being a failure while the rest go on.
    /// Progress goes to `progress`; cancelling `cancel` stops after the
    /// document being written (those written stay, whole) with
    /// [`Error::Cancelled`].
    fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Value>;

    /// Writes a batch of prepared documents (the bytes of
    /// [`encode_batch`](crate::storage::prepared::encode_batch)) as
    /// [`Db::write_prepared`] does, all or none: `{documents}`.
    fn write_prepared(&self, batch: Vec<u8>) -> Result<Value>;

    /// Removes document `id` (`rm --json`).
    fn remove(&self, id: &str) -> Result<Value>;

    /// Document `id`'s structural tree (`tree --json`).
    fn tree(&self, id: &str) -> Result<Value>;

    /// Where document `id`'s text lies on its PDF's pages (null for other
    /// formats).
    fn pages(&self, id: &str) -> Result<Value>;

    /// Document `id`'s EDUs, all or an inclusive range (`show --json`).
    fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Value>;

    /// Document `id`'s DAG, at one level or all (`dag --json`).
    fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<Value>;

    /// BM25 search over EDUs and nodes (`search --json`).
    fn search(&self, query: &str, limit: usize) -> Result<Value>;

    /// Runs a statement of the query language with `params` (`query
    /// --json`); with `explain`, as if it began with `EXPLAIN` (the answer
    /// carries its `plan`), while error positions stay those of the text
    /// given.
    fn query(&self, statement: &str, params: &Params, explain: bool) -> Result<Value>;

    /// The store's counts (`stats --json`).
    fn stats(&self) -> Result<Value>;

    /// Checks every record (`check --json`).
    fn check(&self) -> Result<Value>;

    /// Rebuilds the derived indexes (`reindex --json`), reporting to
    /// `progress` and stopping early with [`Error::Cancelled`] once `cancel`
    /// is cancelled (where the rebuild runs here: a served one runs to its
    /// end).
    fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value>;

    /// Writes a consistent copy of the store to the new directory `dest`
    /// while others keep using it, as [`Db::backup`] does (`backup DEST
    /// --json`); a served store's copy is written by its server, so `dest`
    /// is a path on the server's machine. Progress and cancelling as for
    /// [`Api::reindex`].
    fn backup(&self, dest: &Path, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value>;

    /// Appends `turn` to `session` (created by its first turn); the
    /// receipt (`session add --json`).
    fn append_turn(&self, session: &str, turn: &TurnInput) -> Result<Value>;

    /// Every session's summary (`session ls --json`).
    fn sessions(&self) -> Result<Value>;

    /// Session `id`'s dialogue tree (`session show --json`).
    fn session(&self, id: &str) -> Result<Value>;

    /// The context for `session`'s next turn within `budget` tokens, given
    /// what was just said when `query` is given (`session context --json`).
    fn session_context(&self, session: &str, budget: u64, query: Option<&str>) -> Result<Value>;

    /// Removes session `id` with all its turns (`session rm --json`).
    fn remove_session(&self, id: &str) -> Result<Value>;

    /// Forgets turn `turn` of `session` (`session forget --json`).
    fn forget_turn(&self, session: &str, turn: u32) -> Result<Value>;

    /// Answers `question` from the store with its chat model, as
    /// [`Db::ask`] does (`ask --json`).
    fn ask(&self, question: &str, options: &AskOptions) -> Result<Value>;
}

/// The rows of `docs --json` for `documents`: each with its metadata (or
/// what damaged it) and, when built with a language model, its cost.
fn document_rows(
    documents: &[DocMeta],
    costs: Vec<(String, LlmCost)>,
    metadata: Vec<(String, Result<Metadata>)>,
) -> Value {
    let costs: HashMap<String, LlmCost> = costs.into_iter().collect();
    let metadata: HashMap<String, Result<Metadata>> = metadata.into_iter().collect();
    let rows = documents.iter().map(|doc| {
        let mut row = doc.to_json();
        row["metadata"] = match metadata.get(&doc.id) {
            Some(Ok(metadata)) => metadata.to_json(),
            Some(Err(damage)) => json!({ "damaged": damage.to_string() }),
            None => json!({}),
        };
        if let Some(cost) = costs.get(&doc.id) {
            row["llm"] = json!(cost);
        }
        row
    });
    Value::Array(rows.collect())
}

/// The answer of a prepared documents' write: `{documents}`.
fn written_answer(written: &[DocMeta]) -> Value {
    json!({ "documents": written.iter().map(DocMeta::to_json).collect::<Vec<_>>() })
}

/// The answer of a search: its hits.
fn search_answer(hits: &[SearchHit]) -> Value {
    Value::Array(hits.iter().map(SearchHit::to_json).collect())
}

/// The answer of a reindex: `{fulltext_entries, vectors, skipped}`.
fn reindex_answer(skipped: &[Damaged], stats: &Stats, vectors: &VectorCounts) -> Result<Value> {
    Ok(json!({
        "fulltext_entries": stats.fulltext_entries,
        "vectors": to_value(vectors)?,
        "skipped": to_value(&skipped)?,
    }))
}

/// `statement` parsed, as if it began with `EXPLAIN` when `explain`.
fn parsed(statement: &str, explain: bool) -> Result<Query> {
    let query = Query::parse(statement)?;
    Ok(if explain { query.explained() } else { query })
}

/// An ingest's `{documents, failures, llm}`, each failure `{source,
/// class, message}`, `llm` what the language-model steps cost.
pub(super) fn ingest_answer(report: IngestReport) -> Value {
    let failures: Vec<Value> = (report.failures.into_iter())
        .map(|f| {
            let mut failure = described(f.error);
            failure["source"] = Value::from(f.source);
            failure
        })
        .collect();
    let documents: Vec<Value> = report.documents.iter().map(|d| d.to_json()).collect();
    json!({ "documents": documents, "failures": failures, "llm": to_value(&report.llm).unwrap_or_default() })
}

/// `{class, message, query?, damage?}` of an error, as the error answers
/// carry them: its class `busy`, `user` or `internal` as
/// [`Error::is_busy`] and [`Error::is_user_error`] say, where a statement
/// is wrong ([`located`]), and `damage: true` for damage to stored records
/// ([`Error::is_damage`]).
pub(super) fn described(err: Error) -> Value {
    let class = if err.is_busy() {
        "busy"
    } else if err.is_user_error() {
        "user"
    } else {
        "internal"
    };
    let mut described = json!({"class": class, "message": err.to_string()});
    if let Some(query) = located(&err) {
        described["query"] = query;
    }
    if err.is_damage() {
        described["damage"] = json!(true);
    }
    described
}

/// Where a statement is wrong: `{line, column, hint, source_line,
/// underline}` of a query error, here or as a server reported it.
pub(super) fn located(err: &Error) -> Option<Value> {
    match err {
        Error::Query(q) => Some(json!({
            "line": q.line, "column": q.column, "hint": q.hint,
            "source_line": q.source_line,
            "underline": [q.underline.start, q.underline.end],
        })),
        Error::Served { query, .. } => query.clone(),
        _ => None,
    }
}

/// `value` as JSON.
pub(super) fn to_value(value: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Serve(format!("encoding the answer: {e}")))
}
