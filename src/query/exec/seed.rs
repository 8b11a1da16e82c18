//! SEED: ranks nodes and EDUs in scope against the seed text (BM25,
//! vectors or both) and keeps each hit's own match score.

use std::collections::HashMap;

use super::scope::scope_ids;
use crate::error::Result;
use crate::model::rank::{RankedHit, Target};
use crate::query::ast::Output;
use crate::query::corpus::Corpus;
use crate::query::plan::{SeedMethod, SeedPlan, SelectPlan};
use crate::query::select::Candidate;

/// Fewest candidates a seed fetches from each of the node and EDU rankings.
const MIN_SEED_CANDIDATES: usize = 32;

/// Most candidates a seed fetches from each ranking.
const MAX_SEED_CANDIDATES: usize = 10_000;

/// Seed hits of one ranking, scores divided by the best (negative cosine
/// similarities count as 0).
pub(super) fn normalised(hits: Vec<RankedHit>) -> Vec<RankedHit> {
    let best = hits.iter().map(|h| h.score).fold(0.0f32, f32::max);
    scaled(hits, best)
}

/// Hits with scores divided by `scale` and clamped to 0..=1 (all 0 when
/// `scale` is not positive).
pub(super) fn scaled(mut hits: Vec<RankedHit>, scale: f32) -> Vec<RankedHit> {
    for hit in &mut hits {
        hit.score = if scale > 0.0 {
            (hit.score / scale).clamp(0.0, 1.0)
        } else {
            0.0
        };
    }
    hits
}

/// HYBRID: the union of a BM25 ranking and a vector ranking (both scaled
/// to 0..=1), each hit scored `alpha × vector + (1 − alpha) × BM25` (a hit
/// missing from one ranking scores 0 there); the best `wanted`.
pub(super) fn fused(
    bm25: Vec<RankedHit>,
    near: Vec<RankedHit>,
    alpha: f32,
    wanted: usize,
) -> Vec<RankedHit> {
    let mut by_item: HashMap<(String, Option<u32>, u32), RankedHit> = HashMap::new();
    for (hits, weight) in [(bm25, 1.0 - alpha), (near, alpha)] {
        for hit in hits {
            let key = (hit.doc.clone(), hit.node, hit.span.first);
            let contribution = weight * hit.score;
            by_item
                .entry(key)
                .and_modify(|h| h.score += contribution)
                .or_insert(RankedHit {
                    score: contribution,
                    ..hit
                });
        }
    }
    let mut hits: Vec<RankedHit> = by_item.into_values().collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| (&a.doc, a.span.first).cmp(&(&b.doc, b.span.first)))
    });
    hits.truncate(wanted);
    hits
}

/// What a seed found: node and EDU hits, each ranking normalised by its
/// best, and their match scores before that.
pub(super) struct Seeded {
    pub(super) nodes: Vec<RankedHit>,
    pub(super) edus: Vec<RankedHit>,
    pub(super) matches: MatchScores,
}

impl Seeded {
    /// The documents the hits fall in, sorted, each once.
    pub(super) fn documents(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .nodes
            .iter()
            .chain(&self.edus)
            .map(|h| h.doc.clone())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Ranks nodes and EDUs in scope against the seed text (BM25, vectors, or
/// both), fetching `max(32, 8 × LIMIT, BUDGET / 16)` of each, capped at
/// 10,000.
pub(super) fn seed(corpus: &Corpus<'_>, plan: &SelectPlan, how: &SeedPlan) -> Result<Seeded> {
    let by_limit = if plan.limit == usize::MAX {
        0
    } else {
        plan.limit.saturating_mul(8)
    };
    let by_budget = plan.budget.map_or(0, |b| (b / 16) as usize);
    let wanted = by_limit
        .max(by_budget)
        .clamp(MIN_SEED_CANDIDATES, MAX_SEED_CANDIDATES);
    if plan.docs.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Seeded {
            nodes: Vec::new(),
            edus: Vec::new(),
            matches: MatchScores::default(),
        });
    }
    let scope = scope_ids(plan);
    let text = how.text.as_str();
    let reader = corpus.fulltext();
    let query_vector = match (how.method, &how.vector) {
        (SeedMethod::Bm25, _) => None,
        (_, Some(given)) => Some(given.clone()),
        (SeedMethod::Near | SeedMethod::Hybrid { .. }, None) => Some(corpus.embed_query(text)?),
    };
    // A target's hits with their match scores (those under MIN dropped),
    // and how many matched at all.
    let rank = |target| -> Result<(Vec<RankedHit>, usize)> {
        let bm25 = || reader.rank(text, target, scope.as_deref(), wanted);
        let near = || match &query_vector {
            Some(query) => corpus.vector_search(target, query, wanted, scope.as_deref()),
            None => Ok(Vec::new()),
        };
        let hits = match how.method {
            SeedMethod::Bm25 => bm25()?,
            SeedMethod::Near => near()?,
            // Both on a fixed scale before fusing, so a weak match in one
            // ranking is not lifted to 1 just for being that ranking's best.
            SeedMethod::Hybrid { alpha } => fused(
                scaled(
                    bm25()?,
                    reader.rank_ceiling(text, target, scope.as_deref())?,
                ),
                scaled(near()?, 1.0),
                alpha,
                wanted,
            ),
        };
        let matched = hits.len();
        Ok(match how.min {
            Some(min) => (
                hits.into_iter().filter(|h| h.score >= min).collect(),
                matched,
            ),
            None => (hits, matched),
        })
    };
    let mut matches = MatchScores::default();
    let mut seeded = |(hits, _): (Vec<RankedHit>, usize)| {
        matches.record(&hits);
        normalised(hits)
    };
    if plan.output == Output::Nodes {
        let nodes = seeded(rank(Target::Nodes)?);
        return Ok(Seeded {
            nodes,
            edus: Vec::new(),
            matches,
        });
    }
    // The two rankings are independent searches: run them side by side, on
    // the shared pool (a thread spawned per query costs a visible share).
    let (nodes, edus) = rayon::join(|| rank(Target::Nodes), || rank(Target::Edus));
    let nodes = nodes?;
    // No node matched BM25: no EDU can either (node texts cover every EDU).
    let edus = if nodes.1 == 0 && how.method == SeedMethod::Bm25 {
        (Vec::new(), 0)
    } else {
        edus?
    };
    let (nodes, edus) = (seeded(nodes), seeded(edus));
    Ok(Seeded {
        nodes,
        edus,
        matches,
    })
}

/// The seed's own scores of its hits (BM25, cosine similarity, HYBRID's
/// fused score on its fixed scale), before each ranking is divided by its
/// best: what a result item reports as its `match_score`.
#[derive(Debug, Default)]
pub(super) struct MatchScores(HashMap<(String, Option<u32>, u32), f32>);

impl MatchScores {
    /// Keeps the scores of `hits`.
    fn record(&mut self, hits: &[RankedHit]) {
        for hit in hits {
            let key = (hit.doc.clone(), hit.node, hit.span.first);
            self.0.insert(key, hit.score);
        }
    }

    /// The match score of a pick in document `doc`: its node's, or for a
    /// run of EDUs the best of its EDUs'; `None` when it is or holds no
    /// seed hit (a walk leaf, a propagated node).
    pub(super) fn of(&self, doc: &str, pick: &Candidate) -> Option<f32> {
        let score = |node, first| self.0.get(&(doc.to_owned(), node, first)).copied();
        match pick.node {
            Some(node) => score(Some(node), pick.span.first),
            None => (pick.span.first..=pick.span.last)
                .filter_map(|e| score(None, e))
                .reduce(f32::max),
        }
    }
}
