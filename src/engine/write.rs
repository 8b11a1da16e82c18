//! The write paths: parallel ingest, and [`Engine::write`], the one path
//! of single changes (removal, session turns, DAG re-weighting): durable
//! first, then the indexes, and [`Error::IndexBehind`] for a failure after
//! the change is durable.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::ingest::dag::supplied::SuppliedAttention;
use crate::ingest::pipeline::{
    IngestOptions, LlmSteps, Prepared, build_dag, prepare, prepare_text,
};
use crate::ingest::prepared::PreparedDocument;
use crate::ingest::sources::{Origin, Source};
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::dialogue::Dialogue;
use crate::model::document::{DocMeta, Document, PackedVectors};
use crate::progress::{CancelToken, Progress, Stage, Steps};
use crate::storage::fulltext::{FullText, PreparedCommit};

/// One input that could not be ingested, and why.
#[derive(Debug)]
pub struct IngestFailure {
    /// The file name, `<stdin>`, or the id.
    pub source: String,
    /// What was wrong with it.
    pub error: Error,
}

/// What an ingest run did.
#[derive(Debug, Default)]
pub struct IngestReport {
    /// Metadata of every document written, in the order written.
    pub documents: Vec<DocMeta>,
    /// Inputs rejected for bad content; the others were still ingested.
    pub failures: Vec<IngestFailure>,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
    /// What the language-model steps cost, over every document (zero
    /// without them).
    pub llm: LlmCost,
}

impl IngestReport {
    /// Total EDUs written.
    pub fn edus(&self) -> u64 {
        self.documents.iter().map(|d| u64::from(d.edus)).sum()
    }

    /// Total tree nodes written.
    pub fn nodes(&self) -> u64 {
        self.documents.iter().map(|d| u64::from(d.nodes)).sum()
    }

    /// Total tokens written.
    pub fn tokens(&self) -> u64 {
        self.documents.iter().map(|d| d.tokens).sum()
    }

    /// Total bytes of stored text written.
    pub fn bytes(&self) -> u64 {
        self.documents.iter().map(|d| d.bytes).sum()
    }
}

/// What a write under [`Engine::write`] changed in the store.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// Documents written (replacing any with their ids).
    pub put: Vec<Document>,
    /// Ids of documents removed.
    pub removed: Vec<String>,
    /// Sessions' dialogues as written, cached once the write is in the
    /// store (a session whose turns were written or removed and whose
    /// dialogue is not here is forgotten by the cache).
    pub sessions: Vec<Dialogue>,
}

impl Engine {
    /// The work of [`crate::Db::ingest`].
    pub(crate) fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<IngestReport> {
        let started = Instant::now();
        let llm = LlmSteps::for_options(&options, self.chat())?;
        let mut report = IngestReport::default();
        let mut fulltext = self.start_fulltext_write()?;
        progress.start("ingest", sources.iter().map(Source::len_hint).sum());
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(sources.len())
            .max(1);
        let next = AtomicUsize::new(0);
        let mut written: Vec<String> = Vec::new();
        let outcome = std::thread::scope(|scope| -> Result<()> {
            let (sender, receiver) =
                std::sync::mpsc::sync_channel::<(usize, Result<Prepared>)>(workers * 2);
            for _ in 0..workers {
                let sender = sender.clone();
                let next = &next;
                let options = &options;
                scope.spawn(move || {
                    while !cancel.is_cancelled() {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(source) = sources.get(index) else {
                            break;
                        };
                        // A document's steps (a PDF's pages, its texts
                        // embedded, its DAG's windows read by a local
                        // model) are told as they go, its bytes counted
                        // once it is written.
                        let report = |stage: Stage, done: usize, total: usize| {
                            let units = stage.units();
                            progress.working_on(&format!("{} {units} {done}/{total}", source.id))
                        };
                        let steps = Steps {
                            cancel,
                            report: &report,
                        };
                        let prepared = prepare(
                            source,
                            options.clone(),
                            self.embedder.as_ref(),
                            self.device(),
                            &llm,
                            &steps,
                        );
                        if sender.send((index, prepared)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(sender);
            for (index, prepared) in receiver {
                cancel.check()?;
                let source = &sources[index];
                match prepared {
                    Ok(Prepared {
                        doc,
                        vectors,
                        dag,
                        llm,
                    }) => {
                        self.store.put(&doc, &vectors, &dag, &llm)?;
                        // Most of a large document's memory: not held
                        // while its full-text entries are made.
                        drop((vectors, dag));
                        self.index_put(&mut fulltext, &doc).inspect_err(|_| {
                            self.fulltext_behind.store(true, Ordering::SeqCst);
                        })?;
                        written.push(doc.meta.id.clone());
                        report.llm.add(&llm);
                        report.documents.push(doc.meta);
                    }
                    Err(error) if error.is_user_error() => {
                        report.failures.push(IngestFailure {
                            source: source.name(),
                            error,
                        });
                    }
                    Err(error) => return Err(error),
                }
                progress.advance(source.len_hint(), &source.id);
            }
            cancel.check()
        });
        progress.finish();
        // What was written is made durable and indexed even when the run
        // failed; the run's own error (a full disk, say) is the one told.
        let finished = if written.is_empty() {
            Ok(())
        } else {
            self.finish_writes(fulltext)
        };
        match (outcome, finished) {
            (Ok(()), finished) => finished?,
            // Those written are durable: the caller learns which.
            (Err(cause), Ok(())) if !written.is_empty() && !matches!(cause, Error::Cancelled) => {
                let done: std::collections::HashSet<String> = (report.failures.iter())
                    .map(|f| f.source.clone())
                    .chain(written.iter().cloned())
                    .collect();
                let not_stored = (sources.iter())
                    .filter(|s| !done.contains(&s.id) && !done.contains(&s.name()))
                    .map(|s| s.id.clone())
                    .collect();
                return Err(Error::PartlyIngested {
                    cause: Box::new(cause),
                    stored: written,
                    not_stored,
                });
            }
            (Err(cause), _) => return Err(cause),
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// The work of [`crate::Db::ingest_bytes`].
    pub(crate) fn ingest_bytes(
        &self,
        id: &str,
        bytes: Vec<u8>,
        options: IngestOptions,
    ) -> Result<DocMeta> {
        crate::model::ids::validate_id(id)?;
        let source = Source {
            id: id.to_owned(),
            origin: Origin::Bytes(bytes),
        };
        let mut report = self.ingest(
            &[source],
            options,
            &crate::progress::NoProgress,
            &CancelToken::new(),
        )?;
        match (report.documents.pop(), report.failures.pop()) {
            (Some(meta), _) => Ok(meta),
            (None, Some(failure)) => Err(failure.error),
            (None, None) => Err(Error::Cancelled),
        }
    }

    /// The work of [`crate::Db::write_prepared`].
    pub(crate) fn write_prepared(&self, docs: Vec<PreparedDocument>) -> Result<Vec<DocMeta>> {
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        let (identity, dimension) = (self.embedder.identity(), self.embedder.dimension());
        if let Some(other) =
            (docs.iter()).find(|d| d.embedder() != identity || d.dimension() != dimension)
        {
            return Err(Error::BadPrepared {
                what: format!("{:?}", other.id()),
                message: format!(
                    "its vectors were made by embedder {} (dimension {}), this store's by {identity} (dimension {dimension}); prepare it with the store's embedder",
                    other.embedder(),
                    other.dimension()
                ),
            });
        }
        self.write(|| {
            let records: Vec<_> = (docs.iter())
                .map(|d| (d.document(), d.vectors(), d.dag(), d.llm_cost()))
                .collect();
            self.store.put_documents(&records)?;
            let put: Vec<Document> = docs.into_iter().map(|d| d.prepared.doc).collect();
            let metas = put.iter().map(|doc| doc.meta.clone()).collect();
            Ok((
                metas,
                Written {
                    put,
                    ..Written::default()
                },
            ))
        })
    }

    /// The work of [`crate::Db::remove`].
    pub(crate) fn remove(&self, id: &str) -> Result<()> {
        if let Some((session, turn)) = crate::model::ids::parse_turn_id(id) {
            return Err(Error::TurnDocument {
                doc: id.to_owned(),
                session: session.to_owned(),
                turn: turn.to_owned(),
            });
        }
        self.write(|| {
            if self.store.remove(id)?.is_none() {
                // Removing a document lost to damage acknowledges the loss.
                return match self.store.forget_lost(id, false)? {
                    true => Ok(((), Written::default())),
                    false => Err(Error::NoSuchDocument(id.to_owned())),
                };
            }
            Ok((
                (),
                Written {
                    removed: vec![id.to_owned()],
                    ..Written::default()
                },
            ))
        })
    }

    /// Runs `write`, which changes the store, as the store's only writer
    /// (holding the full-text index, as ingest does), then brings the
    /// derived state along for what it [`Written`]: the caches, the
    /// full-text index and the loaded vector graph, while the change is
    /// made durable ([`Engine::finish_writes`]). Nothing derived is touched
    /// when `write` fails; a failure after the change is durable is
    /// [`Error::IndexBehind`], so the caller knows not to repeat it.
    pub(crate) fn write<R>(&self, write: impl FnOnce() -> Result<(R, Written)>) -> Result<R> {
        let mut fulltext = self.start_fulltext_write()?;
        let (result, written) = write()?;
        // From here the change is in the store (durable once flushed): any
        // failure leaves the full-text index behind until the next commit
        // replays the log.
        for id in written
            .put
            .iter()
            .map(|d| &d.meta.id)
            .chain(&written.removed)
        {
            self.forget_cached(id);
        }
        let sessions: Vec<String> = written.sessions.iter().map(|d| d.id.clone()).collect();
        for dialogue in written.sessions {
            self.sessions.replace(&dialogue.id.clone(), dialogue);
        }
        // A change that may not be durable is not served from the cache.
        let forget_sessions = |error: Error| {
            if !matches!(error, Error::IndexBehind(_)) {
                sessions.iter().for_each(|id| self.sessions.invalidate(id));
            }
            error
        };
        let mut update_index = || -> Result<()> {
            for doc in &written.put {
                fulltext.replace(doc)?;
            }
            for id in &written.removed {
                fulltext.remove(id)?;
            }
            Ok(())
        };
        if let Err(error) = update_index() {
            self.fulltext_behind.store(true, Ordering::SeqCst);
            self.store.flush().map_err(forget_sessions)?;
            return Err(Error::IndexBehind(Box::new(error)));
        }
        self.finish_writes(fulltext).map_err(forget_sessions)?;
        Ok(result)
    }

    /// After `doc` was written to the store: drops its cached copy and
    /// re-indexes its text (uncommitted).
    fn index_put(&self, fulltext: &mut FullText, doc: &Document) -> Result<()> {
        self.forget_cached(&doc.meta.id);
        fulltext.replace(doc)
    }

    /// Makes the store durable and commits the full-text index at the
    /// store's latest change (first replaying the change log when an
    /// earlier change missed the index), then updates the loaded vector
    /// graph. The index's segments are written while the store syncs, on
    /// a thread of its own, but the index commits only once the store is
    /// durable, so it is never ahead of it. The store's error when the
    /// change did not become durable; [`Error::IndexBehind`] when it did
    /// and the indexes failed. Either way the next write first brings the
    /// full-text index back in step with the store.
    fn finish_writes(&self, mut fulltext: std::sync::MutexGuard<'_, FullText>) -> Result<()> {
        let behind = |error: Error| {
            self.fulltext_behind.store(true, Ordering::SeqCst);
            error
        };
        let index: &mut FullText = &mut fulltext;
        let (flushed, prepared) = std::thread::scope(move |scope| {
            let flushing = std::thread::Builder::new()
                .name("edudb-flush".into())
                .spawn_scoped(scope, || self.store.flush());
            let prepared = self.recover_index(index).and_then(|()| {
                let seq = self.store.last_seq()?;
                index.prepare_commit(seq)
            });
            let flushed = match flushing {
                Ok(thread) => thread.join().unwrap_or_else(|panic| {
                    self.fulltext_behind.store(true, Ordering::SeqCst);
                    std::panic::resume_unwind(panic)
                }),
                Err(_) => self.store.flush(),
            };
            (flushed, prepared)
        });
        flushed.map_err(behind)?;
        prepared
            .and_then(PreparedCommit::commit)
            .map_err(|error| Error::IndexBehind(Box::new(behind(error))))?;
        drop(fulltext);
        self.apply_to_vectors()
            .map_err(|error| Error::IndexBehind(Box::new(error)))
    }

    /// Analyses `text` as document `id` in `format`, embeds its nodes and
    /// EDUs and builds its DAG with the store's settings: everything a
    /// document's atomic batch holds. Ingest and session turns both go
    /// through here.
    pub(crate) fn prepare_text(
        &self,
        id: &str,
        text: String,
        format: crate::model::document::Format,
    ) -> Result<(Document, PackedVectors, Dag)> {
        prepare_text(id, text, format, self.embedder.as_ref(), self.device())
    }

    /// The work of [`crate::Db::reweight_dag`].
    pub(crate) fn reweight_dag(&self, id: &str, supplied: &SuppliedAttention) -> Result<()> {
        let fulltext = self.fulltext_writer();
        let loaded = self.cached_document(id)?;
        if loaded.dag.nodes.iter().any(|node| node.text.is_some()) {
            return Err(Error::DagInput {
                what: format!("supplied attention for '{id}'"),
                message: "its information points were written by a language model (--ip-maker llm); \
                          supplied attention re-weights model-free points only: re-ingest without --ip-maker llm first"
                    .into(),
            });
        }
        let source = supplied.source(self.device());
        let dag = self.with_edu_vectors(id, loaded.document.edus.len(), |vectors| {
            build_dag(&loaded.document, vectors, &source)
        })?;
        source.check_all_used(id)?;
        if dag.nodes != loaded.dag.nodes {
            return Err(Error::DagInput {
                what: format!("supplied attention for '{id}'"),
                message:
                    "the stored DAG was built with other settings; re-ingest the document first"
                        .into(),
            });
        }
        self.store
            .put_dag(id, &dag)?
            .ok_or_else(|| Error::NoSuchDocument(id.to_owned()))?;
        self.forget_cached(id);
        // The text did not change; the index only records the change as
        // applied, once it is durable.
        self.finish_writes(fulltext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::three_fruit_store;

    #[test]
    fn a_change_the_store_cannot_make_durable_fails_with_its_error_and_stays_out_of_the_index() {
        let (_dir, engine) = three_fruit_store();
        let applied = engine.store().last_seq().unwrap();
        let remove = |id: &str| {
            engine.write(|| {
                engine.store().remove(id)?;
                let removed = vec![id.to_owned()];
                Ok((
                    (),
                    Written {
                        removed,
                        ..Written::default()
                    },
                ))
            })
        };
        // The batch is applied, then its flush fails: the index, which
        // writes its segment meanwhile, must not commit it.
        engine.store().fail_next_flush();
        let err = remove("plums").unwrap_err();
        assert!(matches!(err, Error::Storage(_)), "{err}");
        assert!(engine.fulltext_behind.load(Ordering::SeqCst));
        assert!(engine.fulltext_reader().holds("plums").unwrap());
        assert_eq!(engine.fulltext_writer().applied_seq().unwrap(), applied);
        // The next write replays what the index missed.
        remove("pears").unwrap();
        assert!(!engine.fulltext_behind.load(Ordering::SeqCst));
        assert!(!engine.fulltext_reader().holds("plums").unwrap());
        assert!(!engine.fulltext_reader().holds("pears").unwrap());
        assert_eq!(
            engine.fulltext_writer().applied_seq().unwrap(),
            engine.store().last_seq().unwrap()
        );
    }
}
