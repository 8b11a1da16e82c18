//! The flat baselines: retrieval that ignores the tree, over the same
//! stored EDUs and under the same budget as edudb's queries.
//!
//! - BM25 over fixed-size chunks: consecutive EDUs of a document packed up
//!   to about N tokens (never cutting an EDU, so scoring is comparable), in
//!   a tantivy index with the store's analyser and BM25;
//! - vector search over the same chunks: the store's embedder, exact cosine
//!   (no approximation to blame);
//! - BM25 over single EDUs, without structure;
//! - BM25 over whole pages of a PDF (a document without pages is one
//!   page), what page-level retrieval over a PDF returns;
//! - truncation: the first tokens of the documents in order, what a
//!   long-context model given the same budget would see.
//!
//! Each ranks its units once per question; selection then takes units in
//! rank order while they fit the budget.

use std::collections::HashMap;
use std::path::Path;

use crate::compute::embed::{Embedder, dot};
use crate::error::Result;
use crate::model::document::Document;
use crate::model::edu::{Edu, EduKind, Span};
use crate::model::rank::Target;
use crate::model::tree::Tree;
use crate::storage::fulltext::{FullText, FullTextSet};

/// A flat retrieval method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// BM25 over chunks of about this many tokens.
    Bm25Chunks(u32),
    /// Exact cosine over chunks of about this many tokens.
    VectorChunks(u32),
    /// BM25 over single EDUs.
    Bm25Edus,
    /// BM25 over the EDUs of each page.
    Bm25Pages,
    /// The first EDUs in document order.
    Truncate,
}

impl Baseline {
    /// The name reports use, e.g. `bm25-chunk-200`.
    pub fn name(self) -> String {
        match self {
            Baseline::Bm25Chunks(n) => format!("bm25-chunk-{n}"),
            Baseline::VectorChunks(n) => format!("vector-chunk-{n}"),
            Baseline::Bm25Edus => "bm25-edu".to_owned(),
            Baseline::Bm25Pages => "bm25-page".to_owned(),
            Baseline::Truncate => "truncate".to_owned(),
        }
    }

    /// Its units over `docs`.
    fn units(self, docs: &[Document]) -> Vec<Unit> {
        match self {
            Baseline::Bm25Chunks(n) | Baseline::VectorChunks(n) => units(docs, Some(n)),
            Baseline::Bm25Edus | Baseline::Truncate => units(docs, None),
            Baseline::Bm25Pages => page_units(docs),
        }
    }
}

/// A run of EDUs `first..=last` of the group's document `doc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// Index of the document in the group.
    pub doc: usize,
    /// First EDU.
    pub first: u32,
    /// Last EDU, inclusive.
    pub last: u32,
    /// Tokens of the run.
    pub tokens: u64,
}

/// The units of `docs`: runs of consecutive EDUs of one document up to
/// `max_tokens` each (an EDU longer than that is a unit alone), or one unit
/// per EDU when `None`.
pub fn units(docs: &[Document], max_tokens: Option<u32>) -> Vec<Unit> {
    let limit = max_tokens.map_or(0, u64::from);
    runs(docs, |_, unit, edu| {
        unit.tokens + u64::from(edu.tokens) <= limit
    })
}

/// The units of `docs`: the EDUs of each page, by the page an EDU starts
/// on; a document without pages is one unit.
pub fn page_units(docs: &[Document]) -> Vec<Unit> {
    runs(docs, |doc, unit, edu| {
        doc.pages.as_ref().is_none_or(|pages| {
            let first = doc.edus[unit.first as usize].start;
            pages.page_at(first) == pages.page_at(edu.start)
        })
    })
}

/// Runs of consecutive EDUs of each document of `docs`: an EDU joins the
/// current run when `joins(document, run, edu)`, else starts the next.
fn runs(docs: &[Document], joins: impl Fn(&Document, &Unit, &Edu) -> bool) -> Vec<Unit> {
    let mut out = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        let mut current: Option<Unit> = None;
        for edu in &doc.edus {
            let tokens = u64::from(edu.tokens);
            match &mut current {
                Some(unit) if joins(doc, unit, edu) => {
                    unit.last = edu.id;
                    unit.tokens += tokens;
                }
                _ => {
                    out.extend(current.take());
                    current = Some(Unit {
                        doc: index,
                        first: edu.id,
                        last: edu.id,
                        tokens,
                    });
                }
            }
        }
        out.extend(current);
    }
    out
}

enum Ranker {
    /// A tantivy index whose entries are the units (see [`unit_document`]).
    Bm25(Box<FullText>),
    /// One unit vector per unit.
    Vectors(Vec<Vec<f32>>),
    /// Document order.
    Position,
}

/// A baseline built over one group's documents.
pub struct FlatIndex {
    baseline: Baseline,
    units: Vec<Unit>,
    /// Per document (by index), where its units start in `units`.
    first_unit: Vec<usize>,
    ranker: Ranker,
}

impl std::fmt::Debug for FlatIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatIndex")
            .field("baseline", &self.baseline)
            .field("units", &self.units.len())
            .finish_non_exhaustive()
    }
}

impl FlatIndex {
    /// Builds `baseline` over `docs`; a BM25 index lives in `dir`.
    pub fn build(
        baseline: Baseline,
        docs: &[Document],
        dir: &Path,
        embedder: &dyn Embedder,
    ) -> Result<FlatIndex> {
        let units = baseline.units(docs);
        let mut first_unit = vec![0; docs.len()];
        for (i, unit) in units.iter().enumerate().rev() {
            first_unit[unit.doc] = i;
        }
        let ranker = match baseline {
            Baseline::Bm25Chunks(_) | Baseline::Bm25Edus | Baseline::Bm25Pages => {
                let mut index = FullText::open(dir)?;
                for (doc_index, doc) in docs.iter().enumerate() {
                    let own = units.iter().filter(|u| u.doc == doc_index);
                    index.replace(&unit_document(doc, own))?;
                }
                index.commit(0)?;
                Ranker::Bm25(Box::new(index))
            }
            Baseline::VectorChunks(_) => {
                let texts: Vec<&str> = units.iter().map(|u| unit_text(docs, u)).collect();
                let mut vectors = Vec::with_capacity(texts.len());
                for batch in texts.chunks(256) {
                    vectors.extend(embedder.embed(batch)?);
                }
                Ranker::Vectors(vectors)
            }
            Baseline::Truncate => Ranker::Position,
        };
        Ok(FlatIndex {
            baseline,
            units,
            first_unit,
            ranker,
        })
    }

    /// Its units, best first for `question`: at most `limit` of them.
    pub fn rank(
        &self,
        question: &str,
        limit: usize,
        embedder: &dyn Embedder,
        docs: &[Document],
    ) -> Result<Vec<Unit>> {
        let ids: HashMap<&str, usize> = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.meta.id.as_str(), i))
            .collect();
        Ok(match &self.ranker {
            Ranker::Bm25(index) => FullTextSet::of(&index.reader())
                .rank(question, Target::Edus, None, limit)?
                .into_iter()
                .filter_map(|hit| {
                    let doc = *ids.get(hit.doc.as_str())?;
                    self.units
                        .get(self.first_unit[doc] + hit.span.first as usize)
                        .copied()
                })
                .collect(),
            Ranker::Vectors(vectors) => {
                let query = embedder.embed(&[question])?.pop().unwrap_or_default();
                let mut scored: Vec<(f32, usize)> = vectors
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (dot(&query, v), i))
                    .collect();
                scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                scored
                    .into_iter()
                    .take(limit)
                    .map(|(_, i)| self.units[i])
                    .collect()
            }
            Ranker::Position => self.units.iter().take(limit).copied().collect(),
        })
    }

    /// Units of `ranked` taken in order while they fit `budget` tokens: a
    /// unit that does not fit is skipped (truncation stops there instead).
    pub fn select(&self, ranked: &[Unit], budget: u64) -> Vec<Unit> {
        let mut left = budget;
        let mut picked = Vec::new();
        for unit in ranked {
            if unit.tokens <= left {
                left -= unit.tokens;
                picked.push(*unit);
            } else if self.baseline == Baseline::Truncate {
                break;
            }
        }
        picked
    }
}

fn unit_text<'a>(docs: &'a [Document], unit: &Unit) -> &'a str {
    let doc = &docs[unit.doc];
    let start = doc.edus[unit.first as usize].start as usize;
    let end = doc.edus[unit.last as usize].end as usize;
    &doc.text[start..end]
}

/// `doc` re-cut so that each of its `units` is one EDU (id = the unit's
/// position among the document's units) and without a tree: the full-text
/// index then holds exactly one entry per unit.
fn unit_document<'a>(doc: &Document, units: impl Iterator<Item = &'a Unit>) -> Document {
    let edus: Vec<Edu> = units
        .enumerate()
        .map(|(i, unit)| Edu {
            id: u32::try_from(i).unwrap_or(u32::MAX),
            start: doc.edus[unit.first as usize].start,
            end: doc.edus[unit.last as usize].end,
            tokens: u32::try_from(unit.tokens).unwrap_or(u32::MAX),
            kind: EduKind::Text,
        })
        .collect();
    Document {
        meta: doc.meta.clone(),
        text: doc.text.clone(),
        edus,
        tree: Tree { nodes: Vec::new() },
        pages: doc.pages.clone(),
        metadata: doc.metadata.clone(),
    }
}

/// EDUs `span` as a unit of document `doc` (for scoring query results the
/// same way as baseline picks).
pub fn unit_of(docs: &[Document], doc: usize, span: Span) -> Unit {
    let tokens = docs[doc].edus[span.first as usize..=span.last as usize]
        .iter()
        .map(|e| u64::from(e.tokens))
        .sum();
    Unit {
        doc,
        first: span.first,
        last: span.last,
        tokens,
    }
}
