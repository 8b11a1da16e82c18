//! [`WithinDocuments`]: a ranking of terms restricted to some documents'
//! entries (a metadata filter, a session's turns), costing no more than
//! the unrestricted ranking.
//!
//! Each segment's allowed entries are a bitset, read once per segment from
//! the postings of the document-id terms and kept with the scope
//! ([`Allowed`]): a segment never changes (deletions are tantivy's own
//! bitset, merges make new segments), so the reader keeps the last scopes
//! searched, as Lucene's query cache keeps filters, and the two rankings
//! of a seed, or the next question under the same filter, read none
//! again.
//!
//! Where the allowed entries are under a quarter of a segment, each term's
//! postings are intersected with them and the top hits found by MaxScore
//! ([`max_score`]): only allowed entries are scored, and the common terms
//! only where the rarer ones leave a chance to beat the hits so far. (An
//! intersection with the whole union of the terms scores every entry of a
//! 4,096-entry window around each allowed document; tantivy's own
//! block-max WAND takes no filter.) Where they are most of it, the
//! unrestricted WAND walk runs and offers only allowed entries to the
//! collector, the way tantivy's collector passes over deleted entries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tantivy::index::SegmentId;
use tantivy::query::{
    BitSetDocSet, Bm25Weight, BooleanQuery, BoostQuery, ConstScorer, EnableScoring, Explanation,
    Occur, Query, Scorer, TermQuery, Weight, intersect_scorers,
};
use tantivy::schema::IndexRecordOption;
use tantivy::{BitSet, DocId, DocSet, Score, SegmentReader, TERMINATED, TantivyError, Term};

/// The allowed entries lead (each term intersected with them, MaxScore
/// over those) when they are fewer than one in this many of a segment's
/// entries; otherwise the unrestricted WAND walk is filtered by them.
const SPARSE_SHARE: u64 = 4;

/// A term of a ranking and the weight its BM25 score is multiplied by.
pub(super) type Weighted = (Term, Score);

/// Any of `terms` (BM25 times each term's weight, summed), matching only
/// the `allowed` entries; scored as the terms alone.
#[derive(Debug, Clone)]
pub(super) struct WithinDocuments {
    terms: Vec<Weighted>,
    allowed: Arc<Allowed>,
}

impl WithinDocuments {
    /// Any of `terms` within `allowed`.
    pub(super) fn new(terms: Vec<Weighted>, allowed: Arc<Allowed>) -> Self {
        WithinDocuments { terms, allowed }
    }
}

/// Any of `terms`, each scored by BM25 times its weight, summed: a union
/// tantivy ranks top-k with block-max WAND.
pub(super) fn any_of(terms: &[Weighted]) -> BooleanQuery {
    let clause =
        |t: &Weighted| -> (Occur, Box<dyn Query>) { (Occur::Should, Box::new(term_query(t))) };
    BooleanQuery::new(terms.iter().map(clause).collect())
}

/// One weighted term's BM25 query. tantivy's boost hands back the term's
/// own scorer, its score scaled, so a union of these keeps block-max WAND.
fn term_query((term, weight): &Weighted) -> BoostQuery {
    let query = TermQuery::new(term.clone(), IndexRecordOption::WithFreqs);
    BoostQuery::new(Box::new(query), *weight)
}

impl Query for WithinDocuments {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for weighted @ (term, weight) in &self.terms {
            let query = term_query(weighted);
            // The most the term can score anywhere (unbounded unscored).
            let most = match enable_scoring {
                EnableScoring::Enabled {
                    statistics_provider,
                    ..
                } => {
                    Bm25Weight::for_terms(statistics_provider, std::slice::from_ref(term))?
                        .max_score()
                        * weight
                }
                EnableScoring::Disabled { .. } => Score::INFINITY,
            };
            terms.push((query.weight(enable_scoring)?, most));
        }
        Ok(Box::new(WithinDocumentsWeight {
            ranking: any_of(&self.terms).weight(enable_scoring)?,
            terms,
            allowed: Arc::clone(&self.allowed),
        }))
    }
}

/// Some documents' id terms, and each segment's entries of them (read on
/// first use by a query's weights).
#[derive(Debug)]
pub(super) struct Allowed {
    ids: Vec<Term>,
    by_segment: Mutex<HashMap<SegmentId, Arc<BitSet>>>,
}

impl Allowed {
    /// The entries of the documents of `ids` (terms of the `doc` field).
    pub(super) fn new(ids: impl IntoIterator<Item = Term>) -> Allowed {
        Allowed {
            ids: ids.into_iter().collect(),
            by_segment: Mutex::default(),
        }
    }

    /// Forgets the entries of segments not in `live`.
    pub(super) fn keep_segments(&self, live: &[SegmentId]) {
        self.lock().retain(|id, _| live.contains(id));
    }

    /// The entries of the documents in the segment of `reader`.
    fn of(&self, reader: &SegmentReader) -> tantivy::Result<Arc<BitSet>> {
        let id = reader.segment_id();
        if let Some(known) = self.lock().get(&id) {
            return Ok(Arc::clone(known));
        }
        let mut allowed = BitSet::with_max_value(reader.max_doc());
        if let Some(field) = self.ids.first().map(Term::field) {
            let index = reader.inverted_index(field)?;
            for id in &self.ids {
                let Some(mut postings) = index.read_postings(id, IndexRecordOption::Basic)? else {
                    continue;
                };
                let mut entry = postings.doc();
                while entry != TERMINATED {
                    allowed.insert(entry);
                    entry = postings.advance();
                }
            }
        }
        let allowed = Arc::new(allowed);
        self.lock().insert(id, Arc::clone(&allowed));
        Ok(allowed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SegmentId, Arc<BitSet>>> {
        self.by_segment
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// `scorer` within `allowed`, which adds nothing to its score.
fn within(scorer: Box<dyn Scorer>, allowed: &BitSet, reader: &SegmentReader) -> Box<dyn Scorer> {
    let allowed = Box::new(ConstScorer::new(BitSetDocSet::from(allowed.clone()), 0.0));
    intersect_scorers(vec![scorer, allowed], reader.num_docs())
}

struct WithinDocumentsWeight {
    /// Any of the terms, everywhere.
    ranking: Box<dyn Weight>,
    /// Each term alone, with the most it can score.
    terms: Vec<(Box<dyn Weight>, Score)>,
    allowed: Arc<Allowed>,
}

impl Weight for WithinDocumentsWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let allowed = self.allowed.of(reader)?;
        Ok(within(
            self.ranking.scorer(reader, boost)?,
            &allowed,
            reader,
        ))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        if !self.allowed.of(reader)?.contains(doc) {
            return Err(TantivyError::InvalidArgument(format!(
                "entry {doc} is not in the documents searched"
            )));
        }
        self.ranking.explain(reader, doc)
    }

    fn for_each_pruning(
        &self,
        threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        let allowed = self.allowed.of(reader)?;
        let count = allowed.len() as u64;
        if count == 0 {
            return Ok(());
        }
        if count * SPARSE_SHARE < u64::from(reader.max_doc()) {
            let mut terms = Vec::with_capacity(self.terms.len());
            for &(ref term, most) in &self.terms {
                let scorer = within(term.scorer(reader, 1.0)?, &allowed, reader);
                if scorer.doc() != TERMINATED {
                    terms.push(Bounded { scorer, most });
                }
            }
            max_score(terms, threshold, callback);
            return Ok(());
        }
        let mut current = threshold;
        self.ranking
            .for_each_pruning(threshold, reader, &mut |entry, score| {
                if allowed.contains(entry) {
                    current = callback(entry, score);
                }
                current
            })
    }
}

/// One term's scorer, with a bound on its scores.
struct Bounded {
    scorer: Box<dyn Scorer>,
    most: Score,
}

/// Offers `callback` every entry whose summed score over `terms` beats
/// the threshold (the callback's answer, rising), by MaxScore (Turtle and
/// Flood): the terms whose bounds together cannot beat the threshold are
/// not walked, only sought on the entries the others lead to, and not even
/// that once the score so far plus their bounds cannot beat it.
fn max_score(
    mut terms: Vec<Bounded>,
    mut threshold: Score,
    callback: &mut dyn FnMut(DocId, Score) -> Score,
) {
    terms.sort_by(|a, b| a.most.total_cmp(&b.most));
    // bounds[i]: the bounds of terms 0..=i together.
    let bounds: Vec<Score> = terms
        .iter()
        .scan(0.0, |sum, t| {
            *sum += t.most;
            Some(*sum)
        })
        .collect();
    loop {
        // Terms before `walked` cannot beat the threshold on their own.
        let walked = bounds.partition_point(|&bound| bound <= threshold);
        let Some(entry) = terms[walked..]
            .iter()
            .map(|t| t.scorer.doc())
            .min()
            .filter(|&e| e != TERMINATED)
        else {
            return;
        };
        let mut score = 0.0;
        for term in &mut terms[walked..] {
            if term.scorer.doc() == entry {
                score += term.scorer.score();
                term.scorer.advance();
            }
        }
        for i in (0..walked).rev() {
            if score + bounds[i] <= threshold {
                break;
            }
            let scorer = &mut terms[i].scorer;
            if scorer.doc() < entry {
                scorer.seek(entry);
            }
            if scorer.doc() == entry {
                score += scorer.score();
            }
        }
        if score > threshold {
            threshold = callback(entry, score);
        }
    }
}
