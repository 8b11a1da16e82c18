//! The full-text index (tantivy, BM25 over English-stemmed terms) over EDU
//! texts and section titles.
//!
//! It is derived state: sled is the source of truth. Each commit records, in
//! tantivy's own commit payload, the store sequence number it has applied,
//! so after a crash the store replays the change log past that point.

use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    Value,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

use crate::document::{Document, EduKind, NodeKind, Span};
use crate::error::{Error, Result};

/// Memory budget of the single indexing thread.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;
/// Stored in the `node` field of EDU entries.
const NO_NODE: u64 = u64::MAX;

/// One ranked full-text hit.
#[derive(Debug, Clone, PartialEq)]
pub struct FullTextHit {
    /// Document id.
    pub doc: String,
    /// The node whose title matched, or `None` for an EDU match.
    pub node: Option<u32>,
    /// EDUs covered: the EDU itself, or the node's span.
    pub span: Span,
    /// BM25 score.
    pub score: f32,
}

/// The tantivy index and its single writer.
pub struct FullText {
    index: Index,
    writer: IndexWriter,
    reader: IndexReader,
    doc: Field,
    node: Field,
    first: Field,
    last: Field,
    text: Field,
}

impl std::fmt::Debug for FullText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullText").finish_non_exhaustive()
    }
}

fn fulltext<E: std::fmt::Display>(err: E) -> Error {
    Error::FullText(err.to_string())
}

fn schema() -> Schema {
    let mut builder = Schema::builder();
    builder.add_text_field("doc", STRING | STORED);
    builder.add_u64_field("node", STORED);
    builder.add_u64_field("first", STORED | INDEXED);
    builder.add_u64_field("last", STORED);
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    builder.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(indexing),
    );
    builder.build()
}

impl FullText {
    /// Opens the index in `dir`, creating it when absent.
    pub fn open(dir: &Path) -> Result<FullText> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_owned(),
            source,
        })?;
        let directory = tantivy::directory::MmapDirectory::open(dir).map_err(fulltext)?;
        let index = Index::open_or_create(directory, schema()).map_err(fulltext)?;
        let writer = index
            .writer_with_num_threads(1, WRITER_MEMORY)
            .map_err(fulltext)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(fulltext)?;
        let field = |name: &str| index.schema().get_field(name).map_err(fulltext);
        Ok(FullText {
            doc: field("doc")?,
            node: field("node")?,
            first: field("first")?,
            last: field("last")?,
            text: field("text")?,
            index,
            writer,
            reader,
        })
    }

    /// The store sequence number the last commit applied (0 when none).
    pub fn applied_seq(&self) -> Result<u64> {
        let metas = self.index.load_metas().map_err(fulltext)?;
        Ok(metas.payload.and_then(|p| p.parse().ok()).unwrap_or(0))
    }

    /// Removes every entry of document `id` (uncommitted until [`FullText::commit`]).
    pub fn remove(&mut self, id: &str) {
        self.writer.delete_term(Term::from_field_text(self.doc, id));
    }

    /// Replaces the entries of `doc`: one per EDU (headings excepted, their
    /// sections stand for them) and one per section title.
    pub fn replace(&mut self, doc: &Document) -> Result<()> {
        let id = doc.meta.id.as_str();
        self.remove(id);
        for edu in doc.edus.iter().filter(|e| e.kind != EduKind::Heading) {
            let text = &doc.text[edu.start as usize..edu.end as usize];
            self.add(id, NO_NODE, Span::new(edu.id, edu.id), text)?;
        }
        for node in doc
            .tree
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Section)
        {
            self.add(id, u64::from(node.id), node.span, &node.title)?;
        }
        Ok(())
    }

    fn add(&mut self, id: &str, node: u64, span: Span, text: &str) -> Result<()> {
        self.writer
            .add_document(doc!(
                self.doc => id,
                self.node => node,
                self.first => u64::from(span.first),
                self.last => u64::from(span.last),
                self.text => text,
            ))
            .map(|_| ())
            .map_err(fulltext)
    }

    /// Drops every entry (uncommitted until [`FullText::commit`]).
    pub fn clear(&mut self) -> Result<()> {
        self.writer
            .delete_all_documents()
            .map(|_| ())
            .map_err(fulltext)
    }

    /// Durably commits pending changes as having applied store change `seq`.
    pub fn commit(&mut self, seq: u64) -> Result<()> {
        let mut prepared = self.writer.prepare_commit().map_err(fulltext)?;
        prepared.set_payload(&seq.to_string());
        prepared.commit().map_err(fulltext)?;
        self.reader.reload().map_err(fulltext)
    }

    /// Number of committed entries.
    pub fn entries(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// BM25 search over EDU texts and section titles, best first.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<FullTextHit>> {
        let parser = QueryParser::for_index(&self.index, vec![self.text]);
        let parsed = parser.parse_query(query).map_err(|e| Error::BadSearch {
            query: query.to_owned(),
            message: e.to_string(),
        })?;
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&parsed, &TopDocs::with_limit(limit.max(1)).order_by_score())
            .map_err(fulltext)?;
        top.into_iter()
            .map(|(score, address)| {
                let stored: TantivyDocument = searcher.doc(address).map_err(fulltext)?;
                let u64_of = |field| {
                    stored
                        .get_first(field)
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0)
                };
                let doc = stored
                    .get_first(self.doc)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned();
                let node = Some(u64_of(self.node))
                    .filter(|&n| n != NO_NODE)
                    .map(|n| n as u32);
                let span = Span::new(u64_of(self.first) as u32, u64_of(self.last) as u32);
                Ok(FullTextHit {
                    doc,
                    node,
                    span,
                    score,
                })
            })
            .collect()
    }
}
