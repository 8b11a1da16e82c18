//! The vector index: two hnsw_rs graphs (tree nodes and EDUs) over the
//! unit vectors stored with each document, searched by cosine similarity.
//!
//! Like the full-text index it is derived state. The vectors themselves
//! live in the store ([`crate::storage::store::Store::vectors`]), so the index is
//! rebuilt from them without embedding anything again; it records the store
//! sequence number it has applied, and [`crate::Db`] replays later changes.
//!
//! hnsw_rs cannot delete points: replacing or removing a document marks its
//! entries dead (tombstones), searches skip them, and once a quarter of the
//! entries are dead the owner rebuilds ([`VectorIndex::needs_rebuild`]).
//!
//! On disk (`<store>/vectors/`): each graph's hnsw_rs dump and flat table
//! (`flat`, with its own CRC-32) plus `manifest.json` (embedder identity,
//! dimension, applied sequence number, entries, and a CRC-32 of every dump
//! file). A new dump is written to a
//! sibling directory and renamed into place, so a crash leaves either the
//! old or the new dump; a dump whose checksums or identity do not match is
//! never handed to hnsw_rs (which exits the process on corrupt input) and
//! the index is rebuilt instead.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod cosine;
mod flat;
mod graph;

use crate::error::{Error, Result};
use crate::model::document::Document;
use crate::model::edu::{EduKind, Span};
use crate::model::ids::is_turn_id;
use crate::model::rank::{RankedHit, Target};
use crate::storage::store::Store;
use crate::storage::vector_record::{Row, Rows, VectorRecord};

use cosine::score;
pub(crate) use flat::MappedTable;
pub use graph::Graph;
use graph::{Entry, dump_files};

/// Candidates explored per search by default, at least (more for larger
/// `k`); see [`VectorIndex::set_search_effort`].
pub const EF_SEARCH: usize = 128;
/// A scope with at most this many vectors is best searched exactly, by
/// reading its documents' stored vectors ([`search_stored`]): a filtered
/// graph search loses recall when the scope is a small part of the store.
pub const EXACT_SCOPE_LIMIT: usize = 20_000;
/// Rebuild once this share of entries is dead.
const REBUILD_DEAD_SHARE: f32 = 0.25;
/// Version of the manifest layout (1: graphs of `f32` points; 2: of the
/// stored rows' 8-bit codes, each entry with its row's scale).
const MANIFEST_VERSION: u32 = 2;
const MANIFEST: &str = "manifest.json";
/// A one-line copy of the manifest's applied sequence number, readable
/// without parsing the entries.
const APPLIED_SEQ: &str = "applied_seq";
/// Unpersisted changes are written once they are this old…
const PERSIST_AFTER: std::time::Duration = std::time::Duration::from_secs(30);
/// …or this many documents have changed.
const PERSIST_AFTER_CHANGES: usize = 1_000;

/// Exact search over the stored vectors of `docs` alone, straight from the
/// store: what a small scope costs without loading (or building) the graph.
/// It scores what the index would hold: every node, every EDU but headings,
/// no zero vector; ties go to document order. `None` as soon as the scope
/// holds more than `limit` such vectors (the graph serves it better), so a
/// large scope costs at most `limit` vectors' reading.
pub fn search_stored(
    store: &Store,
    target: Target,
    query: &[f32],
    k: usize,
    docs: &[&str],
    limit: usize,
) -> Result<Option<Vec<RankedHit>>> {
    let mut scored = Vec::new();
    for &doc in docs {
        if scored.len() > limit {
            return Ok(None);
        }
        match score_stored(store, target, query, doc, &mut scored) {
            // As in every read, a damaged document is left out with a
            // warning (check names it).
            Err(err) if err.is_damage() => {
                tracing::warn!("document {doc} left out of a vector search: {err}");
            }
            other => other?,
        }
    }
    if scored.len() > limit {
        return Ok(None);
    }
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    scored.truncate(k);
    Ok(Some(scored))
}

/// Scores document `doc`'s stored vectors of `target` against `query`
/// into `scored` (nothing when the store does not hold it, or on an
/// error).
fn score_stored(
    store: &Store,
    target: Target,
    query: &[f32],
    doc: &str,
    scored: &mut Vec<RankedHit>,
) -> Result<()> {
    let (Some(stored), Some(vectors)) = (store.get(doc)?, store.vectors(doc)?) else {
        return Ok(());
    };
    let vectors = vectors.get()?;
    let d = vectors.dimension();
    if d != query.len() {
        // The graph leaves such a document out, as damage.
        return Err(Error::Invariant {
            doc: doc.to_owned(),
            message: format!(
                "stored vectors of dimension {d}, the query's {}",
                query.len()
            ),
        });
    }
    let rows: Vec<(Option<u32>, Span, usize)> = match target {
        Target::Nodes => (stored.tree()?.nodes.iter().enumerate())
            .map(|(i, n)| {
                let span = Span::new(n.span.first.to_native(), n.span.last.to_native());
                (Some(i as u32), span, i)
            })
            .collect(),
        Target::Edus => (stored.edus()?.iter())
            .filter(|e| e.kind != EduKind::Heading)
            .map(|e| {
                let id = e.id.to_native();
                (None, Span::new(id, id), id as usize)
            })
            .collect(),
    };
    let values = vectors.rows(target);
    let mut hits = Vec::with_capacity(rows.len());
    for (node, span, row) in rows {
        let Some(row) = values.row(row) else {
            return Err(Error::Invariant {
                doc: doc.to_owned(),
                message: "stored vectors shorter than the document".into(),
            });
        };
        if row.is_zero() {
            continue;
        }
        hits.push(RankedHit {
            doc: doc.to_owned(),
            node,
            span,
            score: score(row.dot(query)),
        });
    }
    // A document is scored whole or, on an error, not at all.
    scored.append(&mut hits);
    Ok(())
}

/// Counts what the index holds, for `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VectorCounts {
    /// Live node vectors.
    pub nodes: usize,
    /// Live EDU vectors.
    pub edus: usize,
    /// Entries of replaced or removed documents still in the graphs.
    pub dead: usize,
}

/// The one field every layout of the manifest has.
#[derive(Deserialize)]
struct ManifestVersion {
    version: u32,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    version: u32,
    identity: String,
    dimension: usize,
    applied_seq: u64,
    nodes: Vec<Entry>,
    edus: Vec<Entry>,
    /// File name → CRC-32 of every dump file.
    checksums: HashMap<String, u32>,
}
/// The vector index of one store (see the module docs).
#[derive(Debug)]
pub struct VectorIndex {
    dir: PathBuf,
    identity: String,
    dimension: usize,
    nodes: Graph,
    edus: Graph,
    /// Store change applied in memory.
    applied_seq: u64,
    /// Store change the dump on disk reflects.
    persisted_seq: u64,
    /// When the first change not on disk was applied, and how many.
    unpersisted: Option<(std::time::Instant, usize)>,
    /// Candidates a graph search explores, at least (more for larger `k`).
    search_effort: usize,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn crc_of(path: &Path) -> Result<u32> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buffer).map_err(io(path))?;
        if n == 0 {
            return Ok(hasher.finalize());
        }
        hasher.update(&buffer[..n]);
    }
}

fn graph_name(target: Target) -> &'static str {
    match target {
        Target::Nodes => "nodes",
        Target::Edus => "edus",
    }
}

impl VectorIndex {
    /// Opens the index persisted in `dir` if it was built by the embedder
    /// `identity` with vectors of `dimension` and is intact; otherwise an
    /// empty index whose [`VectorIndex::applied_seq`] is 0, for the owner to
    /// rebuild. The reason an existing dump was not used is logged.
    pub fn open(dir: &Path, identity: &str, dimension: usize) -> VectorIndex {
        let empty = || VectorIndex {
            dir: dir.to_owned(),
            identity: identity.to_owned(),
            dimension,
            nodes: Graph::empty(),
            edus: Graph::empty(),
            applied_seq: 0,
            persisted_seq: 0,
            unpersisted: None,
            search_effort: EF_SEARCH,
        };
        if !dir.join(MANIFEST).is_file() {
            return empty();
        }
        match VectorIndex::load(dir, identity, dimension) {
            Ok(index) => index,
            Err(err) => {
                tracing::warn!(
                    "vector index at {} not used ({err}); rebuilding",
                    dir.display()
                );
                empty()
            }
        }
    }

    fn load(dir: &Path, identity: &str, dimension: usize) -> Result<VectorIndex> {
        let manifest_path = dir.join(MANIFEST);
        let bytes = std::fs::read(&manifest_path).map_err(io(&manifest_path))?;
        let parse_error = |e: serde_json::Error| Error::Vectors(format!("manifest: {e}"));
        // The version first: an older layout need not parse as this one.
        let version: ManifestVersion = serde_json::from_slice(&bytes).map_err(parse_error)?;
        if version.version != MANIFEST_VERSION {
            return Err(Error::Vectors(format!(
                "manifest v{}, not v{MANIFEST_VERSION}",
                version.version
            )));
        }
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(parse_error)?;
        if manifest.identity != identity || manifest.dimension != dimension {
            return Err(Error::Vectors(format!(
                "built by {} (dimension {}), not {identity} (dimension {dimension})",
                manifest.identity, manifest.dimension
            )));
        }
        for (file, expected) in &manifest.checksums {
            let found = crc_of(&dir.join(file))?;
            if found != *expected {
                return Err(Error::Vectors(format!("{file}: checksum mismatch")));
            }
        }
        let load_graph = |name: &str, entries: Vec<Entry>| -> Result<Graph> {
            if !entries.is_empty() && !manifest.checksums.contains_key(&dump_files(name)[0]) {
                return Err(Error::Vectors(format!("{name}: dump missing")));
            }
            Graph::load(dir, name, entries)
        };
        Ok(VectorIndex {
            dir: dir.to_owned(),
            identity: identity.to_owned(),
            dimension,
            nodes: load_graph(graph_name(Target::Nodes), manifest.nodes)?,
            edus: load_graph(graph_name(Target::Edus), manifest.edus)?,
            applied_seq: manifest.applied_seq,
            persisted_seq: manifest.applied_seq,
            unpersisted: None,
            search_effort: EF_SEARCH,
        })
    }

    /// Deletes the index persisted in `dir` (its changes were lost from
    /// the store): the next use builds it from the store again.
    pub fn discard(dir: &Path) -> Result<()> {
        match std::fs::remove_dir_all(dir) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::Vectors(format!("removing {}: {err}", dir.display())))
            }
            _ => Ok(()),
        }
    }

    /// The store change the index persisted in `dir` reflects; 0 when there
    /// is none (never built, or lost).
    pub fn persisted_seq(dir: &Path) -> u64 {
        std::fs::read_to_string(dir.join(APPLIED_SEQ))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The store change the index reflects in memory.
    pub fn applied_seq(&self) -> u64 {
        self.applied_seq
    }

    /// Records that the index now reflects store change `seq`.
    pub fn set_applied(&mut self, seq: u64) {
        if seq != self.applied_seq {
            let (since, count) = self.unpersisted.unwrap_or((std::time::Instant::now(), 0));
            self.unpersisted = Some((since, count + 1));
        }
        self.applied_seq = seq;
    }

    /// Whether changes are applied that the dump on disk lacks.
    pub fn is_dirty(&self) -> bool {
        self.applied_seq != self.persisted_seq
    }

    /// Whether unpersisted changes are old or many enough to write now.
    pub fn persist_due(&self) -> bool {
        self.unpersisted.is_some_and(|(since, count)| {
            since.elapsed() >= PERSIST_AFTER || count >= PERSIST_AFTER_CHANGES
        })
    }

    /// Vector length.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// What the index holds.
    pub fn counts(&self) -> VectorCounts {
        VectorCounts {
            nodes: self.nodes.live(),
            edus: self.edus.live(),
            dead: self.nodes.dead + self.edus.dead,
        }
    }

    /// Sets how many candidates a graph search explores, at least: more
    /// finds more of the true nearest neighbours, more slowly (the
    /// recall/time curve is in `docs/benchmarks.md`). Exact searches are
    /// unaffected.
    pub fn set_search_effort(&mut self, candidates: usize) {
        self.search_effort = candidates.max(1);
    }

    /// Whether a graph with entries lacks a usable flat table on disk of
    /// the change the dump reflects (the dump was saved before the tables
    /// existed, or a table is damaged).
    pub fn lacks_flat_tables(&self) -> bool {
        [Target::Nodes, Target::Edus].into_iter().any(|target| {
            !self.graph(target).entries.is_empty()
                && MappedTable::open(&self.dir, target, &self.identity, self.dimension)
                    .is_none_or(|table| table.applied_seq() != self.persisted_seq)
        })
    }

    /// Whether enough entries are dead that [`VectorIndex::clear`] and a
    /// rebuild from the store pay off.
    pub fn needs_rebuild(&self) -> bool {
        let total = self.nodes.entries.len() + self.edus.entries.len();
        total > 0 && (self.counts().dead as f32) >= REBUILD_DEAD_SHARE * total as f32
    }

    /// Drops everything, for a rebuild.
    pub fn clear(&mut self) {
        self.nodes = Graph::empty();
        self.edus = Graph::empty();
        self.applied_seq = 0;
    }

    /// Indexes `doc`'s vectors in place of any earlier version: one per
    /// tree node and one per non-heading EDU (a heading's text is its
    /// section's title, which the section's vector carries).
    pub fn replace(&mut self, doc: &Document, vectors: VectorRecord<'_>) -> Result<()> {
        let id = doc.meta.id.as_str();
        let dimension = vectors.dimension();
        let (nodes, edus) = (vectors.rows(Target::Nodes), vectors.rows(Target::Edus));
        if dimension != self.dimension
            || !nodes.holds(doc.tree.nodes.len())
            || !edus.holds(doc.edus.len())
        {
            return Err(Error::Invariant {
                doc: id.to_owned(),
                message: format!(
                    "stored vectors have dimension {dimension} and {}+{} values; the index expects dimension {} for {} nodes and {} EDUs",
                    nodes.values_len(),
                    edus.values_len(),
                    self.dimension,
                    doc.tree.nodes.len(),
                    doc.edus.len()
                ),
            });
        }
        // Every row is there: `holds` checked the lengths.
        fn row(rows: Rows<'_>, i: usize) -> Row<'_> {
            rows.row(i).unwrap_or(Row::Packed(&[], 0.0))
        }
        self.remove(id);
        let node_rows = (0..doc.tree.nodes.len())
            .map(|i| {
                let n = &doc.tree.nodes[i];
                (i as u32, n.span, row(nodes, i))
            })
            .collect();
        let edu_rows = doc
            .edus
            .iter()
            .filter(|e| e.kind != EduKind::Heading)
            .map(|e| (e.id, Span::new(e.id, e.id), row(edus, e.id as usize)))
            .collect();
        self.nodes.add(id, node_rows);
        self.edus.add(id, edu_rows);
        Ok(())
    }

    /// Removes a document's vectors from results.
    pub fn remove(&mut self, doc: &str) {
        self.nodes.remove(doc);
        self.edus.remove(doc);
    }

    /// The `k` nodes or EDUs most similar to the unit vector `query`
    /// (cosine similarity, best first) by a graph search, filtered to the
    /// documents in `scope` when given. A filtered search loses recall when
    /// the scope is a small part of the store: search a scope of at most
    /// [`EXACT_SCOPE_LIMIT`] vectors with [`search_stored`] instead.
    pub fn search(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&[&str]>,
    ) -> Result<Vec<RankedHit>> {
        if query.len() != self.dimension {
            return Err(Error::Vectors(format!(
                "query vector has dimension {}, the index {}",
                query.len(),
                self.dimension
            )));
        }
        let mut ranked = self
            .graph(target)
            .search(query, k, self.search_effort, scope);
        ranked.truncate(k);
        Ok(self.hits(target, ranked))
    }

    /// Like [`VectorIndex::search`] over the whole store, but exact: scores
    /// every live vector outside session turns, reading it from `store`.
    /// The baseline graph recall is measured against.
    pub fn search_exact(
        &self,
        store: &Store,
        target: Target,
        query: &[f32],
        k: usize,
    ) -> Result<Vec<RankedHit>> {
        let docs: Vec<&str> = (self.graph(target).by_doc.keys())
            .map(String::as_str)
            .filter(|doc| !is_turn_id(doc))
            .collect();
        let ranked = self.exact(store, target, query, k, &docs)?;
        Ok(self.hits(target, ranked))
    }

    /// Ranked entry ids as hits.
    fn hits(&self, target: Target, ranked: Vec<(usize, f32)>) -> Vec<RankedHit> {
        let graph = self.graph(target);
        ranked
            .into_iter()
            .map(|(id, score)| {
                let entry = &graph.entries[id];
                RankedHit {
                    doc: entry.doc.clone(),
                    node: (target == Target::Nodes).then_some(entry.item),
                    span: entry.span,
                    score,
                }
            })
            .collect()
    }

    fn graph(&self, target: Target) -> &Graph {
        match target {
            Target::Nodes => &self.nodes,
            Target::Edus => &self.edus,
        }
    }

    /// Exact search over the live entries of `docs`, reading their vectors
    /// from the store.
    fn exact(
        &self,
        store: &Store,
        target: Target,
        query: &[f32],
        k: usize,
        docs: &[&str],
    ) -> Result<Vec<(usize, f32)>> {
        let graph = self.graph(target);
        let mut scored = Vec::new();
        for doc in docs {
            let Some(ids) = graph.by_doc.get(*doc) else {
                continue;
            };
            let stored = store.vectors(doc)?.ok_or_else(|| Error::Invariant {
                doc: (*doc).to_owned(),
                message: "indexed but has no stored vectors".into(),
            })?;
            let values = stored.get()?.rows(target);
            for &id in ids {
                let row = (values.row(graph.entries[id].item as usize)).ok_or_else(|| {
                    Error::Invariant {
                        doc: (*doc).to_owned(),
                        message: "stored vectors shorter than the index expects".into(),
                    }
                })?;
                scored.push((id, score(row.dot(query))));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// Writes the graphs, their checksums and the manifest into `staging`.
    fn write_dump(&self, staging: &Path, seq: u64) -> Result<()> {
        std::fs::create_dir_all(staging).map_err(io(staging))?;
        let mut checksums = HashMap::new();
        for target in [Target::Nodes, Target::Edus] {
            let graph = self.graph(target);
            if graph.entries.is_empty() {
                continue;
            }
            let name = graph_name(target);
            graph.dump(staging, name)?;
            for file in dump_files(name) {
                let path = staging.join(&file);
                std::fs::File::open(&path)
                    .and_then(|f| f.sync_all())
                    .map_err(io(&path))?;
                checksums.insert(file, crc_of(&path)?);
            }
            let table = staging.join(flat::file_name(target));
            flat::write(
                &table,
                &graph.flat_table(&self.identity, self.dimension, seq),
            )?;
            checksums.insert(flat::file_name(target).to_owned(), crc_of(&table)?);
        }
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            identity: self.identity.clone(),
            dimension: self.dimension,
            applied_seq: seq,
            nodes: self.nodes.entries.clone(),
            edus: self.edus.entries.clone(),
            checksums,
        };
        let manifest_path = staging.join(MANIFEST);
        let json =
            serde_json::to_vec(&manifest).map_err(|e| Error::Vectors(format!("manifest: {e}")))?;
        let seq_path = staging.join(APPLIED_SEQ);
        for (path, bytes) in [
            (&manifest_path, json),
            (&seq_path, seq.to_string().into_bytes()),
        ] {
            std::fs::write(path, bytes).map_err(io(path))?;
            std::fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(io(path))?;
        }
        Ok(())
    }

    /// Writes the index to disk as reflecting [`VectorIndex::applied_seq`]:
    /// dumps into a fresh sibling directory, then renames it into place.
    pub fn persist(&mut self) -> Result<()> {
        let seq = self.applied_seq;
        let parent = self.dir.parent().unwrap_or(Path::new("."));
        let name = self
            .dir
            .file_name()
            .map_or_else(|| "vectors".into(), |n| n.to_string_lossy().into_owned());
        let staging = parent.join(format!("{name}.new"));
        let retired = parent.join(format!("{name}.old"));
        for stale in [&staging, &retired] {
            if stale.exists() {
                std::fs::remove_dir_all(stale).map_err(io(stale))?;
            }
        }
        // A dump that fails part way (a full disk) is removed, not left
        // taking the space.
        if let Err(err) = self.write_dump(&staging, seq) {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(err);
        }
        if self.dir.exists() {
            std::fs::rename(&self.dir, &retired).map_err(io(&self.dir))?;
        }
        std::fs::rename(&staging, &self.dir).map_err(io(&staging))?;
        if retired.exists() {
            std::fs::remove_dir_all(&retired).map_err(io(&retired))?;
        }
        self.persisted_seq = seq;
        self.unpersisted = None;
        Ok(())
    }
}
