//! [`FullTextReader`]: searches and rankings over the committed index,
//! each field scored with its own BM25 statistics, coordinates read from
//! fast-field columns opened once per segment.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;
use tantivy::index::SegmentId;
use tantivy::query::{Bm25StatisticsProvider, Query, QueryParser, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Index, IndexReader, Score, Searcher, Term};

use super::floor::{FlooredTop, SharedFloor};
use super::rescore::rescored;
use super::schema::{Fields, NO_NODE, damaged, fulltext};
use super::scope::{Allowed, Weighted, WithinDocuments, any_of};
use crate::error::{Error, Result};
use crate::model::edu::Span;
use crate::model::ids::is_turn_id;
use crate::model::rank::{RankedHit, Target};

/// Weight of a section-title match against a text match: an EDU's in
/// `search`, a node representation's in `rank` (a heading that names the
/// query is the better answer). In `rank` it was checked on the HotpotQA
/// and MuSiQue dev sets, where 2 raised the plain seed's recall at every
/// budget and 4 no longer did (docs/benchmarks.md).
const TITLE_BOOST: f32 = 2.0;

/// Hits a ranking fetches past its limit: when the hit at the cut ties
/// (to within rounding) every one of them, it fetches twice as many, and
/// so on, until a hit left out can no longer tie it.
const CUT_MARGIN: usize = 4;

/// A cheap, clonable read handle: searches run without the writer's lock.
#[derive(Clone)]
pub struct FullTextReader {
    pub(super) index: Index,
    pub(super) reader: IndexReader,
    pub(super) fields: Fields,
    /// Each live segment's opened coordinate columns, shared by every clone:
    /// opening them costs more than reading a query's hits from them.
    pub(super) columns: Arc<Mutex<HashMap<SegmentId, Columns>>>,
    /// The last document scopes searched, with their entries per segment,
    /// shared by every clone.
    pub(super) scopes: Arc<Mutex<LruCache<Vec<String>, Arc<Allowed>>>>,
}

/// How many document scopes a reader keeps (see [`Allowed`]).
const KEPT_SCOPES: NonZeroUsize = NonZeroUsize::new(16).expect("not zero");

impl std::fmt::Debug for FullTextReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FullTextReader").finish_non_exhaustive()
    }
}

impl FullTextReader {
    /// A reader of `index` through `reader`, with nothing opened yet.
    pub(super) fn new(index: Index, reader: IndexReader, fields: Fields) -> FullTextReader {
        FullTextReader {
            index,
            reader,
            fields,
            columns: Arc::default(),
            scopes: Arc::new(Mutex::new(LruCache::new(KEPT_SCOPES))),
        }
    }

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

    /// The best `limit` hits of `query`, in tantivy query syntax over EDU
    /// texts and section titles (of documents, not session turns), scored
    /// with `statistics`, pruned by `floor`.
    pub(super) fn search(
        &self,
        query: &str,
        limit: usize,
        searcher: &Searcher,
        statistics: &dyn Bm25StatisticsProvider,
        floor: &SharedFloor,
    ) -> Result<Vec<RankedHit>> {
        let mut parser =
            QueryParser::for_index(&self.index, vec![self.fields.text, self.fields.title]);
        parser.set_field_boost(self.fields.title, TITLE_BOOST);
        let parsed = parser.parse_query(query).map_err(|e| Error::BadSearch {
            query: query.to_owned(),
            message: e.to_string(),
        })?;
        self.top(searcher, &parsed, limit, statistics, None, floor)
    }

    /// The field nodes or EDUs are ranked on: the turn fields when `docs`
    /// names only session turns, else the documents' fields.
    pub(super) fn field_of(&self, target: Target, docs: Option<&[&str]>) -> Field {
        let turns = docs.is_some_and(|ids| !ids.is_empty() && ids.iter().all(|id| is_turn_id(id)));
        match (target, turns) {
            (Target::Nodes, false) => self.fields.node_text,
            (Target::Edus, false) => self.fields.text,
            (Target::Nodes, true) => self.fields.turn_node_text,
            (Target::Edus, true) => self.fields.turn_text,
        }
    }

    /// The weighted terms `field` is ranked on for `text`: its own terms,
    /// and for documents' nodes the title field's too, weighted
    /// [`TITLE_BOOST`]. A node's representation holds its title once
    /// among up to [`crate::model::document::REPRESENTATIVE_TOKENS`] of its
    /// text, so a section a question names by its heading ("the cash flow
    /// statement") would rank below any passage repeating the question's
    /// words; scoring the title as a field of its own, as BM25F does, lets
    /// the heading count as what the section is about.
    pub(super) fn ranked_terms(&self, text: &str, field: Field) -> Result<Vec<Weighted>> {
        let mut terms = weighted(self.terms(text, field)?, 1.0);
        if field == self.fields.node_text && !terms.is_empty() {
            terms.extend(weighted(self.terms(text, self.fields.title)?, TITLE_BOOST));
        }
        Ok(terms)
    }

    /// The entries holding any of `terms`, within `docs` when given, by
    /// BM25 with `statistics` times each term's weight, best first; those
    /// under `floor` (see [`super::floor`]) left out.
    pub(super) fn rank_terms(
        &self,
        terms: Vec<Weighted>,
        docs: Option<&[&str]>,
        limit: usize,
        searcher: &Searcher,
        statistics: &dyn Bm25StatisticsProvider,
        floor: &SharedFloor,
    ) -> Result<Vec<RankedHit>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let query: Box<dyn Query> = match docs {
            None => Box::new(any_of(&terms)),
            Some(docs) => Box::new(WithinDocuments::new(
                terms.clone(),
                self.scope(searcher, docs),
            )),
        };
        // Past the limit by a margin, widened until the hits tied at the
        // cut are all in: they are then chosen by their scores summed
        // again and their ids, never by where they lie in the index. Fewer
        // than fetched means none was left out but under the floor, which
        // no hit of the result is.
        let mut fetched = limit.saturating_add(CUT_MARGIN);
        loop {
            let hits = self.top(searcher, &*query, fetched, statistics, Some(&terms), floor)?;
            if hits.len() < fetched || limit == 0 || clear_cut(&hits, limit) {
                return Ok(hits);
            }
            fetched = fetched.saturating_mul(2);
        }
    }

    /// The entries of documents `docs`: one of the last [`KEPT_SCOPES`]
    /// scopes searched, its live segments' entries kept, or a new one.
    fn scope(&self, searcher: &Searcher, docs: &[&str]) -> Arc<Allowed> {
        let key: Vec<String> = docs.iter().map(|&id| id.to_owned()).collect();
        let mut scopes = self.scopes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(allowed) = scopes.get(&key) {
            let live: Vec<SegmentId> = searcher
                .segment_readers()
                .iter()
                .map(|s| s.segment_id())
                .collect();
            allowed.keep_segments(&live);
            return Arc::clone(allowed);
        }
        let ids = docs
            .iter()
            .map(|id| Term::from_field_text(self.fields.doc, id));
        let allowed = Arc::new(Allowed::new(ids));
        scopes.put(key, Arc::clone(&allowed));
        allowed
    }

    /// How many entries have `field` (deleted ones until a merge drops
    /// them): the collection size its BM25 statistics count.
    pub(super) fn entries_having(&self, searcher: &Searcher, field: Field) -> Result<u64> {
        let name = self.index.schema().get_field_name(field).to_owned();
        searcher
            .doc_freq(&Term::from_field_text(self.fields.kind, &name))
            .map_err(fulltext)
    }

    /// The distinct terms `field`'s analyser makes of `text`.
    pub(super) fn terms(&self, text: &str, field: Field) -> Result<Vec<Term>> {
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

    /// The best `limit` hits of `query` over `floor`, their scores summed
    /// again over `summed`, the query's weighted terms, when given (see
    /// [`super::rescore`]). tantivy panics on some damaged index files (a
    /// fast-field column cut short) instead of failing; such a panic is the
    /// index's damage, not the caller's crash.
    fn top(
        &self,
        searcher: &Searcher,
        query: &dyn Query,
        limit: usize,
        statistics: &dyn Bm25StatisticsProvider,
        summed: Option<&[Weighted]>,
        floor: &SharedFloor,
    ) -> Result<Vec<RankedHit>> {
        let read = crate::error::catch_quietly(|| {
            self.read_top(searcher, query, limit, statistics, summed, floor)
        });
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
        summed: Option<&[Weighted]>,
        floor: &SharedFloor,
    ) -> Result<Vec<RankedHit>> {
        // The heap reserves room for the limit up front: no more hits than
        // entries can come back, so a huge limit costs nothing more.
        let entries = usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX);
        let heap = limit.min(entries).max(1);
        let collector = FlooredTop {
            limit: heap,
            raises: heap == limit,
            floor,
        };
        let top = searcher
            .search_with_statistics_provider(query, &collector, statistics)
            .map_err(fulltext)?;
        let top: Vec<(Score, DocAddress)> = match summed {
            Some(terms) => {
                let addresses: Vec<DocAddress> = top.iter().map(|&(_, at)| at).collect();
                let scores = rescored(searcher, terms, statistics, &addresses)?;
                scores.into_iter().zip(addresses).collect()
            }
            None => top,
        };
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

/// The coordinate columns of one segment.
#[derive(Clone)]
pub(super) struct Columns {
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

/// Whether the best `limit` of `hits` (fetched best first by tantivy's
/// scores, [`super::rescore`]'s summed again) are surely the best `limit`
/// of every match: the `limit`-th best summed score is above the lowest
/// fetched by more than the rounding between the two sums (relative
/// 1e-5), so no match left out can tie or beat it.
fn clear_cut(hits: &[RankedHit], limit: usize) -> bool {
    let mut scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
    scores.sort_by(|a, b| b.total_cmp(a));
    let (Some(&cut), Some(&lowest)) = (scores.get(limit - 1), scores.last()) else {
        return true;
    };
    cut > lowest + 1e-5 * lowest.abs().max(f32::MIN_POSITIVE)
}

/// `terms`, each with `weight`.
pub(super) fn weighted(terms: Vec<Term>, weight: f32) -> Vec<Weighted> {
    terms.into_iter().map(|t| (t, weight)).collect()
}
