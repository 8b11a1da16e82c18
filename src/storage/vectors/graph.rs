//! One hnsw_rs graph of the vector index (nodes or EDUs) and the entries
//! its data ids index.
//!
//! The graph's points are the stored 8-bit rows themselves (their codes
//! and inverse norm, [`point`]; each entry keeps its row's scale), compared
//! by [`CodeCosine`]: a graph of `f32` points held, and dumped, four times
//! the bytes for the same values. A search walks the graph with the query in 8 bits, then scores
//! what it found exactly, with the `f32` query against each row as the
//! store holds it, so a graph search reports the scores an exact scan does.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use hnsw_rs::prelude::{AnnT, Hnsw, HnswIo};
use serde::{Deserialize, Serialize};

use super::cosine::{CodeCosine, point, score, split_point};
use super::flat;
use crate::compute::quantize::push_row;
use crate::error::{Error, Result};
use crate::model::document::QuantizedRows;
use crate::model::edu::Span;
use crate::model::ids::is_turn_id;
use crate::storage::vector_record::Row;

/// Neighbours kept per point and layer.
const MAX_CONNECTIONS: usize = 16;
/// Candidates explored while inserting.
const EF_CONSTRUCTION: usize = 100;
/// hnsw_rs only dumps graphs built with its full 16 layers.
const MAX_LAYERS: usize = 16;

/// Where one indexed vector came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Entry {
    pub doc: String,
    /// Node id (node graph) or EDU id (EDU graph).
    pub item: u32,
    pub span: Span,
    pub live: bool,
    /// The scale of the entry's stored row (its point holds the codes).
    pub scale: f32,
}

impl Entry {
    /// Live and not a session turn: what a search without a scope may return.
    fn searched_unscoped(&self) -> bool {
        self.live && !is_turn_id(&self.doc)
    }
}

/// One hnsw_rs graph, built with the index's settings, and the entries
/// its data ids index: what the vector index keeps for nodes and for EDUs
/// (public for the benchmarks, which measure it on vectors of their own).
pub struct Graph {
    hnsw: Hnsw<'static, i8, CodeCosine>,
    pub(super) entries: Vec<Entry>,
    /// Live entry ids of each document.
    pub(super) by_doc: HashMap<String, Vec<usize>>,
    pub(super) dead: usize,
    /// Live entries of session turns, which only a scope naming them
    /// searches.
    turns: usize,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("entries", &self.entries.len())
            .field("dead", &self.dead)
            .finish()
    }
}

fn new_hnsw(capacity: usize) -> Hnsw<'static, i8, CodeCosine> {
    Hnsw::new(
        MAX_CONNECTIONS,
        capacity.max(1024),
        MAX_LAYERS,
        EF_CONSTRUCTION,
        CodeCosine,
    )
}

/// The dump files of the graph named `name`.
pub(super) fn dump_files(name: &str) -> [String; 2] {
    [format!("{name}.hnsw.graph"), format!("{name}.hnsw.data")]
}

impl Graph {
    /// A graph with no vectors.
    pub fn empty() -> Graph {
        Graph::from_entries(new_hnsw(0), Vec::new())
    }

    fn from_entries(hnsw: Hnsw<'static, i8, CodeCosine>, entries: Vec<Entry>) -> Graph {
        let mut by_doc: HashMap<String, Vec<usize>> = HashMap::new();
        let (mut dead, mut turns) = (0, 0);
        for (id, entry) in entries.iter().enumerate() {
            if !entry.live {
                dead += 1;
                continue;
            }
            by_doc.entry(entry.doc.clone()).or_default().push(id);
            if is_turn_id(&entry.doc) {
                turns += 1;
            }
        }
        Graph {
            hnsw,
            entries,
            by_doc,
            dead,
            turns,
        }
    }

    /// The graph dumped in `dir` as `name` ([`Graph::dump`]), indexing
    /// `entries`. The caller has checked the dump's files against their
    /// checksums: hnsw_rs exits the process on a corrupt dump.
    pub(super) fn load(dir: &Path, name: &str, entries: Vec<Entry>) -> Result<Graph> {
        if entries.is_empty() {
            return Ok(Graph::empty());
        }
        // hnsw_rs ties a loaded graph to its loader's lifetime; the loader
        // is small and loaded once per open, so it is leaked to give the
        // graph the lifetime of the index.
        let loader: &'static mut HnswIo = Box::leak(Box::new(HnswIo::new(dir, name)));
        let mut hnsw: Hnsw<'static, i8, CodeCosine> = loader
            .load_hnsw()
            .map_err(|e| Error::Vectors(format!("{name}: {e}")))?;
        if hnsw.get_nb_point() != entries.len() {
            return Err(Error::Vectors(format!(
                "{name}: {} points for {} entries",
                hnsw.get_nb_point(),
                entries.len()
            )));
        }
        hnsw.set_searching_mode(true);
        Ok(Graph::from_entries(hnsw, entries))
    }

    /// Writes the graph's hnsw_rs dump into `dir` as `name`: the files
    /// [`dump_files`] names.
    pub(super) fn dump(&self, dir: &Path, name: &str) -> Result<()> {
        let written = self
            .hnsw
            .file_dump(dir, name)
            .map_err(|e| Error::Vectors(format!("dumping {name}: {e}")))?;
        if written != name {
            return Err(Error::Vectors(format!(
                "hnsw_rs dumped {written}, not {name}"
            )));
        }
        Ok(())
    }

    /// Entries not dead.
    pub(super) fn live(&self) -> usize {
        self.entries.len() - self.dead
    }

    /// Marks `doc`'s entries dead.
    pub(super) fn remove(&mut self, doc: &str) {
        let ids = self.by_doc.remove(doc).unwrap_or_default();
        if is_turn_id(doc) {
            self.turns -= ids.len();
        }
        for id in ids {
            self.entries[id].live = false;
            self.dead += 1;
        }
    }

    /// Adds `doc`'s stored rows (item, span, row), skipping zero rows
    /// (text with no features). A row goes in as its own 8-bit codes; the
    /// `f32` rows of stores older than format 7 are quantised as the store
    /// now quantises.
    pub fn add(&mut self, doc: &str, rows: Vec<(u32, Span, Row<'_>)>) {
        let first = self.entries.len();
        let mut kept = Vec::with_capacity(rows.len());
        let mut points = Vec::with_capacity(rows.len());
        for (item, span, row) in rows {
            if !row.is_zero() {
                let (codes, scale) = row_codes(row);
                points.push(point(&codes));
                kept.push((item, span, scale));
            }
        }
        if kept.is_empty() {
            return;
        }
        let ids: Vec<usize> = (first..first + kept.len()).collect();
        let data: Vec<(&[i8], usize)> = points
            .iter()
            .map(Vec::as_slice)
            .zip(ids.iter().copied())
            .collect();
        self.hnsw.set_searching_mode(false);
        insert_in_parallel(&self.hnsw, &data);
        self.hnsw.set_searching_mode(true);
        self.entries
            .extend(kept.into_iter().map(|(item, span, scale)| Entry {
                doc: doc.to_owned(),
                item,
                span,
                live: true,
                scale,
            }));
        if is_turn_id(doc) {
            self.turns += ids.len();
        }
        self.by_doc.entry(doc.to_owned()).or_default().extend(ids);
    }

    /// The graph's live vectors as a flat table reflecting store change
    /// `seq`, in entry order.
    pub(super) fn flat_table(&self, identity: &str, dimension: usize, seq: u64) -> flat::FlatTable {
        let mut points: Vec<_> = (self.hnsw.get_point_indexation().into_iter())
            .filter(|point| {
                self.entries
                    .get(point.get_origin_id())
                    .is_some_and(|e| e.live)
            })
            .collect();
        points.sort_unstable_by_key(|point| point.get_origin_id());
        let mut docs: Vec<String> = Vec::new();
        let mut doc_index: HashMap<&str, u32> = HashMap::new();
        let mut rows = Vec::with_capacity(points.len());
        let mut vectors = QuantizedRows {
            codes: Vec::with_capacity(points.len() * dimension),
            scales: Vec::with_capacity(points.len()),
        };
        for indexed in points {
            let entry = &self.entries[indexed.get_origin_id()];
            let doc = *doc_index.entry(entry.doc.as_str()).or_insert_with(|| {
                docs.push(entry.doc.clone());
                (docs.len() - 1) as u32
            });
            rows.push(flat::FlatRow {
                doc,
                item: entry.item,
                span: entry.span,
            });
            vectors
                .codes
                .extend_from_slice(split_point(indexed.get_v()).0);
            vectors.scales.push(entry.scale);
        }
        flat::FlatTable {
            version: flat::FLAT_VERSION,
            identity: identity.to_owned(),
            dimension: dimension as u32,
            applied_seq: seq,
            docs,
            rows,
            vectors,
        }
    }

    /// The `k` live entries most similar to the unit vector `query`, among
    /// documents in `scope` when given, else among all but session turns,
    /// as (entry id, cosine similarity), best first. The walk explores at
    /// least `effort` candidates (and `2k`).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        effort: usize,
        scope: Option<&[&str]>,
    ) -> Vec<(usize, f32)> {
        if self.live() == 0 || k == 0 {
            return Vec::new();
        }
        let mut allowed: Vec<usize> = Vec::new();
        let filtered = scope.is_some() || self.dead > 0 || self.turns > 0;
        if let Some(docs) = scope {
            for doc in docs {
                allowed.extend(self.by_doc.get(*doc).into_iter().flatten());
            }
            if allowed.is_empty() {
                return Vec::new();
            }
            allowed.sort_unstable();
        }
        let mut coded = QuantizedRows::default();
        push_row(&mut coded, query);
        let query_point = point(&coded.codes);
        let codes = query_point.as_slice();
        let ef = effort.max(2 * k);
        let neighbours = if !filtered {
            self.hnsw.search(codes, k, ef)
        } else if scope.is_some() {
            self.hnsw.search_filter(codes, k, ef, Some(&allowed))
        } else {
            let searched = |id: &usize| self.entries[*id].searched_unscoped();
            self.hnsw.search_filter(codes, k, ef, Some(&searched))
        };
        let mut ranked: Vec<(usize, f32)> = neighbours
            .into_iter()
            .filter_map(|n| {
                let entry = self.entries.get(n.d_id)?;
                if !entry.live || (scope.is_none() && !entry.searched_unscoped()) {
                    return None;
                }
                let found = self.hnsw.get_point_indexation().get_point_data(&n.p_id)?;
                let row = Row::Packed(split_point(&found).0, entry.scale);
                Some((n.d_id, score(row.dot(query))))
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

/// A stored row's codes and scale: a packed row's own, or an `f32` row
/// quantised.
fn row_codes(row: Row<'_>) -> (Cow<'_, [i8]>, f32) {
    match row {
        Row::Packed(codes, scale) => (Cow::Borrowed(codes), scale),
        Row::Full(_) => {
            let mut coded = QuantizedRows::default();
            push_row(&mut coded, &row.to_vec());
            let scale = coded.scales.first().copied().unwrap_or(0.0);
            (Cow::Owned(coded.codes), scale)
        }
    }
}

/// Inserts `data` into `hnsw` on [`INSERT_POOL`], entered from a thread of
/// no rayon pool. The caller holds the engine's lock on the index for
/// writing; waiting inside a shared pool would let that thread, or one the
/// inserts wait on, run another queued job that asks for the same lock and
/// never return (a rayon worker runs other jobs while it waits). Jobs of
/// the insert pool take no lock. Without that pool (its threads could not
/// start) the rows go in one by one.
fn insert_in_parallel(hnsw: &Hnsw<'static, i8, CodeCosine>, data: &Vec<(&[i8], usize)>) {
    let Some(pool) = INSERT_POOL.as_ref() else {
        for &(vector, id) in data {
            hnsw.insert_slice((vector, id));
        }
        return;
    };
    let insert = || pool.install(|| hnsw.parallel_insert_slice(data));
    if rayon::current_thread_index().is_none() {
        return insert();
    }
    std::thread::scope(|scope| {
        if let Err(panic) = scope.spawn(insert).join() {
            std::panic::resume_unwind(panic);
        }
    });
}

/// The pool graph inserts run on ([`insert_in_parallel`]), one thread per
/// core.
static INSERT_POOL: std::sync::LazyLock<Option<rayon::ThreadPool>> =
    std::sync::LazyLock::new(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("edudb-graph-{i}"))
            .build()
            .ok()
    });

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::quantize::quantize;
    use std::sync::{Arc, Mutex, mpsc};
    use std::time::Duration;

    /// `count` unit vectors of `dimension` values, all different, row-major.
    fn unit_vectors(count: u32, dimension: usize) -> Vec<f32> {
        let mut values = Vec::new();
        for i in 0..count as usize {
            let mut v: Vec<f32> = (0..dimension)
                .map(|d| ((i * 31 + d * 17) % 97) as f32 + 1.0)
                .collect();
            crate::compute::vector::normalise(&mut v);
            values.extend(v);
        }
        values
    }

    /// The graph's rows (item and span `i`) of `stored`, as the store
    /// hands them over.
    fn rows(stored: &QuantizedRows, dimension: usize) -> Vec<(u32, Span, Row<'_>)> {
        (0..stored.scales.len())
            .map(|i| {
                let (codes, scale) = stored.row(i, dimension).unwrap();
                (
                    i as u32,
                    Span::new(i as u32, i as u32),
                    Row::Packed(codes, scale),
                )
            })
            .collect()
    }

    /// A reader holding a pool thread while it loads the graph under the
    /// index's write lock must not run, on that thread, a queued read that
    /// wants the same lock: the inserts leave the caller's pool. (Inserting
    /// on the caller's pool hung in about one round in three here.)
    #[test]
    fn inserting_under_a_lock_that_queued_pool_jobs_want_finishes() {
        for _ in 0..8 {
            insert_under_a_lock_wanted_by_queued_jobs();
        }
    }

    fn insert_under_a_lock_wanted_by_queued_jobs() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let lock = Arc::new(Mutex::new(()));
        let (holding, is_holding) = mpsc::channel();
        let (done, is_done) = mpsc::channel();
        {
            let lock = Arc::clone(&lock);
            pool.spawn(move || {
                let _held = lock.lock().unwrap();
                holding.send(()).unwrap();
                let stored = quantize(&unit_vectors(3_000, 32), 32);
                let mut graph = Graph::empty();
                graph.add("d", rows(&stored, 32));
                done.send(graph.entries.len()).unwrap();
            });
        }
        is_holding.recv().unwrap();
        // Reads arriving meanwhile, each wanting the lock.
        for _ in 0..64 {
            let lock = Arc::clone(&lock);
            pool.spawn(move || drop(lock.lock().unwrap()));
        }
        let inserted = is_done
            .recv_timeout(Duration::from_secs(60))
            .expect("the inserts finished");
        assert_eq!(inserted, 3_000);
    }

    /// The graph holds each point in one byte per value: its dump's data
    /// file is about the codes' size (hnsw_rs adds a header per point),
    /// not four bytes a value.
    #[test]
    fn the_dump_holds_a_byte_per_value() {
        let (count, dimension) = (500u32, 64usize);
        let stored = quantize(&unit_vectors(count, dimension), dimension);
        let mut graph = Graph::empty();
        graph.add("d", rows(&stored, dimension));
        let dir = tempfile::TempDir::new().unwrap();
        graph.dump(dir.path(), "edus").unwrap();
        let data = std::fs::metadata(dir.path().join(&dump_files("edus")[1])).unwrap();
        let per_point = data.len() as f64 / f64::from(count);
        assert!(
            per_point < (dimension + 32) as f64,
            "{per_point} bytes per point"
        );
        let entries = graph.entries.clone();
        let loaded = Graph::load(dir.path(), "edus", entries).unwrap();
        let query = &unit_vectors(1, dimension);
        assert_eq!(
            loaded.search(query, 10, 64, None),
            graph.search(query, 10, 64, None)
        );
    }

    /// A search reports the score of the stored row against the `f32`
    /// query, to the bit, best first.
    #[test]
    fn a_search_scores_the_stored_rows_against_the_query() {
        let dimension = 48;
        let stored = quantize(&unit_vectors(300, dimension), dimension);
        let mut graph = Graph::empty();
        graph.add("d", rows(&stored, dimension));
        let mut query: Vec<f32> = (0..dimension).map(|d| (d % 7) as f32 - 2.5).collect();
        crate::compute::vector::normalise(&mut query);
        let found = graph.search(&query, 20, 300, None);
        assert_eq!(found.len(), 20);
        for pair in found.windows(2) {
            assert!(pair[0].1 >= pair[1].1, "{found:?}");
        }
        for &(id, found_score) in &found {
            let (codes, scale) = stored.row(id, dimension).unwrap();
            let expected = score(Row::Packed(codes, scale).dot(&query));
            assert_eq!(found_score.to_bits(), expected.to_bits(), "entry {id}");
        }
    }
}
