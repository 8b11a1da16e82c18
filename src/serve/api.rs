//! [`Api`]: the calls of the served API, answered with its JSON bodies
//! (the CLI's `--json` contracts, described by `GET /openapi.json`). A
//! [`Db`] answers them itself, as the server does (the server's handlers
//! call these), and a [`Client`](super::Client) asks a server for them, so
//! a caller holding either (the Python package, an agent framework) sees
//! the same answers.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::ask::AskOptions;
use crate::db::Db;
use crate::engine::write::IngestReport;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::memory::TurnInput;
use crate::model::cost::LlmCost;
use crate::model::document::DocMeta;
use crate::model::metadata::{MetaValue, Metadata};
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::query::{Params, Query};

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

impl Api for Db {
    fn documents(&self, condition: Option<&str>) -> Result<Value> {
        let documents = match condition {
            Some(condition) => self.documents_where(condition)?,
            None => self.documents()?,
        };
        let costs: HashMap<String, LlmCost> = self.build_costs()?.into_iter().collect();
        let metadata: HashMap<String, Result<Metadata>> =
            self.all_metadata()?.into_iter().collect();
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
        Ok(Value::Array(rows.collect()))
    }

    fn metadata(&self, id: &str) -> Result<Value> {
        Ok(json!({ "id": id, "metadata": self.metadata(id)?.to_json() }))
    }

    fn update_metadata(&self, id: &str, set: &Value, unset: &[String]) -> Result<Value> {
        let set: Vec<(String, MetaValue)> = (Metadata::from_json(set)?.iter())
            .map(|(key, value)| (key.to_owned(), value.clone()))
            .collect();
        let metadata = self.update_metadata(id, &set, unset)?;
        Ok(json!({ "id": id, "metadata": metadata.to_json() }))
    }

    fn ingest_bytes(&self, id: &str, bytes: Vec<u8>, options: IngestOptions) -> Result<Value> {
        Ok(self.ingest_bytes(id, bytes, options)?.to_json())
    }

    fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Value> {
        Ok(ingest_answer(
            self.ingest(sources, options, progress, cancel)?,
        ))
    }

    fn write_prepared(&self, batch: Vec<u8>) -> Result<Value> {
        let written = self.write_prepared(crate::storage::prepared::decode_batch(&batch)?)?;
        Ok(json!({ "documents": written.iter().map(DocMeta::to_json).collect::<Vec<_>>() }))
    }

    fn remove(&self, id: &str) -> Result<Value> {
        self.remove(id)?;
        Ok(json!({ "removed": [id] }))
    }

    fn tree(&self, id: &str) -> Result<Value> {
        Ok(self.tree(id)?.to_json(None))
    }

    fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Value> {
        to_value(&self.edus(id, range)?)
    }

    fn pages(&self, id: &str) -> Result<Value> {
        to_value(&self.pages(id)?)
    }

    fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<Value> {
        to_value(&self.dag_listing(id, level)?)
    }

    fn search(&self, query: &str, limit: usize) -> Result<Value> {
        let hits = self.search(query, limit)?;
        Ok(Value::Array(hits.iter().map(|h| h.to_json()).collect()))
    }

    fn query(&self, statement: &str, params: &Params, explain: bool) -> Result<Value> {
        let mut query = Query::parse(statement)?;
        if explain {
            query = query.explained();
        }
        Ok(self.run(&query, params)?.to_json())
    }

    fn stats(&self) -> Result<Value> {
        to_value(&self.stats()?)
    }

    fn check(&self) -> Result<Value> {
        to_value(&self.check()?)
    }

    fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value> {
        let skipped = self.reindex(progress, cancel)?;
        let stats = self.stats()?;
        Ok(json!({
            "fulltext_entries": stats.fulltext_entries,
            "vectors": to_value(&self.vector_counts()?)?,
            "skipped": to_value(&skipped)?,
        }))
    }

    fn backup(&self, dest: &Path, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value> {
        to_value(&self.backup(dest, progress, cancel)?)
    }

    fn append_turn(&self, session: &str, turn: &TurnInput) -> Result<Value> {
        let receipts = self.append_turns(
            session,
            std::slice::from_ref(turn),
            &NoProgress,
            &CancelToken::new(),
        )?;
        let receipt = receipts
            .first()
            .ok_or_else(|| Error::Serve("the append returned no receipt".into()))?;
        to_value(receipt)
    }

    fn sessions(&self) -> Result<Value> {
        to_value(&self.sessions()?)
    }

    fn session(&self, id: &str) -> Result<Value> {
        to_value(&self.session(id)?)
    }

    fn session_context(&self, session: &str, budget: u64, query: Option<&str>) -> Result<Value> {
        to_value(&self.session_context(session, budget, query)?)
    }

    fn remove_session(&self, id: &str) -> Result<Value> {
        self.remove_session(id)?;
        Ok(json!({ "removed": id }))
    }

    fn forget_turn(&self, session: &str, turn: u32) -> Result<Value> {
        self.forget_turn(session, turn)?;
        Ok(json!({ "session": session, "forgotten": turn }))
    }

    fn ask(&self, question: &str, options: &AskOptions) -> Result<Value> {
        Ok(self
            .ask(question, options, &NoProgress, &CancelToken::new())?
            .to_json())
    }
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
fn to_value(value: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Serve(format!("encoding the answer: {e}")))
}
