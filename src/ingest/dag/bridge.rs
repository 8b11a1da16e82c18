//! Information points that connect chunks, without a language model: a
//! [`BridgeIpMaker`] point is a term that several EDUs of the batch share
//! (a name, a rare word: what a multi-hop question's bridge usually is),
//! and its text is real EDUs that mention it (at most `edus_per_point`,
//! one per lower node first, so a point spans chunks). Its edges are
//! weighted by attention from the point to every node of the window, so
//! they favour the nodes whose text shares the term, and relevance reaching
//! the point flows on to them (HippoRAG's shared entities, as PECAN's
//! cross-chunk points).

use std::collections::{HashMap, HashSet};

use super::ip::{EduVectors, ExtractiveIpMaker, IpMaker};
use crate::compute::embed::hashed::words;
use crate::model::document::Document;
use crate::model::edu::EduKind;

/// Points from terms shared across a batch, then extractive points for
/// what budget is left.
#[derive(Debug, Clone, Copy)]
pub struct BridgeIpMaker {
    /// A term in more than this share of the batch's EDUs is too common to
    /// connect anything.
    pub max_share: f32,
    /// Fewest characters of a term.
    pub min_chars: usize,
    /// Most EDUs in one point.
    pub edus_per_point: usize,
    /// Makes the points of the budget the shared terms leave.
    pub rest: ExtractiveIpMaker,
}

impl Default for BridgeIpMaker {
    fn default() -> BridgeIpMaker {
        BridgeIpMaker {
            max_share: 0.1,
            min_chars: 3,
            edus_per_point: 3,
            rest: ExtractiveIpMaker::default(),
        }
    }
}

/// One shared term: the EDUs mentioning it (document order) and their
/// lower nodes.
struct Term {
    word: String,
    mentions: Vec<(usize, u32)>,
    salience: f32,
}

impl BridgeIpMaker {
    /// The batch's shared terms, most salient first: a term counts once
    /// per EDU; it must be in at least two EDUs and at most `max_share` of
    /// them (but two are always allowed, so in a small batch a common word
    /// shared by two EDUs can qualify); salience is `ln(EDUs / df) · min(df, edus_per_point)`, so a
    /// rare term shared by a few EDUs leads. Ties go to the earlier first
    /// mention, then the term, so a rebuild makes the same points.
    fn shared_terms(&self, doc: &Document, batch: &[Vec<u32>], budget: u32) -> Vec<Term> {
        let mut mentions: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut edus = 0usize;
        // Points of a level above the chunks may share EDUs: each EDU is
        // read once, in the first node that holds it.
        let mut read = HashSet::new();
        for (node, members) in batch.iter().enumerate() {
            for &e in members {
                let edu = &doc.edus[e as usize];
                if edu.kind == EduKind::Heading || edu.tokens > budget.max(1) || !read.insert(e) {
                    continue;
                }
                edus += 1;
                let mut seen = HashSet::new();
                for word in words(&doc.text[edu.start as usize..edu.end as usize]) {
                    if word.chars().count() >= self.min_chars
                        && !word.chars().all(|c| c.is_ascii_digit())
                        && seen.insert(word.clone())
                    {
                        mentions.entry(word).or_default().push((node, e));
                    }
                }
            }
        }
        let most = ((self.max_share * edus as f32) as usize).max(2);
        let mut terms: Vec<Term> = mentions
            .into_iter()
            .filter(|(_, m)| m.len() >= 2 && m.len() <= most)
            .map(|(word, mentions)| {
                let df = mentions.len();
                let salience = (edus as f32 / df as f32).ln() * df.min(self.edus_per_point) as f32;
                Term {
                    word,
                    mentions,
                    salience,
                }
            })
            .collect();
        terms.sort_by(|a, b| {
            b.salience
                .total_cmp(&a.salience)
                .then(a.mentions[0].1.cmp(&b.mentions[0].1))
                .then_with(|| a.word.cmp(&b.word))
        });
        terms
    }

    /// A term's point: its mentions, one per lower node first (so the
    /// point reaches as many nodes as it can), at most `edus_per_point`.
    fn point(&self, term: &Term) -> Vec<u32> {
        let mut nodes = HashSet::new();
        let (spread, repeats): (Vec<_>, Vec<_>) = term
            .mentions
            .iter()
            .partition(|(node, _)| nodes.insert(*node));
        let mut point: Vec<u32> = (spread.into_iter().chain(repeats))
            .map(|&(_, e)| e)
            .take(self.edus_per_point)
            .collect();
        point.sort_unstable();
        point
    }
}

impl IpMaker for BridgeIpMaker {
    fn make(
        &self,
        doc: &Document,
        vectors: &EduVectors,
        batch: &[Vec<u32>],
        budget: u32,
    ) -> Vec<Vec<u32>> {
        let tokens =
            |point: &[u32]| -> u32 { point.iter().map(|&e| doc.edus[e as usize].tokens).sum() };
        let mut points: Vec<Vec<u32>> = Vec::new();
        let mut covered: HashSet<u32> = HashSet::new();
        let mut spent = 0u32;
        for term in self.shared_terms(doc, batch, budget) {
            let point = self.point(&term);
            if point.iter().all(|e| covered.contains(e)) || spent + tokens(&point) > budget {
                continue;
            }
            spent += tokens(&point);
            covered.extend(&point);
            points.push(point);
        }
        // What the shared terms left goes to extractive points over the
        // EDUs no point holds yet.
        let left = budget.saturating_sub(spent);
        let rest: Vec<Vec<u32>> = batch
            .iter()
            .map(|node| {
                node.iter()
                    .copied()
                    .filter(|e| !covered.contains(e))
                    .collect()
            })
            .collect();
        let had_points = !points.is_empty();
        if left > 0 || !had_points {
            let extra = self.rest.make(doc, vectors, &rest, left.max(1));
            points.extend(
                extra
                    .into_iter()
                    .filter(|p| !p.is_empty() && (!had_points || tokens(p) <= left)),
            );
        }
        points.sort_by_key(|p| p[0]);
        points
    }
}
