//! [`Api`] answered by a [`ShardSet`]: its stores as one. A document's
//! calls go to the store that holds it, listings and queries run over all
//! of them, the upkeep (stats, check, reindex, backup) is each store's
//! added up. Sessions are refused: a session's turns live in one store.

use std::path::Path;

use serde_json::{Value, json};

use super::{
    Api, document_rows, ingest_answer, parsed, reindex_answer, search_answer, to_value,
    written_answer,
};
use crate::ask::AskOptions;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::memory::TurnInput;
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::query::Params;
use crate::shards::ShardSet;
use crate::storage::prepared::decode_batch;

/// Why a session call is refused on a shard set.
fn no_sessions() -> Error {
    Error::Usage(
        "a shard set holds documents only: an agent's sessions live in one store (open a store, not a shard set, for memory)"
            .into(),
    )
}

impl Api for ShardSet {
    fn documents(&self, condition: Option<&str>) -> Result<Value> {
        let documents = match condition {
            Some(condition) => self.documents_where(condition)?,
            None => self.documents()?,
        };
        let (mut costs, mut metadata) = (Vec::new(), Vec::new());
        for db in self.shards() {
            costs.extend(db.build_costs()?);
            metadata.extend(db.all_metadata()?);
        }
        Ok(document_rows(&documents, costs, metadata))
    }

    fn metadata(&self, id: &str) -> Result<Value> {
        Api::metadata(self.shard_for(id), id)
    }

    fn update_metadata(&self, id: &str, set: &Value, unset: &[String]) -> Result<Value> {
        Api::update_metadata(self.shard_for(id), id, set, unset)
    }

    fn ingest_bytes(&self, id: &str, bytes: Vec<u8>, options: IngestOptions) -> Result<Value> {
        Api::ingest_bytes(self.shard_for(id), id, bytes, options)
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
        Ok(written_answer(&self.write_prepared(decode_batch(&batch)?)?))
    }

    fn remove(&self, id: &str) -> Result<Value> {
        Api::remove(self.shard_for(id), id)
    }

    fn tree(&self, id: &str) -> Result<Value> {
        Api::tree(self.shard_for(id), id)
    }

    fn pages(&self, id: &str) -> Result<Value> {
        Api::pages(self.shard_for(id), id)
    }

    fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Value> {
        Api::edus(self.shard_for(id), id, range)
    }

    fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<Value> {
        Api::dag_listing(self.shard_for(id), id, level)
    }

    fn search(&self, query: &str, limit: usize) -> Result<Value> {
        Ok(search_answer(&self.search(query, limit)?))
    }

    fn query(&self, statement: &str, params: &Params, explain: bool) -> Result<Value> {
        Ok(self.run(&parsed(statement, explain)?, params)?.to_json())
    }

    fn stats(&self) -> Result<Value> {
        let mut stats = to_value(&self.stats()?)?;
        stats["shards"] = json!(self.shards().len());
        Ok(stats)
    }

    fn check(&self) -> Result<Value> {
        to_value(&self.check()?)
    }

    fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value> {
        let skipped = self.reindex(progress, cancel)?;
        reindex_answer(&skipped, &self.stats()?, &self.vector_counts()?)
    }

    fn backup(&self, dest: &Path, progress: &dyn Progress, cancel: &CancelToken) -> Result<Value> {
        to_value(&self.backup(dest, progress, cancel)?)
    }

    fn append_turn(&self, _session: &str, _turn: &TurnInput) -> Result<Value> {
        Err(no_sessions())
    }

    /// None: a shard set holds no sessions.
    fn sessions(&self) -> Result<Value> {
        Ok(json!([]))
    }

    fn session(&self, _id: &str) -> Result<Value> {
        Err(no_sessions())
    }

    fn session_context(&self, _session: &str, _budget: u64, _query: Option<&str>) -> Result<Value> {
        Err(no_sessions())
    }

    fn remove_session(&self, _id: &str) -> Result<Value> {
        Err(no_sessions())
    }

    fn forget_turn(&self, _session: &str, _turn: u32) -> Result<Value> {
        Err(no_sessions())
    }

    fn ask(&self, question: &str, options: &AskOptions) -> Result<Value> {
        Ok(self
            .ask(question, options, &NoProgress, &CancelToken::new())?
            .to_json())
    }
}
