//! [`Db`]: the library's entry point, one open store directory. A facade:
//! each method hands its work to the crate-private engine (store, indexes,
//! write protocol, reads), to `query` (statements) or to `memory`
//! (sessions), and holds no logic of its own.

use std::path::Path;
use std::sync::Arc;

use crate::ask::{AskOptions, AskResult, Evidence};
use crate::compute::dag_index::DagIndex;
use crate::compute::device::Device;
use crate::compute::embed::{Embedder, EmbedderConfig};
use crate::compute::propagate::PropagateOptions;
use crate::engine::backup::BackupReport;
use crate::engine::dag_index::DagHit;
use crate::engine::reads::{CheckReport, Damaged, EduText, SearchHit, Stats};
use crate::engine::salvage::SalvageReport;
use crate::engine::vacuum::VacuumReport;
use crate::engine::write::IngestReport;
use crate::engine::{Engine, OpenOptions};
use crate::error::Result;
use crate::ingest::dag::supplied::SuppliedAttention;
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::prepared::PreparedDocument;
use crate::ingest::sources::Source;
use crate::memory::{self, Placement, SessionContext, TurnInput, TurnReceipt};
use crate::model::cost::LlmCost;
use crate::model::dag::{Dag, DagListing};
use crate::model::dialogue::{Dialogue, Role, SessionMeta, SessionView};
use crate::model::document::DocMeta;
use crate::model::document::Document;
use crate::model::metadata::{MetaValue, Metadata};
use crate::model::pages::PageLayout;
use crate::model::rank::{RankedHit, Target};
use crate::model::tree::Tree;
use crate::progress::{CancelToken, Progress};
use crate::query::corpus::Corpus;
use crate::query::{Params, Query, QueryResult};
use crate::storage::vectors::VectorCounts;

/// An open edudb store.
#[derive(Debug)]
pub struct Db {
    engine: Engine,
    /// What it was opened with, to open it again after a vacuum.
    options: OpenOptions,
}

impl Db {
    /// The engine behind this store, for a shard set's queries.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Opens an existing store; [`crate::Error::NoStore`] when the directory is
    /// absent or empty, [`crate::Error::NotAStore`] when it holds something else.
    pub fn open(dir: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(dir, &OpenOptions::default())
    }

    /// Opens the store at `dir`, creating it when absent.
    pub fn create(dir: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(
            dir,
            &OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
    }

    /// Opens (or, with `options.create`, creates) the store at `dir` with
    /// the given embedder; [`crate::Error::EmbedderMismatch`] when the store's
    /// vectors were made by a different one.
    /// A shard set's directory is refused ([`crate::Error::BadShardSet`]):
    /// it is opened as one ([`crate::ShardSet::open`]).
    pub fn open_with(dir: impl AsRef<Path>, options: &OpenOptions) -> Result<Db> {
        let dir = dir.as_ref();
        if crate::ShardSet::is_shard_set(dir) {
            return Err(crate::Error::BadShardSet {
                path: dir.to_owned(),
                message: "it is a shard set, not one store: open it as a shard set".into(),
            });
        }
        Ok(Db {
            engine: Engine::open(dir, options)?,
            options: OpenOptions {
                create: false,
                ..options.clone()
            },
        })
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// The store's embedder.
    pub fn embedder(&self) -> &dyn Embedder {
        self.engine.embedder()
    }

    /// The configuration of the store's embedder.
    pub fn embedder_config(&self) -> &EmbedderConfig {
        self.engine.embedder_config()
    }

    /// Where batched arithmetic runs (see [`Device::detect`]).
    pub fn device(&self) -> &Device {
        self.engine.device()
    }

    /// Sets how many candidates a vector-graph search explores, at least
    /// (default [`crate::storage::vectors::EF_SEARCH`]), for this `Db`'s lifetime;
    /// loads the index if needed. See [`crate::storage::vectors::VectorIndex::set_search_effort`].
    pub fn set_vector_search_effort(&self, candidates: usize) -> Result<()> {
        self.engine.set_vector_search_effort(candidates)
    }

    /// What the vector index holds (loading it if needed).
    pub fn vector_counts(&self) -> Result<VectorCounts> {
        self.engine.vector_counts()
    }

    /// Rebuilds the full-text and vector indexes from the store. Damaged
    /// documents are left out of both and returned, so the rest stays
    /// searchable and they can be removed ([`Db::remove`]).
    pub fn reindex(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<Vec<Damaged>> {
        self.engine.reindex(progress, cancel)
    }

    /// Whether a failure in the file system (a full disk under the storage
    /// engine) abandoned this handle: every later call fails with
    /// [`crate::Error::Abandoned`], and only a new process can open the
    /// store again.
    pub fn is_abandoned(&self) -> bool {
        self.engine.store().is_abandoned()
    }

    /// Abandons the store's handle as a full disk would, for tests.
    #[cfg(test)]
    pub(crate) fn abandon(&self) {
        self.engine.store().abandon();
    }

    /// Copies every document and session of this store that still reads
    /// whole (records decoded, documents valid, a session's turns all
    /// there and matching its dialogue) into a new store at `to`, built
    /// with the same embedder, whose indexes are built as it is written;
    /// returns what was copied and what was left out, with why. For a
    /// damaged store that sled can still open but not repair in place: the
    /// new store passes `check`. Each document (and each session, with all
    /// its turns) is written in one batch, so a cancelled or crashed
    /// salvage leaves `to` holding whole documents only. `to` must be
    /// absent or empty.
    pub fn salvage(
        &self,
        to: impl AsRef<Path>,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        self.engine.salvage(to.as_ref(), progress, cancel)
    }

    /// Writes a consistent copy of this store, open and in use, to `to`
    /// (absent or empty, outside the store): every document and session
    /// as they were at one moment, the report's `change`, with every write
    /// before it and none after. Writers wait only while the documents
    /// and sessions changed during the copy are copied again (and every
    /// document's metadata compared); readers never wait. The copy is a store of its own (its indexes built as it
    /// is written) that opens and checks clean; until it is whole it lies
    /// under `to` with `.partial` added, so a backup stopped at any moment
    /// leaves no `to`.
    pub fn backup(
        &self,
        to: impl AsRef<Path>,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<BackupReport> {
        self.engine.backup(to.as_ref(), progress, cancel)
    }

    /// Rewrites the store at `dir` compactly, giving back the space that
    /// removed and replaced documents left: a [`Db::backup`] beside it,
    /// exchanged with it in one atomic step while it is held open (no
    /// other process can use it meanwhile), the old store then removed. A
    /// stop at any moment leaves the old store or the new one, whole, at
    /// `dir`. Refused when something in it does not read whole (`check`
    /// names it; `salvage` or `rm` first), and where the platform has no
    /// atomic exchange of directories (only Linux has).
    pub fn vacuum(
        dir: impl AsRef<Path>,
        options: &OpenOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<VacuumReport> {
        Engine::vacuum(dir.as_ref(), options, progress, cancel)
    }

    /// Vacuums this store as [`Db::vacuum`] does, while it is held open,
    /// and opens the vacuumed store with the options this one was opened
    /// with, so that a process holding it (a server) keeps it across the
    /// vacuum: the store goes unlocked only between closing the old store
    /// and opening the new one. Gives the vacuum's outcome (on failure the
    /// store is as it was, still open) and the store open.
    pub fn vacuum_reopened(
        self,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> (Result<VacuumReport>, Result<Db>) {
        let Db { engine, options } = self;
        let dir = engine.path().to_owned();
        let reopen = || Engine::open(&dir, &options);
        match engine.vacuum_held(progress, cancel, reopen) {
            Ok((report, reopened)) => {
                let reopened = reopened.map(|engine| Db {
                    engine,
                    options: options.clone(),
                });
                (Ok(report), reopened)
            }
            Err(failed) => {
                let (err, engine) = *failed;
                (Err(err), Ok(Db { engine, options }))
            }
        }
    }

    /// Salvages the store at `from` into a new store at `to`, as
    /// [`Db::salvage`] does, also where the store's engine would lose part
    /// of it or cannot open it at all: the data log is first read page by
    /// page, without the engine; where it shows damage (which the engine
    /// would cut the log short at), or the engine cannot open `from`, the
    /// store is salvaged from what that reading holds, through a scratch
    /// store inside `from` (removed when done), and
    /// [`SalvageReport::from_log`] says so. Run it before opening a
    /// damaged store again: each open lets the engine reuse the space past
    /// a cut. `from` is opened with `options` (`create` is ignored); `to`
    /// must be absent or empty. Where the reading lost the store's record
    /// of its embedder, `options` must name it (it is refused otherwise);
    /// a lost format record is taken as this binary's format.
    pub fn salvage_store(
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
        options: &OpenOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<SalvageReport> {
        let options = OpenOptions {
            create: false,
            ..options.clone()
        };
        Engine::salvage_store(from.as_ref(), to.as_ref(), &options, progress, cancel)
    }

    /// Brings the vector graph up to the store's latest change now, with
    /// progress, and saves it: ingest leaves the graph to the first search
    /// that needs it (inserts cost more than the rest of ingest), which is
    /// then slow; this runs that work when the caller chooses.
    pub fn build_vectors(&self, progress: &dyn Progress, cancel: &CancelToken) -> Result<()> {
        self.engine.build_vectors(progress, cancel)
    }

    /// Ingests `sources`: reads, decodes, analyses them on worker threads and
    /// writes each document in one atomic batch (replacing any document with
    /// its id). Inputs with bad content (invalid UTF-8, binary, empty) are
    /// reported in [`IngestReport::failures`] while the rest go on; storage
    /// failures stop the run. On cancellation, documents already written
    /// stay, and [`crate::Error::Cancelled`] is returned.
    pub fn ingest(
        &self,
        sources: &[Source],
        options: IngestOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<IngestReport> {
        self.engine.ingest(sources, options, progress, cancel)
    }

    /// Ingests one document from bytes under `id`; its content error, if
    /// any, is returned as the error.
    pub fn ingest_bytes(
        &self,
        id: &str,
        bytes: Vec<u8>,
        options: IngestOptions,
    ) -> Result<DocMeta> {
        self.engine.ingest_bytes(id, bytes, options)
    }

    /// Writes documents prepared apart from any store
    /// ([`crate::Preparer`]), replacing any with their ids, all in one
    /// atomic batch: after a crash either all of them are there or none.
    /// Each must have been prepared with this store's embedder (same
    /// identity and dimension) and the ids must differ; otherwise nothing
    /// is written. A document written this way is the one this store's
    /// ingest would have written from the same input.
    pub fn write_prepared(&self, docs: Vec<PreparedDocument>) -> Result<Vec<DocMeta>> {
        self.engine.write_prepared(docs)
    }

    /// Deletes document `id` completely (records and index entries). A
    /// session's turn is refused ([`crate::Error::TurnDocument`]): turns go with
    /// their session ([`Db::remove_session`]). Removing a document that
    /// [`Db::check`] names as lost to damage acknowledges the loss, so
    /// checks stop naming it.
    pub fn remove(&self, id: &str) -> Result<()> {
        self.engine.remove(id)
    }

    /// Rebuilds document `id`'s DAG with edge weights from attention a
    /// caller supplied for every one of its windows (see
    /// [`crate::ingest::dag::supplied`]) instead of computed attention, and writes
    /// it in one atomic batch. Nothing is written when the attention does
    /// not fit the DAG.
    pub fn reweight_dag(&self, id: &str, supplied: &SuppliedAttention) -> Result<()> {
        self.engine.reweight_dag(id, supplied)
    }

    /// Bounds the memory queries use to keep documents decoded between
    /// queries (default 64 MiB of document data; 0 turns the cache off).
    pub fn set_document_cache_bytes(&self, bytes: usize) {
        self.engine.set_document_cache_bytes(bytes)
    }

    /// Documents held decoded between queries, and their estimated bytes.
    pub fn document_cache_usage(&self) -> (usize, usize) {
        self.engine.document_cache_usage()
    }

    /// The `k` nodes or EDUs whose vectors are nearest to `text`'s (cosine
    /// similarity, best first), over the whole store. `exact` scores every
    /// stored vector instead of searching the graph: slow, but the truth
    /// the graph's recall is measured against. (Without `exact`, a
    /// process's first few searches scan the flat tables saved with the
    /// graph, also exactly, rather than loading it; see
    /// docs/architecture.md.)
    pub fn nearest(
        &self,
        text: &str,
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        self.engine.nearest(text, target, k, exact)
    }

    /// Like [`Db::nearest`], for a query vector the application embedded
    /// itself with the store's embedder (normalised here): it must have the
    /// store's dimension and finite components.
    pub fn nearest_vector(
        &self,
        vector: &[f32],
        target: Target,
        k: usize,
        exact: bool,
    ) -> Result<Vec<RankedHit>> {
        self.engine.nearest_vector(vector, target, k, exact)
    }

    /// Document `id`'s weighted DAG (through the document cache).
    pub fn dag(&self, id: &str) -> Result<Dag> {
        self.engine.dag(id)
    }

    /// The nodes at `level` (every level when `None`) of document `id`'s
    /// DAG with their text and out-edges, as SHOW DAG and `edudb dag` list them.
    pub fn dag_listing(&self, id: &str, level: Option<u16>) -> Result<DagListing> {
        self.engine.dag_listing(id, level)
    }

    /// Metadata of every document, in id order. Session turns are
    /// documents too, but are not listed here ([`Db::sessions`] lists
    /// sessions; [`Db::document`] still reads a turn by its id).
    pub fn documents(&self) -> Result<Vec<DocMeta>> {
        self.engine.documents()
    }

    /// The documents meeting `condition`, a WHERE condition on whole
    /// documents (`meta.company = 'Boeing' AND meta.year >= 2020`, `doc =
    /// 'id'`), in id order. Errors name line and column.
    pub fn documents_where(&self, condition: &str) -> Result<Vec<DocMeta>> {
        let parsed = crate::query::parser::parse_condition(condition)?;
        let ids = crate::query::plan::documents_where(
            condition,
            &parsed,
            &crate::query::corpus::Corpus::one(&self.engine),
        )?;
        let mut metas = self.engine.documents()?;
        metas.retain(|meta| ids.binary_search(&meta.id).is_ok());
        Ok(metas)
    }

    /// Document `id`'s metadata (empty when it has none).
    pub fn metadata(&self, id: &str) -> Result<Metadata> {
        self.engine.metadata(id)
    }

    /// Every document's metadata that has some, in id order; a record that
    /// does not decode is returned as its damage.
    pub fn all_metadata(&self) -> Result<Vec<(String, Result<Metadata>)>> {
        self.engine.all_metadata()
    }

    /// Sets the keys of `set` and removes those of `unset` in document
    /// `id`'s metadata, in one atomic write without re-ingesting it;
    /// returns the metadata as it now is.
    pub fn update_metadata(
        &self,
        id: &str,
        set: &[(String, MetaValue)],
        unset: &[String],
    ) -> Result<Metadata> {
        self.engine.update_metadata(id, set, unset)
    }

    /// The stored document `id`: its metadata, text, EDUs, tree and (for
    /// one read from a PDF) pages.
    pub fn document(&self, id: &str) -> Result<Document> {
        self.engine.document(id)?.to_document()
    }

    /// The structural tree of document `id`.
    pub fn tree(&self, id: &str) -> Result<Tree> {
        self.engine.tree(id)
    }

    /// Where document `id`'s text lies on the pages of its PDF: every page
    /// and every line's bytes and box (`None` for other formats).
    pub fn pages(&self, id: &str) -> Result<Option<PageLayout>> {
        self.engine.pages(id)
    }

    /// EDUs `first..=last` of document `id` with their text (all when `range` is `None`).
    pub fn edus(&self, id: &str, range: Option<(u32, u32)>) -> Result<Vec<EduText>> {
        self.engine.edus(id, range)
    }

    /// BM25 search over EDU texts and section titles, best first.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        self.engine.search(query, limit)
    }

    /// Totals over the store.
    pub fn stats(&self) -> Result<Stats> {
        self.engine.stats()
    }

    /// Validates every stored document, its stored vectors, every session's
    /// dialogue against its turn documents, and that the full-text index is
    /// caught up with the store. The vector graph is reported, not built.
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = self.engine.check()?;
        report
            .damaged
            .extend(memory::session::check_session_documents(&self.engine));
        Ok(report)
    }

    /// Every document's DAG as one graph (built from the store on first
    /// use, and again after any change); session turns are left out.
    pub fn dag_index(&self) -> Result<Arc<DagIndex>> {
        self.engine.dag_index()
    }

    /// Propagates `batch` score vectors at once over the whole store's DAG
    /// ([`Db::dag_index`]; `seeds` node-major, `nodes × batch`, in its
    /// global node order) and returns each query's `k` best nodes.
    pub fn propagate_batch(
        &self,
        seeds: &[f32],
        batch: usize,
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        self.engine.propagate_batch(seeds, batch, options, k)
    }

    /// [`Db::propagate_batch`] for text queries: each node's direct
    /// similarity is the cosine of its vector to the query's embedding.
    pub fn propagate_texts(
        &self,
        queries: &[&str],
        options: PropagateOptions,
        k: usize,
    ) -> Result<Vec<Vec<DagHit>>> {
        self.engine.propagate_texts(queries, options, k)
    }

    /// Parses, binds and runs one statement.
    pub fn query(&self, statement: &str, params: &Params) -> Result<QueryResult> {
        self.run(&Query::parse(statement)?, params)
    }

    /// What the language-model steps cost to build each document built
    /// with them (`IngestOptions::structurer`), in id order; documents
    /// built without a model are not listed.
    pub fn build_costs(&self) -> Result<Vec<(String, LlmCost)>> {
        self.engine.build_costs()
    }

    /// Answers `question` from the store with the chat model given at open
    /// (`OpenOptions::chat`): retrieves evidence with `options`' statement
    /// (best first, under its budget), shows it to the model a group at a
    /// time until the model judges it enough, then asks for an answer that
    /// cites the evidence by its coordinates. Every step is in the result.
    pub fn ask(
        &self,
        question: &str,
        options: &AskOptions,
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<AskResult> {
        crate::ask::run::ask(
            &Corpus::one(&self.engine),
            question,
            options,
            progress,
            cancel,
        )
    }

    /// The evidence [`Db::ask`] would read, best first, as a cursor an agent
    /// reads itself (no chat model needed).
    pub fn evidence(&self, question: &str, options: &AskOptions) -> Result<Evidence> {
        Evidence::retrieve(
            &Corpus::one(&self.engine),
            question,
            options.statement(),
            options.budget,
        )
    }

    /// Parses a statement once for repeated [`Db::run`]s.
    pub fn prepare(&self, statement: &str) -> Result<Query> {
        Ok(Query::parse(statement)?)
    }

    /// Binds `params` and runs a prepared statement.
    pub fn run(&self, query: &Query, params: &Params) -> Result<QueryResult> {
        query.run(&self.engine, params)
    }

    /// Appends a turn spoken by `role` to session `session` (created by its
    /// first turn), placed as `placement` says ([`Placement::Auto`]
    /// decides from similarities; see [`crate::memory::placement`]). The
    /// turn is stored as its own plain-text document
    /// ([`crate::model::ids::turn_doc_id`]) and written with the session's
    /// updated dialogue record in one atomic batch; it becomes the current
    /// turn. What [`crate::memory::check_turn_input`] refuses (a bad
    /// session id, blank, oversized or binary text), text with no words to
    /// index ([`crate::Error::EmptyTurn`]), and an unknown session, topic or turn
    /// for [`Placement::Topic`]/[`Placement::Fork`] are errors that write
    /// nothing.
    pub fn append_turn(
        &self,
        session: &str,
        role: Role,
        text: &str,
        placement: Placement,
    ) -> Result<TurnReceipt> {
        let input = TurnInput {
            placement,
            ..TurnInput::new(role, text)
        };
        memory::append::append_turn(&self.engine, session, input)
    }

    /// Appends `turns` to session `session` in order, as [`Db::append_turn`]
    /// appends one (each with its own placement and optional time), in one
    /// atomic batch: all of them or, on any error or cancellation, none.
    /// Each turn is analysed once, in parallel, so a long history loads
    /// in one call. Returns a receipt per turn.
    pub fn append_turns(
        &self,
        session: &str,
        turns: &[TurnInput],
        progress: &dyn Progress,
        cancel: &CancelToken,
    ) -> Result<Vec<TurnReceipt>> {
        memory::append::append_turns(&self.engine, session, turns, progress, cancel)
    }

    /// Session `id`'s stored dialogue record, or [`crate::Error::NoSuchSession`].
    pub fn dialogue(&self, id: &str) -> Result<Dialogue> {
        memory::session::dialogue(&self.engine, id).map(std::sync::Arc::unwrap_or_clone)
    }

    /// Session `id`'s dialogue tree with the text of every summary:
    /// topics, their branches, their turns; the current turn marked.
    pub fn session(&self, id: &str) -> Result<SessionView> {
        memory::session::session(&self.engine, id)
    }

    /// Every session, in id order.
    pub fn sessions(&self) -> Result<Vec<SessionMeta>> {
        memory::session::sessions(&self.engine)
    }

    /// The context for session `id`'s next turn within `budget` tokens
    /// (see [`crate::memory::context`]; never over the budget). Without a
    /// query: the active path in full, then the stored summaries of the
    /// active topic's other branches and of the other topics. With
    /// `query` (what the user just said): the most recent path turns, the
    /// turns of the whole history most relevant to it with their
    /// neighbours, and their topics' summaries, grouped by topic.
    pub fn session_context(
        &self,
        id: &str,
        budget: u64,
        query: Option<&str>,
    ) -> Result<SessionContext> {
        memory::session::session_context(&self.engine, id, budget, query)
    }

    /// Removes session `id`: all its turn documents (records and index
    /// entries) and its dialogue record, in one atomic batch.
    pub fn remove_session(&self, id: &str) -> Result<()> {
        memory::forget::remove_session(&self.engine, id)
    }

    /// Forgets turn `turn` of session `session`: its document (text,
    /// records, index entries) is removed, while the turn keeps its place
    /// in the dialogue tree (number, role, time, parent) so later turns and
    /// their citations keep theirs; its branch's and topic's summaries are
    /// rebuilt without it; one atomic batch. Contexts, queries and views
    /// leave it out from then on. Forgetting it again does nothing.
    pub fn forget_turn(&self, session: &str, turn: u32) -> Result<()> {
        memory::forget::forget_turn(&self.engine, session, turn)
    }
}
