//! [`Api`] answered by a [`Db`]: one store open in this process.

use std::path::Path;

use serde_json::{Value, json};

use super::{
    Api, document_rows, ingest_answer, parsed, reindex_answer, search_answer, to_value,
    written_answer,
};
use crate::ask::AskOptions;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::Source;
use crate::memory::TurnInput;
use crate::model::metadata::{MetaValue, Metadata};
use crate::progress::{CancelToken, NoProgress, Progress};
use crate::query::Params;
use crate::storage::prepared::decode_batch;

impl Api for Db {
    fn documents(&self, condition: Option<&str>) -> Result<Value> {
        let documents = match condition {
            Some(condition) => self.documents_where(condition)?,
            None => self.documents()?,
        };
        Ok(document_rows(
            &documents,
            self.build_costs()?,
            self.all_metadata()?,
        ))
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
        let written = self.write_prepared(decode_batch(&batch)?)?;
        Ok(written_answer(&written))
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
        Ok(search_answer(&self.search(query, limit)?))
    }

    fn query(&self, statement: &str, params: &Params, explain: bool) -> Result<Value> {
        Ok(self.run(&parsed(statement, explain)?, params)?.to_json())
    }

    fn stats(&self) -> Result<Value> {
        to_value(&self.stats()?)
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
