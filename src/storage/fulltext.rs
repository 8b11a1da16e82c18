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

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tantivy::collector::TopDocs;
use tantivy::index::SegmentId;
use tantivy::merge_policy::LogMergePolicy;
use tantivy::query::{
    Bm25StatisticsProvider, Bm25Weight, BooleanQuery, ConstScoreQuery, Occur, Query, QueryParser,
    TermQuery,
};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term, doc};

use crate::error::{Error, Result};
use crate::model::document::Document;
pub use crate::model::document::representation;
use crate::model::edu::{EduKind, Span};
use crate::model::ids::is_turn_id;
use crate::model::rank::{RankedHit, Target};
use crate::model::tree::NodeKind;
use crate::storage::fulltext_directory::IndexDirectory;

/// Memory budget of the single indexing thread.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;
/// Segments of at most this many entries (what small writes leave) are
/// merged in the background after commits; larger ones, from bulk
/// ingests, stay as written, so that no merge rewrites most of the index.
const MERGED_SEGMENT_ENTRIES: usize = 10_000;
/// Stored in the `node` field of EDU entries.
const NO_NODE: u64 = u64::MAX;
/// Weight of a section-title match against an EDU-text match in `search`:
/// a heading that names the query is the better answer.
const TITLE_BOOST: f32 = 2.0;
/// tantivy's BM25 term-frequency saturation constant.
const TANTIVY_BM25_K1: f32 = 1.2;

#[derive(Debug, Clone, Copy)]
struct Fields {
    doc: Field,
    node: Field,
    first: Field,
    last: Field,
    /// EDU texts.
    text: Field,
    /// Section titles.
    title: Field,
    /// Node representations.
    node_text: Field,
    /// Session turns' EDU texts: kept apart so `*` never ranks them.
    turn_text: Field,
    /// Session turns' node representations.
    turn_node_text: Field,
    /// Which of the four ranked fields the entry has (its name), so each
    /// field's BM25 statistics count only its own entries.
    kind: Field,
}

/// The tantivy index and its single writer.
pub struct FullText {
    /// Made at the first change: a process that only reads never pays for
    /// the writer's threads, its lock file and its garbage collection.
    /// Dropping the index waits for the writer's merges (see [`Drop`]).
    writer: Option<IndexWriter>,
    reader: FullTextReader,
}

/// A cheap, clonable read handle: searches run without the writer's lock.
#[derive(Clone)]
pub struct FullTextReader {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Each live segment's opened coordinate columns, shared by every clone:
    /// opening them costs more than reading a query's hits from them.
    columns: Arc<Mutex<HashMap<SegmentId, Columns>>>,
}

impl std::fmt::Debug for FullText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullText").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for FullTextReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullTextReader").finish_non_exhaustive()
    }
}

/// Wraps a tantivy error, keeping it as the source.
fn fulltext<E: std::error::Error + Send + Sync + 'static>(err: E) -> Error {
    Error::FullText {
        source: Box::new(err),
    }
}

/// An index entry that breaks the schema's guarantees (a missing column
/// or value): the index is damaged, and `reindex` rebuilds it.
fn damaged(message: String) -> Error {
    Error::Corrupt {
        key: "full-text index".into(),
        message,
    }
}

fn schema() -> Schema {
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

impl FullText {
    /// Opens the index in `dir`, creating it when absent; an index with
    /// another schema is an error (the caller rebuilds it).
    pub fn open(dir: &Path) -> Result<FullText> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let directory = IndexDirectory::open(dir).map_err(fulltext)?;
        let index = Index::open_or_create(directory, schema()).map_err(fulltext)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(fulltext)?;
        let field = |name: &str| index.schema().get_field(name).map_err(fulltext);
        let fields = Fields {
            doc: field("doc")?,
            node: field("node")?,
            first: field("first")?,
            last: field("last")?,
            text: field("text")?,
            title: field("title")?,
            node_text: field("node_text")?,
            turn_text: field("turn_text")?,
            turn_node_text: field("turn_node_text")?,
            kind: field("kind")?,
        };
        Ok(FullText {
            writer: None,
            reader: FullTextReader {
                index,
                reader,
                fields,
                columns: Arc::default(),
            },
        })
    }

    /// The writer, made at the first call (see [`writer_in`]).
    fn writer(&mut self) -> Result<&mut IndexWriter> {
        writer_in(&mut self.writer, &self.reader.index)
    }

    /// Makes the writer now rather than at the first change, so that a
    /// write can overlap it with work done before its changes (analysing
    /// text, loading the tokenizer).
    pub fn start_writing(&mut self) -> Result<()> {
        self.writer().map(|_| ())
    }

    /// A read handle that stays current across commits.
    pub fn reader(&self) -> FullTextReader {
        self.reader.clone()
    }

    /// The store sequence number the last commit applied (0 when none).
    pub fn applied_seq(&self) -> Result<u64> {
        let metas = self.reader.index.load_metas().map_err(fulltext)?;
        Ok(metas.payload.and_then(|p| p.parse().ok()).unwrap_or(0))
    }

    /// Removes every entry of document `id` (uncommitted until [`FullText::commit`]).
    pub fn remove(&mut self, id: &str) -> Result<()> {
        let term = Term::from_field_text(self.reader.fields.doc, id);
        self.writer()?.delete_term(term);
        Ok(())
    }

    /// Replaces the entries of `doc`: one per EDU (headings excepted, their
    /// sections stand for them) and one per node. A session turn's entries
    /// go to the turn fields.
    pub fn replace(&mut self, doc: &Document) -> Result<()> {
        let id = doc.meta.id.as_str();
        let fields = self.reader.fields;
        let turn = is_turn_id(id);
        let (text_field, node_field) = if turn {
            (fields.turn_text, fields.turn_node_text)
        } else {
            (fields.text, fields.node_text)
        };
        let schema = self.reader.index.schema();
        let (text_kind, node_kind) = (
            schema.get_field_name(text_field).to_owned(),
            schema.get_field_name(node_field).to_owned(),
        );
        self.remove(id)?;
        let writer = self.writer()?;
        for edu in doc.edus.iter().filter(|e| e.kind != EduKind::Heading) {
            let text = &doc.text[edu.start as usize..edu.end as usize];
            writer
                .add_document(doc!(
                    fields.doc => id,
                    fields.node => NO_NODE,
                    fields.first => u64::from(edu.id),
                    fields.last => u64::from(edu.id),
                    text_field => text,
                    fields.kind => text_kind.as_str(),
                ))
                .map_err(fulltext)?;
        }
        for node in &doc.tree.nodes {
            let mut entry = doc!(
                fields.doc => id,
                fields.node => u64::from(node.id),
                fields.first => u64::from(node.span.first),
                fields.last => u64::from(node.span.last),
                node_field => representation(doc, node),
                fields.kind => node_kind.as_str(),
            );
            if node.kind == NodeKind::Section && !turn {
                entry.add_text(fields.title, &node.title);
            }
            writer.add_document(entry).map_err(fulltext)?;
        }
        Ok(())
    }

    /// Drops every entry (uncommitted until [`FullText::commit`]). The
    /// writer's background merges are waited for first, with a fresh
    /// writer after them: a merge still running when every entry is
    /// dropped publishes its segment later, and the next commits then
    /// lose the entries written since the clear.
    pub fn clear(&mut self) -> Result<()> {
        if let Some(writer) = self.writer.take() {
            writer.wait_merging_threads().map_err(fulltext)?;
        }
        self.writer()?
            .delete_all_documents()
            .map(|_| ())
            .map_err(fulltext)
    }

    /// Drops every uncommitted change with a fresh writer (after a failure
    /// the old one may have lost some of them); without a writer there is
    /// nothing to drop.
    pub fn rollback(&mut self) -> Result<()> {
        if let Some(writer) = &mut self.writer {
            writer.rollback().map_err(fulltext)?;
            // The fresh writer comes with tantivy's default merge policy.
            writer.set_merge_policy(small_segment_merges());
        }
        Ok(())
    }

    /// Durably commits pending changes as having applied store change
    /// `seq`: [`FullText::prepare_commit`], then [`PreparedCommit::commit`].
    pub fn commit(&mut self, seq: u64) -> Result<()> {
        self.prepare_commit(seq)?.commit()
    }

    /// Writes the pending changes' segments (the slow part of a commit)
    /// and returns the commit, as having applied store change `seq`, for
    /// the caller to make durable once the store is. Dropped uncommitted,
    /// the changes stay pending; [`FullText::rollback`] drops them.
    pub fn prepare_commit(&mut self, seq: u64) -> Result<PreparedCommit<'_>> {
        let writer = writer_in(&mut self.writer, &self.reader.index)?;
        let mut prepared = writer.prepare_commit().map_err(fulltext)?;
        prepared.set_payload(&seq.to_string());
        Ok(PreparedCommit {
            prepared,
            reader: &self.reader,
        })
    }

    /// Number of segments the index searches.
    #[cfg(test)]
    fn segment_count(&self) -> usize {
        self.reader.index.searchable_segment_ids().unwrap().len()
    }
}

/// A commit whose segments are written ([`FullText::prepare_commit`]) but
/// that the index does not hold yet.
pub struct PreparedCommit<'a> {
    prepared: tantivy::indexer::PreparedCommit<'a>,
    reader: &'a FullTextReader,
}

impl PreparedCommit<'_> {
    /// Makes the commit the index's durable state and shows it to readers.
    /// The small segments that many small writes leave are merged in the
    /// background (a merge keeps the last commit's payload).
    pub fn commit(self) -> Result<()> {
        self.prepared.commit().map_err(fulltext)?;
        self.reader.reader.reload().map_err(fulltext)
    }
}

/// The index writer in `slot`, made at the first call: one indexing
/// thread, small segments merged in the background, and the files a writer
/// killed mid-commit or mid-merge left removed first (no commit refers to
/// them, and the next commit may want one of their names: a segment's
/// delete file is named by the opstamp, which restarts from the last
/// commit).
fn writer_in<'a>(slot: &'a mut Option<IndexWriter>, index: &Index) -> Result<&'a mut IndexWriter> {
    let writer = match slot.take() {
        Some(writer) => writer,
        None => {
            let writer: IndexWriter = index
                .writer_with_num_threads(1, WRITER_MEMORY)
                .map_err(fulltext)?;
            writer.set_merge_policy(small_segment_merges());
            writer.garbage_collect_files().wait().map_err(fulltext)?;
            writer
        }
    };
    Ok(slot.insert(writer))
}

/// tantivy's log merge policy (eight segments of a size make a merge) over
/// segments of at most [`MERGED_SEGMENT_ENTRIES`] entries.
fn small_segment_merges() -> Box<LogMergePolicy> {
    let mut policy = LogMergePolicy::default();
    policy.set_max_docs_before_merge(MERGED_SEGMENT_ENTRIES);
    Box::new(policy)
}

/// Waits for the writer's background merges: they die with the writer, and
/// a one-command process drops it right after its commit, so without the
/// wait its segments would pile up (one per `session add`). A merge that
/// fails (a full disk, say) leaves its segments as they were (tantivy logs
/// it); an error here is the indexing thread's. A writer replaced by
/// [`FullText::rollback`] is not waited for: its merges' results are
/// discarded, and files they leave are collected at the next open.
impl Drop for FullText {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take()
            && let Err(e) = writer.wait_merging_threads()
        {
            tracing::warn!("the full-text index's writer failed while closing: {e}");
        }
    }
}

impl FullTextReader {
    /// Number of committed entries.
    pub fn entries(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether the index holds live entries of document `id`.
    pub fn holds(&self, id: &str) -> Result<bool> {
        let query = TermQuery::new(
            Term::from_field_text(self.fields.doc, id),
            IndexRecordOption::Basic,
        );
        let count = self
            .reader
            .searcher()
            .search(&query, &tantivy::collector::Count)
            .map_err(fulltext)?;
        Ok(count > 0)
    }

    /// Every document id the index has terms for (possibly some whose
    /// entries were deleted and not yet merged away): for `check`, which
    /// asks the store about each, so that a document whose metadata the
    /// store can no longer list is still named.
    pub fn document_ids(&self) -> Result<std::collections::BTreeSet<String>> {
        let mut ids = std::collections::BTreeSet::new();
        for segment in self.reader.searcher().segment_readers() {
            let index = segment.inverted_index(self.fields.doc).map_err(fulltext)?;
            let mut terms = index.terms().stream().map_err(fulltext)?;
            while terms.advance() {
                ids.insert(String::from_utf8_lossy(terms.key()).into_owned());
            }
        }
        Ok(ids)
    }

    /// BM25 search in tantivy query syntax over EDU texts and section
    /// titles (of documents, not session turns), best first.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<RankedHit>> {
        let mut parser =
            QueryParser::for_index(&self.index, vec![self.fields.text, self.fields.title]);
        parser.set_field_boost(self.fields.title, TITLE_BOOST);
        let parsed = parser.parse_query(query).map_err(|e| Error::BadSearch {
            query: query.to_owned(),
            message: e.to_string(),
        })?;
        let searcher = self.reader.searcher();
        self.top(&searcher, &parsed, limit, &searcher)
    }

    /// The field nodes or EDUs are ranked on: the turn fields when `docs`
    /// names only session turns, else the documents' fields.
    fn field_of(&self, target: Target, docs: Option<&[&str]>) -> Field {
        let turns = docs.is_some_and(|ids| !ids.is_empty() && ids.iter().all(|id| is_turn_id(id)));
        match (target, turns) {
            (Target::Nodes, false) => self.fields.node_text,
            (Target::Edus, false) => self.fields.text,
            (Target::Nodes, true) => self.fields.turn_node_text,
            (Target::Edus, true) => self.fields.turn_text,
        }
    }

    /// Ranks nodes or EDUs by BM25 against free `text` (any of its terms;
    /// no query syntax, so any user text is accepted), within `docs` when
    /// given, best first. Session turns are ranked only when `docs` names
    /// nothing else (a `session('id')` scope); otherwise only documents.
    pub fn rank(
        &self,
        text: &str,
        target: Target,
        docs: Option<&[&str]>,
        limit: usize,
    ) -> Result<Vec<RankedHit>> {
        let field = self.field_of(target, docs);
        let searcher = self.reader.searcher();
        let statistics = self.statistics(&searcher, field)?;
        self.rank_field(text, field, docs, limit, &searcher, &statistics)
    }

    /// Ranks sections by their titles alone against free `text`, within
    /// `docs` when given, best first: the sections whose names `text`
    /// mentions lead (a short title all of whose terms occur scores
    /// highest).
    pub fn rank_titles(
        &self,
        text: &str,
        docs: Option<&[&str]>,
        limit: usize,
    ) -> Result<Vec<RankedHit>> {
        let searcher = self.reader.searcher();
        // Titles are held by documents' node entries: their count, not
        // every entry's, is the collection size.
        let statistics = self.statistics(&searcher, self.fields.node_text)?;
        self.rank_field(text, self.fields.title, docs, limit, &searcher, &statistics)
    }

    /// How specific `title` is: the fewest sections whose titles hold one of
    /// its terms (0 when it has none, or none is indexed). Sections of
    /// removed documents count until a merge drops them.
    pub fn title_sections(&self, title: &str) -> Result<u64> {
        let searcher = self.reader.searcher();
        let mut fewest: Option<u64> = None;
        for term in self.terms(title, self.fields.title)? {
            let sections = searcher.doc_freq(&term).map_err(fulltext)?;
            fewest = Some(fewest.map_or(sections, |f| f.min(sections)));
        }
        Ok(fewest.unwrap_or(0))
    }

    /// The entries whose `field` holds any of `text`'s terms, within `docs`
    /// when given, by BM25 with `statistics`, best first.
    fn rank_field(
        &self,
        text: &str,
        field: Field,
        docs: Option<&[&str]>,
        limit: usize,
        searcher: &Searcher,
        statistics: &dyn Bm25StatisticsProvider,
    ) -> Result<Vec<RankedHit>> {
        let terms = self.terms(text, field)?;
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let any_term = BooleanQuery::new(
            terms
                .into_iter()
                .map(|t| {
                    let q: Box<dyn Query> =
                        Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                    (Occur::Should, q)
                })
                .collect(),
        );
        let Some(docs) = docs else {
            return self.top(searcher, &any_term, limit, statistics);
        };
        let any_doc = docs
            .iter()
            .map(|id| {
                let term = Term::from_field_text(self.fields.doc, id);
                let q: Box<dyn Query> = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                (Occur::Should, q)
            })
            .collect();
        // The scope only filters: scored, it would add the document id's
        // idf to every hit and break the scale of `rank_ceiling`.
        let scope = ConstScoreQuery::new(Box::new(BooleanQuery::new(any_doc)), 0.0);
        let within_docs = BooleanQuery::new(vec![
            (Occur::Must, Box::new(any_term) as Box<dyn Query>),
            (Occur::Must, Box::new(scope)),
        ]);
        self.top(searcher, &within_docs, limit, statistics)
    }

    /// The BM25 statistics `field` is ranked with (see [`FieldStatistics`]).
    fn statistics<'a>(&self, searcher: &'a Searcher, field: Field) -> Result<FieldStatistics<'a>> {
        let name = self.index.schema().get_field_name(field).to_owned();
        let entries = searcher
            .doc_freq(&Term::from_field_text(self.fields.kind, &name))
            .map_err(fulltext)?;
        Ok(FieldStatistics { searcher, entries })
    }

    /// The BM25 score that [`FullTextReader::rank`] would give an entry of
    /// average length containing each of `text`'s terms once: the sum of
    /// the terms' idf. A fixed scale for a query's scores (a hit matching
    /// only its common words scores a small fraction of it), where dividing
    /// by the best hit would lift any weak match to 1. 0 when nothing is
    /// indexed or `text` has no terms. `docs` picks the fields as `rank` does.
    pub fn rank_ceiling(&self, text: &str, target: Target, docs: Option<&[&str]>) -> Result<f32> {
        let field = self.field_of(target, docs);
        let terms = self.terms(text, field)?;
        let searcher = self.reader.searcher();
        let statistics = self.statistics(&searcher, field)?;
        if terms.is_empty() || statistics.entries == 0 {
            return Ok(0.0);
        }
        // tantivy's `max_score` is idf × (1 + k1) (an entry saturated with
        // the terms); one occurrence at average length scores idf.
        let saturated = Bm25Weight::for_terms(&statistics, &terms)
            .map_err(fulltext)?
            .max_score();
        Ok(saturated / (1.0 + TANTIVY_BM25_K1))
    }

    /// The distinct terms `field`'s analyser makes of `text`.
    fn terms(&self, text: &str, field: Field) -> Result<Vec<Term>> {
        let mut analyzer = self.index.tokenizer_for_field(field).map_err(fulltext)?;
        let mut terms: Vec<Term> = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while let Some(token) = stream.next() {
            let term = Term::from_field_text(field, &token.text);
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
        Ok(terms)
    }

    /// The best `limit` hits of `query`. tantivy panics on some damaged
    /// index files (a fast-field column cut short) instead of failing; such
    /// a panic is the index's damage, not the caller's crash.
    fn top(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        limit: usize,
        statistics: &dyn Bm25StatisticsProvider,
    ) -> Result<Vec<RankedHit>> {
        let read =
            crate::error::catch_quietly(|| self.read_top(searcher, query, limit, statistics));
        read.unwrap_or_else(|panic| {
            Err(damaged(format!(
                "reading it failed ({}); `edudb reindex` rebuilds it",
                crate::error::panic_message(&*panic)
            )))
        })
    }

    fn read_top(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        limit: usize,
        statistics: &dyn Bm25StatisticsProvider,
    ) -> Result<Vec<RankedHit>> {
        // tantivy reserves room for twice the limit up front: no more hits
        // than entries can come back, so a huge limit costs nothing more.
        let entries = usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX);
        let limit = limit.min(entries).max(1);
        let top = searcher
            .search_with_statistics_provider(
                query,
                &TopDocs::with_limit(limit).order_by_score(),
                statistics,
            )
            .map_err(fulltext)?;
        // Each segment's document ids are read from its dictionary in one
        // ordered pass, not one dictionary lookup per hit.
        let mut segments: Vec<Option<Columns>> = vec![None; searcher.segment_readers().len()];
        let mut ords: Vec<Vec<u64>> = vec![Vec::new(); segments.len()];
        let mut rows = Vec::with_capacity(top.len());
        for (score, address) in top {
            let slot = &mut segments[address.segment_ord as usize];
            if slot.is_none() {
                *slot = Some(self.columns_of(searcher, address.segment_ord)?);
            }
            let columns = slot.as_ref().expect("opened above");
            let (ord, hit) = columns.hit(address.doc_id, score)?;
            ords[address.segment_ord as usize].push(ord);
            rows.push((address.segment_ord as usize, ord, hit));
        }
        let mut names: Vec<HashMap<u64, String>> = Vec::with_capacity(segments.len());
        for (columns, mut wanted) in segments.iter().zip(ords) {
            wanted.sort_unstable();
            wanted.dedup();
            names.push(match columns {
                Some(columns) => columns.doc_ids(&wanted)?,
                None => HashMap::new(),
            });
        }
        rows.into_iter()
            .map(|(segment, ord, mut hit)| {
                hit.doc = names[segment]
                    .get(&ord)
                    .cloned()
                    .ok_or_else(|| damaged(format!("no document id for ordinal {ord}")))?;
                Ok(hit)
            })
            .collect()
    }

    /// The coordinate columns of `searcher`'s segment `ordinal`, opened on
    /// first use and kept while the segment lives (a segment never changes;
    /// merges make new ones, and columns of segments gone are dropped).
    fn columns_of(&self, searcher: &Searcher, ordinal: u32) -> Result<Columns> {
        let segment = searcher.segment_reader(ordinal);
        let id = segment.segment_id();
        let mut cache = self.columns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(columns) = cache.get(&id) {
            return Ok(columns.clone());
        }
        let columns = Columns::open(segment)?;
        let live: Vec<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(|s| s.segment_id())
            .collect();
        cache.retain(|id, _| live.contains(id));
        cache.insert(id, columns.clone());
        Ok(columns)
    }
}

/// BM25 statistics of one ranked field that count only the entries having
/// it: an entry is an EDU or a node of a document or of a session turn, and
/// each kind has its own field, so neither the other kinds' entries nor the
/// number of session turns shift a field's idf and average length.
struct FieldStatistics<'a> {
    searcher: &'a Searcher,
    /// Entries having the field (deleted ones until a merge drops them).
    entries: u64,
}

impl Bm25StatisticsProvider for FieldStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searcher.total_num_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.entries.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher.doc_freq(term)
    }
}

/// The coordinate columns of one segment.
#[derive(Clone)]
struct Columns {
    doc: tantivy::columnar::StrColumn,
    node: tantivy::columnar::Column<u64>,
    first: tantivy::columnar::Column<u64>,
    last: tantivy::columnar::Column<u64>,
}

impl Columns {
    fn open(segment: &tantivy::SegmentReader) -> Result<Columns> {
        let fast = segment.fast_fields();
        Ok(Columns {
            doc: fast
                .str("doc")
                .map_err(fulltext)?
                .ok_or_else(|| damaged("no doc column".into()))?,
            node: fast.u64("node").map_err(fulltext)?,
            first: fast.u64("first").map_err(fulltext)?,
            last: fast.u64("last").map_err(fulltext)?,
        })
    }

    /// Reads one hit's coordinates and the dictionary ordinal of its
    /// document id (the hit's `doc` is left empty).
    fn hit(&self, row: tantivy::DocId, score: f32) -> Result<(u64, RankedHit)> {
        let number = |column: &tantivy::columnar::Column<u64>, name: &str| {
            column
                .first(row)
                .ok_or_else(|| damaged(format!("entry without {name}")))
        };
        let ord = self
            .doc
            .term_ords(row)
            .next()
            .ok_or_else(|| damaged("entry without doc".into()))?;
        let node = Some(number(&self.node, "node")?)
            .filter(|&n| n != NO_NODE)
            .map(|n| n as u32);
        let hit = RankedHit {
            doc: String::new(),
            node,
            span: Span::new(
                number(&self.first, "first")? as u32,
                number(&self.last, "last")? as u32,
            ),
            score,
        };
        Ok((ord, hit))
    }

    /// The document ids of sorted, distinct dictionary ordinals.
    fn doc_ids(&self, ords: &[u64]) -> Result<HashMap<u64, String>> {
        let mut names = Vec::with_capacity(ords.len());
        self.doc
            .dictionary()
            .sorted_ords_to_term_cb(ords, |bytes| {
                names.push(String::from_utf8_lossy(bytes).into_owned())
            })
            .map_err(fulltext)?;
        Ok(ords.iter().copied().zip(names).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::document::Format;

    #[test]
    fn one_commit_per_process_keeps_few_segments() {
        // As `session add` does it: open, write one document, commit, drop.
        let dir = tempfile::tempdir().unwrap();
        let writes = 30u64;
        for seq in 1..=writes {
            let mut index = FullText::open(dir.path()).unwrap();
            let text = format!("Turn number {seq} mentions the lighthouse.\n");
            let doc =
                crate::ingest::pipeline::analyze(&format!("d{seq}"), text, Format::Text).unwrap();
            index.replace(&doc).unwrap();
            index.commit(seq).unwrap();
        }
        let index = FullText::open(dir.path()).unwrap();
        let segments = index.segment_count();
        assert!(segments < 8, "{segments} segments after {writes} commits");
        assert_eq!(
            index.applied_seq().unwrap(),
            writes,
            "merges keep the payload"
        );
        let reader = index.reader();
        let hits = reader.rank("lighthouse", Target::Edus, None, 100).unwrap();
        assert_eq!(
            hits.len() as u64,
            writes,
            "every document survives the merges"
        );
    }

    /// Commits document `a`, "The lamp is lit.", as change 1 of a new
    /// index in `dir`, and closes the index.
    fn commit_one_document(dir: &Path) {
        let doc = crate::ingest::pipeline::analyze("a", "The lamp is lit.\n".into(), Format::Text)
            .unwrap();
        let mut index = FullText::open(dir).unwrap();
        index.replace(&doc).unwrap();
        index.commit(1).unwrap();
    }

    #[test]
    fn a_prepared_commit_shows_nothing_until_committed_and_dropped_stays_pending() {
        let dir = tempfile::tempdir().unwrap();
        commit_one_document(dir.path());
        let mut index = FullText::open(dir.path()).unwrap();
        let doc = |id: &str, text: &str| {
            crate::ingest::pipeline::analyze(id, format!("{text}\n"), Format::Text).unwrap()
        };
        let found = |index: &FullText, word: &str| {
            let hits = index.reader().rank(word, Target::Edus, None, 10).unwrap();
            hits.len()
        };
        index.replace(&doc("b", "The kettle sings.")).unwrap();
        drop(index.prepare_commit(2).unwrap());
        assert_eq!(found(&index, "kettle"), 0);
        assert_eq!(index.applied_seq().unwrap(), 1);
        // Dropped uncommitted, the change is still pending: the next
        // commit holds it...
        index.prepare_commit(2).unwrap().commit().unwrap();
        assert_eq!(found(&index, "kettle"), 1);
        assert_eq!(index.applied_seq().unwrap(), 2);
        // ...unless a rollback dropped it first.
        index.replace(&doc("c", "The kettle boils.")).unwrap();
        drop(index.prepare_commit(3).unwrap());
        index.rollback().unwrap();
        index.commit(3).unwrap();
        assert_eq!(found(&index, "kettle"), 1);
        assert_eq!(found(&index, "boils"), 0);
        drop(index);
        let index = FullText::open(dir.path()).unwrap();
        assert_eq!(found(&index, "kettle"), 1);
        assert_eq!(found(&index, "lamp"), 1);
        assert_eq!(index.applied_seq().unwrap(), 3);
    }

    #[test]
    fn reading_never_makes_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        commit_one_document(dir.path());
        let mut index = FullText::open(dir.path()).unwrap();
        let hits = index.reader().rank("lamp", Target::Edus, None, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(index.applied_seq().unwrap(), 1);
        index.rollback().unwrap();
        assert!(index.writer.is_none(), "a read made the writer");
        index.start_writing().unwrap();
        assert!(index.writer.is_some());
    }

    #[test]
    fn a_writer_made_again_by_a_rollback_still_merges_small_segments() {
        // A rollback makes a fresh writer, with tantivy's default policy
        // until it is set again.
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        index.rollback().unwrap();
        let policy = format!("{:?}", index.writer().unwrap().get_merge_policy());
        assert!(policy.contains("max_docs_before_merge: 10000,"), "{policy}");
        let writes = 20u64;
        for seq in 1..=writes {
            let text = format!("Entry {seq} names the harbour.\n");
            let doc =
                crate::ingest::pipeline::analyze(&format!("d{seq}"), text, Format::Text).unwrap();
            index.replace(&doc).unwrap();
            index.commit(seq).unwrap();
        }
        // Dropping the index waits for its merges.
        drop(index);
        let index = FullText::open(dir.path()).unwrap();
        assert!(index.segment_count() < 8, "{}", index.segment_count());
        let hits = index
            .reader()
            .rank("harbour", Target::Edus, None, 100)
            .unwrap();
        assert_eq!(hits.len() as u64, writes);
        assert_eq!(
            index.applied_seq().unwrap(),
            writes,
            "merges keep the payload"
        );
    }

    #[test]
    fn commits_write_no_list_of_files_and_leftovers_are_collected() {
        let dir = tempfile::tempdir().unwrap();
        commit_one_document(dir.path());
        let names = |dir: &Path| -> std::collections::BTreeSet<String> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        };
        let committed = names(dir.path());
        assert!(committed.contains("meta.json"), "{committed:?}");
        assert!(!committed.contains(".managed.json"), "{committed:?}");
        // What a crash can leave: a segment file no commit names, the
        // temporary file of an atomic write, and an older store's list.
        let orphan = "0123456789abcdef0123456789abcdef.idx";
        for leftover in [orphan, ".tmpA1b2C3"] {
            std::fs::write(dir.path().join(leftover), b"partial").unwrap();
        }
        std::fs::write(dir.path().join(".managed.json"), b"[\"gone.idx\"]").unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        assert!(names(dir.path()).contains(orphan), "a reader deleted files");
        index.start_writing().unwrap();
        let left = names(dir.path());
        assert!(
            !left.contains(orphan) && !left.contains(".tmpA1b2C3"),
            "{left:?}"
        );
        assert!(committed.iter().all(|name| left.contains(name)), "{left:?}");
        assert_eq!(
            index
                .reader()
                .rank("lamp", Target::Edus, None, 10)
                .unwrap()
                .len(),
            1
        );
        index.remove("a").unwrap();
        index.commit(2).unwrap();
        assert_eq!(index.reader().entries(), 0);
    }

    #[test]
    fn bulk_segments_are_not_merged_by_commit() {
        // Eight segments of a size would make tantivy's policy merge them;
        // above MERGED_SEGMENT_ENTRIES each, commit leaves them as written.
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        let text: String = (0..=MERGED_SEGMENT_ENTRIES)
            .map(|i| format!("Line {i}.\n\n"))
            .collect();
        for seq in 1..=8u64 {
            let doc =
                crate::ingest::pipeline::analyze(&format!("bulk{seq}"), text.clone(), Format::Text)
                    .unwrap();
            index.replace(&doc).unwrap();
            index.commit(seq).unwrap();
        }
        // Dropping the index waits for any merge it started.
        drop(index);
        let index = FullText::open(dir.path()).unwrap();
        assert_eq!(index.segment_count(), 8, "every bulk segment kept");
    }

    #[test]
    fn the_rank_ceiling_keeps_a_common_word_match_small() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        let docs = [
            (
                "a",
                "The oven bakes the loaf.\n\nThe garden is green.\n\nThe river runs fast.\n",
            ),
            ("b", "The sky is blue.\n\nThe dough rises slowly.\n"),
        ];
        for (id, text) in docs {
            let doc = crate::ingest::pipeline::analyze(id, text.into(), Format::Text).unwrap();
            index.replace(&doc).unwrap();
        }
        index.commit(docs.len() as u64).unwrap();
        let reader = index.reader();
        let query = "the oven loaf";
        let ceiling = reader.rank_ceiling(query, Target::Edus, None).unwrap();
        let hits = reader.rank(query, Target::Edus, None, 10).unwrap();
        assert_eq!(hits.len(), 5, "every EDU has 'the': {hits:?}");
        let (best, weakest) = (hits[0].score / ceiling, hits[4].score / ceiling);
        assert!(best > 0.6, "all terms once: {best}");
        assert!(weakest < 0.25, "only 'the': {weakest}");
        assert_eq!(reader.rank_ceiling("", Target::Edus, None).unwrap(), 0.0);
        // A document scope filters without changing scores.
        let scoped = reader.rank(query, Target::Edus, Some(&["a"]), 10).unwrap();
        assert_eq!(scoped.len(), 3);
        for hit in &scoped {
            let unscoped = hits.iter().find(|h| h.span == hit.span && h.doc == "a");
            assert_eq!(unscoped.map(|h| h.score), Some(hit.score), "{hit:?}");
        }
    }

    #[test]
    fn cached_columns_follow_replaced_documents() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        let analyze =
            |text: &str| crate::ingest::pipeline::analyze("a", text.into(), Format::Text).unwrap();
        let first = analyze("The oven bakes the loaf.\n");
        index.replace(&first).unwrap();
        index.commit(1).unwrap();
        let reader = index.reader();
        let hits = reader.rank("oven", Target::Edus, None, 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].span, Span::new(0, 0));
        // The replacement puts the oven in the third EDU, in a new segment.
        let second = analyze("The sky is blue.\n\nThe river runs.\n\nThe oven is hot.\n");
        index.replace(&second).unwrap();
        index.commit(2).unwrap();
        let hits = reader.rank("oven", Target::Edus, None, 10).unwrap();
        assert_eq!(hits.len(), 1, "the old entry is deleted: {hits:?}");
        assert_eq!((hits[0].doc.as_str(), hits[0].span), ("a", Span::new(2, 2)));
        let searcher = reader.reader.searcher();
        let live: Vec<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(|s| s.segment_id())
            .collect();
        let cached = reader.columns.lock().unwrap();
        assert!(
            cached.keys().all(|id| live.contains(id)),
            "only live segments stay cached"
        );
    }

    #[test]
    fn each_field_is_scored_with_its_own_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        let analyze = |id: &str, text: &str| {
            crate::ingest::pipeline::analyze(id, text.into(), Format::Text).unwrap()
        };
        let doc = analyze(
            "a",
            "The oven bakes the loaf.\n\nThe garden is green and wide.\n\nThe river runs fast.\n",
        );
        index.replace(&doc).unwrap();
        index.commit(1).unwrap();
        let reader = index.reader();
        let query = "oven loaf river";
        let scores = |reader: &FullTextReader, target| -> Vec<f32> {
            let hits = reader.rank(query, target, None, 10).unwrap();
            hits.iter().map(|h| h.score).collect()
        };
        let before = (
            scores(&reader, Target::Edus),
            scores(&reader, Target::Nodes),
        );
        let ceiling = reader.rank_ceiling(query, Target::Edus, None).unwrap();
        // Many session turns, one of them on the query's words.
        for n in 0..30 {
            let id = format!("@session/s/{n:06}");
            let text = if n == 7 {
                "The oven bakes the loaf by the river.".to_owned()
            } else {
                format!("Turn {n} talks about the weather, trains and the price of tea.")
            };
            index.replace(&analyze(&id, &text)).unwrap();
        }
        index.commit(2).unwrap();
        let after = (
            scores(&reader, Target::Edus),
            scores(&reader, Target::Nodes),
        );
        assert_eq!(before, after, "documents score as before the turns came");
        assert_eq!(
            reader.rank_ceiling(query, Target::Edus, None).unwrap(),
            ceiling
        );
        // A turn scope is scored against the turns' own statistics: an
        // average turn holding the terms scores near the ceiling, not a
        // sliver of it.
        let turns: Vec<String> = (0..30).map(|n| format!("@session/s/{n:06}")).collect();
        let scope: Vec<&str> = turns.iter().map(String::as_str).collect();
        let hits = reader.rank(query, Target::Edus, Some(&scope), 5).unwrap();
        let turn_ceiling = reader
            .rank_ceiling(query, Target::Edus, Some(&scope))
            .unwrap();
        assert!(!hits.is_empty());
        assert!(
            hits.iter().all(|h| h.doc.starts_with("@session/s/")),
            "{hits:?}"
        );
        assert_eq!(hits[0].doc, "@session/s/000007");
        let share = hits[0].score / turn_ceiling;
        assert!(
            share > 0.8,
            "the matching turn scores {share} of the ceiling"
        );
    }

    #[test]
    fn files_a_killed_writer_left_do_not_block_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let doc = crate::ingest::pipeline::analyze(
            "a",
            "One two three four. Five six seven eight.".into(),
            Format::Text,
        )
        .unwrap();
        {
            let mut index = FullText::open(dir.path()).unwrap();
            index.replace(&doc).unwrap();
            index.commit(1).unwrap();
            // What a writer killed mid-commit leaves behind: delete files,
            // registered but in no commit, under the names the next
            // commits will want.
            let tantivy_index = &index.reader.index;
            let segment = tantivy_index.searchable_segment_ids().unwrap()[0];
            for opstamp in 0..1_000 {
                let name = format!("{}.{opstamp}.del", segment.uuid_string());
                let file =
                    tantivy::Directory::open_write(tantivy_index.directory(), Path::new(&name))
                        .unwrap();
                tantivy::directory::TerminatingWrite::terminate(file).unwrap();
            }
        }
        let mut index = FullText::open(dir.path()).unwrap();
        index.remove("a").unwrap();
        index.commit(2).unwrap();
        assert_eq!(index.reader().entries(), 0);
        assert_eq!(index.applied_seq().unwrap(), 2);
    }

    #[test]
    fn a_fast_field_file_overwritten_is_damage_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = FullText::open(dir.path()).unwrap();
        let text: String = (0..300)
            .map(|i| format!("The oven number {i} bakes loaf {i}.\n\n"))
            .collect();
        let doc = crate::ingest::pipeline::analyze("a", text, Format::Text).unwrap();
        index.replace(&doc).unwrap();
        index.commit(1).unwrap();
        drop(index);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "fast") {
                // Its middle overwritten, the footer intact.
                let mut bytes = std::fs::read(&path).unwrap();
                let len = bytes.len();
                bytes[len / 3..len / 3 + 200].fill(0x5a);
                std::fs::write(&path, bytes).unwrap();
            }
        }
        let reader = FullText::open(dir.path()).unwrap().reader();
        for hits in [
            reader.search("oven", 5),
            reader.rank("oven", Target::Edus, None, 5),
        ] {
            let err = hits.unwrap_err();
            assert!(err.is_damage(), "{err:?}");
            assert!(err.to_string().contains("reindex"), "{err}");
        }
    }

    #[test]
    fn a_damaged_index_fails_with_tantivys_error_as_the_source() {
        let dir = tempfile::tempdir().unwrap();
        drop(FullText::open(dir.path()).unwrap());
        std::fs::write(dir.path().join("meta.json"), b"{ not json").unwrap();
        let err = FullText::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::FullText { .. }), "{err:?}");
        let source = std::error::Error::source(&err).expect("tantivy's error is kept");
        assert!(err.to_string().contains(&source.to_string()), "{err}");
    }
}
