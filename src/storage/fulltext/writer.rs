//! [`FullText`]: the index and its single writer; entries replaced and
//! removed per document, commits that record the store change applied,
//! and the background merges of small segments.

use std::path::Path;

use tantivy::merge_policy::LogMergePolicy;
use tantivy::{Index, IndexWriter, ReloadPolicy, Term, doc};

use super::directory::IndexDirectory;
use super::reader::FullTextReader;
use super::schema::{Fields, NO_NODE, fulltext, schema};
use crate::error::{Error, Result};
use crate::model::document::Document;
use crate::model::document::representation;
use crate::model::edu::EduKind;
use crate::model::ids::is_turn_id;
use crate::model::tree::NodeKind;

/// Memory budget of the single indexing thread.
const WRITER_MEMORY: usize = 64 * 1024 * 1024;

/// Segments of at most this many entries (what small writes leave) are
/// merged in the background after commits; larger ones, from bulk
/// ingests, stay as written, so that no merge rewrites most of the index.
pub(super) const MERGED_SEGMENT_ENTRIES: usize = 10_000;

/// The tantivy index and its single writer.
pub struct FullText {
    /// Made at the first change: a process that only reads never pays for
    /// the writer's threads, its lock file and its garbage collection.
    /// Dropping the index waits for the writer's merges (see [`Drop`]).
    pub(super) writer: Option<IndexWriter>,
    pub(super) reader: FullTextReader,
}

impl std::fmt::Debug for FullText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullText").finish_non_exhaustive()
    }
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
            reader: FullTextReader::new(index, reader, fields),
        })
    }

    /// The writer, made at the first call (see [`writer_in`]).
    pub(super) fn writer(&mut self) -> Result<&mut IndexWriter> {
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

    /// Closes the writer, waiting for its background merges, so that
    /// nothing more is written to the index's directory until a next write
    /// opens a writer again (vacuum exchanges the directory under it).
    pub fn close_writer(&mut self) -> Result<()> {
        match self.writer.take() {
            Some(writer) => writer.wait_merging_threads().map_err(fulltext),
            None => Ok(()),
        }
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
    pub(super) fn segment_count(&self) -> usize {
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
