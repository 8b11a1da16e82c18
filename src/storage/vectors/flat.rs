//! The flat table: every live vector of one graph in one rkyv file
//! (`nodes.flat`, `edus.flat`), written beside the graph's dump and
//! searched memory-mapped, exactly, without loading the graph.
//!
//! Loading a persisted hnsw_rs graph costs most of a second and hundreds of
//! megabytes (it allocates every point and neighbour list), which a process
//! that searches once (a CLI `query`) pays for one search. Scanning the
//! table costs a pass over the vectors from the page cache instead, and is
//! exact. The table reflects the store change its dump does; documents
//! changed since are left out of it and scored from their stored vectors
//! by the caller ([`crate::storage::vectors::search_stored`]).

use std::collections::HashSet;
use std::path::Path;

use rkyv::rancor::BoxedError;
use rkyv::{Archive, Serialize};

use super::cosine::score;
use crate::error::{Error, Result};
use crate::model::document::QuantizedRows;
use crate::model::edu::Span;
use crate::model::ids::is_turn_id;
use crate::model::rank::{RankedHit, Target};
use crate::storage::vector_record::Rows;

/// Version of the table's layout; a table of another version is not used
/// (version 1 held `f32` rows; version 2 holds 8-bit rows: for documents
/// written since store format 7 the graph's points are such rows widened,
/// so nothing is lost; points of older `f32` documents are rounded, their
/// scores within about 0.001 of the graph's).
pub(super) const FLAT_VERSION: u32 = 2;

/// One graph's live vectors and where they came from.
#[derive(Archive, Serialize)]
pub(super) struct FlatTable {
    /// Layout version ([`FLAT_VERSION`]).
    pub version: u32,
    /// The embedder that made the vectors.
    pub identity: String,
    /// Vector length.
    pub dimension: u32,
    /// The store change the table reflects.
    pub applied_seq: u64,
    /// Document ids, indexed by [`FlatRow::doc`].
    pub docs: Vec<String>,
    /// One per vector, in the graph's entry order.
    pub rows: Vec<FlatRow>,
    /// The vectors in 8 bits, one row per [`FlatTable::rows`] entry.
    pub vectors: QuantizedRows,
}

/// Where one vector of the table came from.
#[derive(Archive, Serialize)]
pub(super) struct FlatRow {
    /// Index into [`FlatTable::docs`].
    pub doc: u32,
    /// Node id (node table) or EDU id (EDU table).
    pub item: u32,
    /// EDUs the node or EDU covers.
    pub span: Span,
}

/// A table's vectors, read as the store's rows are.
fn vector_rows(table: &ArchivedFlatTable) -> Rows<'_> {
    let dimension = table.dimension.to_native() as usize;
    Rows::Packed(&table.vectors.codes, &table.vectors.scales, dimension)
}

/// The table's file name for `target`.
pub(super) fn file_name(target: Target) -> &'static str {
    match target {
        Target::Nodes => "nodes.flat",
        Target::Edus => "edus.flat",
    }
}

/// Writes `table` to `path`, followed by the CRC-32 of its bytes
/// (little-endian), and syncs it.
pub(super) fn write(path: &Path, table: &FlatTable) -> Result<()> {
    let mut bytes = rkyv::to_bytes::<BoxedError>(table)
        .map_err(|e| Error::Vectors(format!("flat table: {e}")))?;
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::write(path, &bytes).map_err(io)?;
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io)
}

/// A table mapped from disk and checked.
pub(crate) struct MappedTable {
    map: memmap2::Mmap,
}

impl MappedTable {
    /// Maps `dir`'s table of `target` when it exists, is intact (its CRC-32
    /// and layout check) and was made
    /// by the embedder `identity` with vectors of `dimension`; `None` (the
    /// reason logged when the file exists) otherwise.
    pub(crate) fn open(
        dir: &Path,
        target: Target,
        identity: &str,
        dimension: usize,
    ) -> Option<MappedTable> {
        let path = dir.join(file_name(target));
        let file = std::fs::File::open(&path).ok()?;
        // SAFETY: the table is written once into a staging directory that
        // is then renamed into place; it is never modified in place, and a
        // later dump replaces the directory, leaving this mapping's file
        // intact until it is unmapped.
        let mapped = unsafe { memmap2::MmapOptions::new().populate().map(&file) };
        let table = match mapped {
            Ok(map) => MappedTable { map },
            Err(err) => {
                tracing::warn!("flat vector table {} not used: {err}", path.display());
                return None;
            }
        };
        let why = match table.get() {
            _ if !table.intact() => "checksum mismatch".to_owned(),
            Err(err) => err.to_string(),
            Ok(t) if t.version.to_native() != FLAT_VERSION => {
                format!("layout {}, not {FLAT_VERSION}", t.version.to_native())
            }
            Ok(t) if t.identity != identity || t.dimension.to_native() as usize != dimension => {
                format!(
                    "made by {} (dimension {}), not {identity} (dimension {dimension})",
                    t.identity,
                    t.dimension.to_native()
                )
            }
            Ok(t) if !vector_rows(t).holds(t.rows.len()) => {
                "its vectors do not match its rows".to_owned()
            }
            Ok(_) => return Some(table),
        };
        tracing::warn!("flat vector table {} not used: {why}", path.display());
        None
    }

    /// The archive, its CRC-32 trailer stripped.
    fn body(&self) -> &[u8] {
        &self.map[..self.map.len().saturating_sub(4)]
    }

    /// Whether the body matches its CRC-32 trailer.
    fn intact(&self) -> bool {
        let (body, trailer) = (self.body(), &self.map[self.body().len()..]);
        trailer.len() == 4 && crc32fast::hash(body).to_le_bytes() == trailer
    }

    fn get(&self) -> Result<&ArchivedFlatTable> {
        rkyv::access::<ArchivedFlatTable, BoxedError>(self.body())
            .map_err(|e| Error::Vectors(format!("flat table: {e}")))
    }

    /// The store change the table reflects.
    pub(crate) fn applied_seq(&self) -> u64 {
        self.get().map_or(0, |t| t.applied_seq.to_native())
    }

    /// The `k` rows most similar to the unit vector `query`, best first (ties
    /// to the earlier row), leaving out documents in `skip`, and keeping
    /// only documents in `scope` when given, else all but session turns.
    pub(crate) fn search(
        &self,
        target: Target,
        query: &[f32],
        k: usize,
        scope: Option<&HashSet<&str>>,
        skip: &HashSet<String>,
    ) -> Result<Vec<RankedHit>> {
        let table = self.get()?;
        let dimension = table.dimension.to_native() as usize;
        if query.len() != dimension {
            return Err(Error::Vectors(format!(
                "query vector has dimension {}, the flat table {dimension}",
                query.len()
            )));
        }
        let searched: Vec<bool> = (table.docs.iter())
            .map(|doc| {
                let doc = doc.as_str();
                !skip.contains(doc) && scope.map_or(!is_turn_id(doc), |scope| scope.contains(doc))
            })
            .collect();
        let vectors = vector_rows(table);
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
        if k > 0 {
            for (at, row) in table.rows.iter().enumerate() {
                if !searched
                    .get(row.doc.to_native() as usize)
                    .copied()
                    .unwrap_or(false)
                {
                    continue;
                }
                let vector = vectors
                    .row(at)
                    .ok_or_else(|| Error::Vectors(format!("flat table row {at} has no vector")))?;
                let score = score(vector.dot(query));
                if best.len() == k && score <= best[k - 1].0 {
                    continue;
                }
                let place = best.partition_point(|&(s, _)| s >= score);
                best.insert(place, (score, at));
                best.truncate(k);
            }
        }
        best.into_iter()
            .map(|(score, at)| {
                let row = &table.rows[at];
                let doc = table
                    .docs
                    .get(row.doc.to_native() as usize)
                    .ok_or_else(|| {
                        Error::Vectors(format!("flat table row {at} names no document"))
                    })?;
                Ok(RankedHit {
                    doc: doc.as_str().to_owned(),
                    node: (target == Target::Nodes).then_some(row.item.to_native()),
                    span: Span::new(row.span.first.to_native(), row.span.last.to_native()),
                    score,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDENTITY: &str = "test-embedder";

    /// A table over three documents (one a session turn) of 2-d unit
    /// vectors at the given angles.
    fn table(seq: u64) -> FlatTable {
        let docs = ["a", "b", "@session/s/000000"];
        let rows = [(0, 0.0f32), (0, 0.5), (1, 0.2), (1, 1.2), (2, 0.0)];
        FlatTable {
            version: FLAT_VERSION,
            identity: IDENTITY.to_owned(),
            dimension: 2,
            applied_seq: seq,
            docs: docs.iter().map(|d| (*d).to_owned()).collect(),
            rows: (rows.iter().enumerate())
                .map(|(i, &(doc, _))| FlatRow {
                    doc,
                    item: i as u32,
                    span: Span::new(i as u32, i as u32 + 1),
                })
                .collect(),
            vectors: crate::compute::quantize::quantize(
                &rows
                    .iter()
                    .flat_map(|&(_, a)| [a.cos(), a.sin()])
                    .collect::<Vec<f32>>(),
                2,
            ),
        }
    }

    fn written(seq: u64) -> tempfile::TempDir {
        let dir = tempfile::TempDir::new().unwrap();
        write(&dir.path().join(file_name(Target::Nodes)), &table(seq)).unwrap();
        dir
    }

    fn ranked(hits: &[RankedHit]) -> Vec<(&str, Option<u32>)> {
        hits.iter().map(|h| (h.doc.as_str(), h.node)).collect()
    }

    #[test]
    fn a_written_table_is_searched_exactly_best_first() {
        let dir = written(7);
        let table = MappedTable::open(dir.path(), Target::Nodes, IDENTITY, 2).unwrap();
        assert_eq!(table.applied_seq(), 7);
        let none = HashSet::new();
        let hits = table
            .search(Target::Nodes, &[1.0, 0.0], 3, None, &none)
            .unwrap();
        // The session turn is left out of an unscoped search.
        assert_eq!(
            ranked(&hits),
            [("a", Some(0)), ("b", Some(2)), ("a", Some(1))]
        );
        assert_eq!(hits[0].span, Span::new(0, 1));
        assert!((hits[1].score - 0.2f32.cos()).abs() < 0.01);
        // A scope keeps its documents only, turns included.
        let scope: HashSet<&str> = ["b", "@session/s/000000"].into_iter().collect();
        let hits = table
            .search(Target::Nodes, &[1.0, 0.0], 2, Some(&scope), &none)
            .unwrap();
        assert_eq!(
            ranked(&hits),
            [("@session/s/000000", Some(4)), ("b", Some(2))]
        );
        // Skipped documents (changed since the table) are left out.
        let skip: HashSet<String> = ["a".to_owned()].into_iter().collect();
        let hits = table
            .search(Target::Edus, &[1.0, 0.0], 5, None, &skip)
            .unwrap();
        assert_eq!(ranked(&hits), [("b", None), ("b", None)]);
        assert!(
            table
                .search(Target::Nodes, &[1.0, 0.0], 0, None, &none)
                .unwrap()
                .is_empty()
        );
        assert!(table.search(Target::Nodes, &[1.0], 1, None, &none).is_err());
    }

    #[test]
    fn a_table_that_does_not_fit_is_not_used() {
        let dir = written(1);
        // Another embedder, another dimension, another target's file.
        assert!(MappedTable::open(dir.path(), Target::Nodes, "other", 2).is_none());
        assert!(MappedTable::open(dir.path(), Target::Nodes, IDENTITY, 3).is_none());
        assert!(MappedTable::open(dir.path(), Target::Edus, IDENTITY, 2).is_none());
        // Any damaged byte fails the checksum; a cut file fails too.
        let path = dir.path().join(file_name(Target::Nodes));
        let good = std::fs::read(&path).unwrap();
        for at in [0, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(
                MappedTable::open(dir.path(), Target::Nodes, IDENTITY, 2).is_none(),
                "{at}"
            );
        }
        for len in [0, 3, good.len() - 4] {
            std::fs::write(&path, &good[..len]).unwrap();
            assert!(
                MappedTable::open(dir.path(), Target::Nodes, IDENTITY, 2).is_none(),
                "{len}"
            );
        }
        std::fs::write(&path, &good).unwrap();
        assert!(MappedTable::open(dir.path(), Target::Nodes, IDENTITY, 2).is_some());
    }
}
