//! Rankings' scores summed again in one fixed order. tantivy adds up a
//! hit's per-term BM25 scores in the order its cursors meet the hit, which
//! the index's layout decides (segments, merges, where an entry lies), so
//! the same entry can score a rounding step apart in two indexes of the
//! same documents, or in one index before and after a merge; where hits
//! tie, that step picks the winner. Summed again term by term in the
//! ranking's own order, a hit's score depends on the statistics and the
//! entry alone: one store and a shard set, or a store before and after a
//! vacuum, rank alike.

use tantivy::postings::Postings;
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, DocSet, Score, Searcher, TERMINATED};

use super::schema::fulltext;
use super::scope::Weighted;
use crate::error::Result;

/// The BM25 score of each entry at `addresses` for `terms` (each times its
/// weight), with `statistics`, summed in the terms' order.
pub(super) fn rescored(
    searcher: &Searcher,
    terms: &[Weighted],
    statistics: &dyn Bm25StatisticsProvider,
    addresses: &[DocAddress],
) -> Result<Vec<Score>> {
    let mut order: Vec<usize> = (0..addresses.len()).collect();
    order.sort_by_key(|&i| addresses[i]);
    let mut scores: Vec<Score> = vec![0.0; addresses.len()];
    for (term, weight) in terms {
        let bm25 = Bm25Weight::for_terms(statistics, std::slice::from_ref(term))
            .map_err(fulltext)?
            .boost_by(*weight);
        // Each segment's postings of the term, walked forward through the
        // hits in address order.
        let mut segment = None;
        let mut postings = None;
        let mut norms = None;
        for &i in &order {
            let address = addresses[i];
            if segment != Some(address.segment_ord) {
                segment = Some(address.segment_ord);
                let reader = searcher.segment_reader(address.segment_ord);
                postings = reader
                    .inverted_index(term.field())
                    .and_then(|index| {
                        index
                            .read_postings(term, IndexRecordOption::WithFreqs)
                            .map_err(Into::into)
                    })
                    .map_err(fulltext)?;
                norms = Some(
                    reader
                        .get_fieldnorms_reader(term.field())
                        .map_err(fulltext)?,
                );
            }
            let (Some(postings), Some(norms)) = (postings.as_mut(), norms.as_ref()) else {
                continue;
            };
            let at = if postings.doc() < address.doc_id {
                postings.seek(address.doc_id)
            } else {
                postings.doc()
            };
            if at != TERMINATED && at == address.doc_id {
                let norm = norms.fieldnorm_id(address.doc_id);
                scores[i] += bm25.score(norm, postings.term_freq());
            }
        }
    }
    Ok(scores)
}
