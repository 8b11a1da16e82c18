//! [`FullTextSet`]: full-text indexes ranked as one, the way a distributed
//! search engine ranks its shards: every ranking of any of them is scored
//! with BM25 statistics summed over all of them (entries, tokens and
//! document frequencies of the ranked field), so an entry scores the same
//! whether its documents sit in one index or are spread over several, and
//! the hits are merged best first. One store's queries rank through a set
//! of one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::Field;
use tantivy::{Searcher, Term};

use super::floor::SharedFloor;
use super::reader::{FullTextReader, weighted};
use super::schema::fulltext;
use crate::error::Result;
use crate::model::rank::{RankedHit, Target};

/// tantivy's BM25 term-frequency saturation constant.
const TANTIVY_BM25_K1: f32 = 1.2;

/// Full-text indexes (the stores of a shard set, or one store's) ranked
/// as one.
#[derive(Debug, Clone)]
pub struct FullTextSet {
    readers: Vec<FullTextReader>,
}

impl FullTextSet {
    /// The indexes of `readers` as one (all of edudb's one schema).
    pub fn new(readers: Vec<FullTextReader>) -> FullTextSet {
        FullTextSet { readers }
    }

    /// One index alone.
    pub fn of(reader: &FullTextReader) -> FullTextSet {
        FullTextSet::new(vec![reader.clone()])
    }

    /// Ranks nodes or EDUs by BM25 against free `text` (any of its terms;
    /// no query syntax, so any user text is accepted), within `docs` when
    /// given, best first; ties in document-id order, then node and first
    /// EDU. Session turns are ranked only when `docs` names nothing else (a
    /// `session('id')` scope); otherwise only documents. A document's node
    /// scores its representation's match plus twice its title's (see
    /// [`FullTextReader::ranked_terms`]).
    pub fn rank(
        &self,
        text: &str,
        target: Target,
        docs: Option<&[&str]>,
        limit: usize,
    ) -> Result<Vec<RankedHit>> {
        let Some(first) = self.readers.first() else {
            return Ok(Vec::new());
        };
        let field = first.field_of(target, docs);
        let terms = first.ranked_terms(text, field)?;
        self.ranked(field, |reader, searcher, statistics, floor| {
            reader.rank_terms(terms.clone(), docs, limit, searcher, statistics, floor)
        })
        .map(|hits| best(hits, limit))
    }

    /// BM25 search in tantivy query syntax over EDU texts and section
    /// titles (of documents, not session turns), best first (ties as
    /// [`FullTextSet::rank`] breaks them), scored with statistics over every
    /// index's entries.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<RankedHit>> {
        let searchers = self.searchers();
        let mut entries = 0;
        for searcher in &searchers {
            entries += Bm25StatisticsProvider::total_num_docs(searcher).map_err(fulltext)?;
        }
        let statistics = Statistics::new(&searchers, entries);
        let floor = SharedFloor::new();
        let mut hits = Vec::new();
        for (reader, searcher) in self.readers.iter().zip(&searchers) {
            hits.extend(reader.search(query, limit, searcher, &statistics, &floor)?);
        }
        Ok(best(hits, limit))
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
        let Some(first) = self.readers.first() else {
            return Ok(Vec::new());
        };
        let terms = weighted(first.terms(text, first.fields.title)?, 1.0);
        // Titles are held by documents' node entries: their count, not
        // every entry's, is the collection size.
        self.ranked(
            first.fields.node_text,
            |reader, searcher, statistics, floor| {
                reader.rank_terms(terms.clone(), docs, limit, searcher, statistics, floor)
            },
        )
        .map(|hits| best(hits, limit))
    }

    /// How specific `title` is: the fewest sections whose titles hold one of
    /// its terms (0 when it has none, or none is indexed). Sections of
    /// removed documents count until a merge drops them.
    pub fn title_sections(&self, title: &str) -> Result<u64> {
        let Some(first) = self.readers.first() else {
            return Ok(0);
        };
        let searchers = self.searchers();
        let mut fewest: Option<u64> = None;
        for term in first.terms(title, first.fields.title)? {
            let mut sections = 0;
            for searcher in &searchers {
                sections += searcher.doc_freq(&term).map_err(fulltext)?;
            }
            fewest = Some(fewest.map_or(sections, |f| f.min(sections)));
        }
        Ok(fewest.unwrap_or(0))
    }

    /// The BM25 score that [`FullTextSet::rank`] would give an entry of
    /// average length containing each of `text`'s terms once (a node: in
    /// its representation and its title): the sum of the terms' idf, each
    /// times its weight. A fixed scale for a query's scores (a hit matching
    /// only its common words scores a small fraction of it), where dividing
    /// by the best hit would lift any weak match to 1. 0 when nothing is
    /// indexed or `text` has no terms. `docs` picks the fields as `rank` does.
    pub fn rank_ceiling(&self, text: &str, target: Target, docs: Option<&[&str]>) -> Result<f32> {
        let Some(first) = self.readers.first() else {
            return Ok(0.0);
        };
        let field = first.field_of(target, docs);
        let terms = first.ranked_terms(text, field)?;
        let searchers = self.searchers();
        let statistics = self.statistics(&searchers, field)?;
        if statistics.entries == 0 {
            return Ok(0.0);
        }
        // tantivy's `max_score` is idf × (1 + k1) (an entry saturated with
        // the term); one occurrence at average length scores idf.
        let mut ceiling = 0.0;
        for (term, weight) in &terms {
            let saturated = Bm25Weight::for_terms(&statistics, std::slice::from_ref(term))
                .map_err(fulltext)?
                .max_score();
            ceiling += weight * saturated / (1.0 + TANTIVY_BM25_K1);
        }
        Ok(ceiling)
    }

    /// Each index's current searcher.
    fn searchers(&self) -> Vec<Searcher> {
        self.readers.iter().map(|r| r.reader.searcher()).collect()
    }

    /// The statistics `field` is ranked with over `searchers`.
    fn statistics<'a>(&self, searchers: &'a [Searcher], field: Field) -> Result<Statistics<'a>> {
        let mut entries = 0;
        for (reader, searcher) in self.readers.iter().zip(searchers) {
            entries += reader.entries_having(searcher, field)?;
        }
        Ok(Statistics::new(searchers, entries))
    }

    /// The hits `rank` finds in each index, all scored with `field`'s
    /// statistics over the set and pruned by one floor; the indexes ranked
    /// side by side.
    fn ranked(
        &self,
        field: Field,
        rank: impl Fn(
            &FullTextReader,
            &Searcher,
            &Statistics<'_>,
            &SharedFloor,
        ) -> Result<Vec<RankedHit>>
        + Sync,
    ) -> Result<Vec<RankedHit>> {
        let searchers = self.searchers();
        let statistics = self.statistics(&searchers, field)?;
        let floor = SharedFloor::new();
        if let ([reader], [searcher]) = (self.readers.as_slice(), searchers.as_slice()) {
            return rank(reader, searcher, &statistics, &floor);
        }
        let each: Vec<Vec<RankedHit>> = (self.readers.par_iter().zip(&searchers))
            .map(|(reader, searcher)| rank(reader, searcher, &statistics, &floor))
            .collect::<Result<_>>()?;
        Ok(each.into_iter().flatten().collect())
    }
}

/// The best `limit` of `hits`, best first; ties in document-id order, then
/// node and first EDU (an index's own order on ties is where its entries
/// happen to lie).
fn best(mut hits: Vec<RankedHit>, limit: usize) -> Vec<RankedHit> {
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.doc.cmp(&b.doc))
            .then_with(|| a.node.cmp(&b.node))
            .then_with(|| a.span.first.cmp(&b.span.first))
    });
    hits.truncate(limit);
    hits
}

/// BM25 statistics of one ranked field over a set's indexes, counting only
/// the entries having it: an entry is an EDU or a node of a document or of
/// a session turn, and each kind has its own field, so neither the other
/// kinds' entries nor the number of session turns shift a field's idf and
/// average length. Each term's document frequency and the field's token
/// count are looked up once (in every segment of every index) and kept:
/// tantivy asks for them building each index's weights, and the scores
/// summed again ask once more.
struct Statistics<'a> {
    searchers: &'a [Searcher],
    /// Entries having the field (deleted ones until a merge drops them).
    entries: u64,
    known: Mutex<HashMap<Term, u64>>,
    /// The field's token count over every index, once looked up.
    tokens: Mutex<Option<(Field, u64)>>,
}

impl<'a> Statistics<'a> {
    /// The statistics over `searchers`, `entries` being the collection's
    /// size.
    fn new(searchers: &'a [Searcher], entries: u64) -> Statistics<'a> {
        Statistics {
            searchers,
            entries,
            known: Mutex::default(),
            tokens: Mutex::default(),
        }
    }
}

impl Bm25StatisticsProvider for Statistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&(known, count)) = tokens.as_ref()
            && known == field
        {
            return Ok(count);
        }
        let mut count = 0;
        for searcher in self.searchers {
            count += searcher.total_num_tokens(field)?;
        }
        *tokens = Some((field, count));
        Ok(count)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.entries.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let known = |known: &Mutex<HashMap<Term, u64>>| {
            known
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(term)
                .copied()
        };
        if let Some(entries) = known(&self.known) {
            return Ok(entries);
        }
        let mut entries = 0;
        for searcher in self.searchers {
            entries += searcher.doc_freq(term)?;
        }
        (self.known.lock().unwrap_or_else(PoisonError::into_inner)).insert(term.clone(), entries);
        Ok(entries)
    }
}
