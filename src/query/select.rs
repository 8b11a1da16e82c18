//! Greedy selection under a token budget and an item limit.
//!
//! Candidates are taken best first. A candidate that adds no EDU (it lies
//! inside a pick) is skipped; one that overlaps picks merges with them into
//! one span (so a picked ancestor absorbs its picked descendants and no EDU
//! is ever returned twice); one whose new tokens would overflow the budget
//! is skipped while smaller ones may still fit. The budget is never exceeded.

use std::collections::BTreeMap;

use crate::model::edu::Span;
pub use crate::model::tokens::TokenPrefix;

/// A span proposed for selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Index of the document in the caller's table.
    pub doc: usize,
    /// The tree node the span is, or `None` for a run of EDUs.
    pub node: Option<u32>,
    /// The EDUs.
    pub span: Span,
    /// Relevance, higher first.
    pub score: f32,
}

/// What the selection kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selected {
    /// Picks, each a disjoint span (per document), in the order first taken.
    pub picks: Vec<Candidate>,
    /// Tokens of all picks together.
    pub tokens: u64,
}

/// Takes `candidates` in the order given (best first) while they fit in
/// `budget` tokens and `limit` items; `tokens[c.doc]` counts a document's
/// EDUs. With `disjoint`, picks never share an EDU (overlaps merge); without,
/// picks may nest (a listing of nodes) and only exact repeats are dropped.
pub fn select(
    candidates: &[Candidate],
    tokens: &[impl AsRef<TokenPrefix>],
    budget: Option<u64>,
    limit: usize,
    disjoint: bool,
) -> Selected {
    if !disjoint {
        return select_nested(candidates, tokens, budget, limit);
    }
    // Per document: first EDU -> index into `picks` (live entries only).
    let mut by_start: Vec<BTreeMap<u32, usize>> = vec![BTreeMap::new(); tokens.len()];
    let mut picks: Vec<Option<Candidate>> = Vec::new();
    let mut live = 0usize;
    let mut used = 0u64;
    for candidate in candidates {
        let starts = &by_start[candidate.doc];
        // Picks overlapping the candidate: those starting at or before its
        // last EDU and ending at or after its first.
        let overlapping: Vec<usize> = starts
            .range(..=candidate.span.last)
            .rev()
            .map(|(_, &i)| i)
            .take_while(|&i| picks[i].is_some_and(|p| p.span.last >= candidate.span.first))
            .collect();
        // Picks are disjoint and sorted, so walking back from the candidate's
        // last EDU, the overlapping ones come first; the first non-overlap ends the run.
        if overlapping
            .iter()
            .any(|&i| picks[i].is_some_and(|p| p.span.contains(&candidate.span)))
        {
            continue;
        }
        let mut union = candidate.span;
        let mut old_tokens = 0;
        let mut score = candidate.score;
        for &i in &overlapping {
            let pick = picks[i].expect("live pick");
            union = Span::new(
                union.first.min(pick.span.first),
                union.last.max(pick.span.last),
            );
            old_tokens += tokens[candidate.doc].as_ref().tokens(pick.span);
            score = score.max(pick.score);
        }
        let added = tokens[candidate.doc].as_ref().tokens(union) - old_tokens;
        if budget.is_some_and(|b| used + added > b) {
            continue;
        }
        if overlapping.is_empty() && live >= limit {
            continue;
        }
        for &i in &overlapping {
            let pick = picks[i].take().expect("live pick");
            by_start[candidate.doc].remove(&pick.span.first);
            live -= 1;
        }
        let node = if union == candidate.span {
            candidate.node
        } else {
            None
        };
        by_start[candidate.doc].insert(union.first, picks.len());
        picks.push(Some(Candidate {
            doc: candidate.doc,
            node,
            span: union,
            score,
        }));
        live += 1;
        used += added;
    }
    Selected {
        picks: picks.into_iter().flatten().collect(),
        tokens: used,
    }
}

fn select_nested(
    candidates: &[Candidate],
    tokens: &[impl AsRef<TokenPrefix>],
    budget: Option<u64>,
    limit: usize,
) -> Selected {
    let mut seen = std::collections::HashSet::new();
    let mut selected = Selected::default();
    for candidate in candidates {
        if selected.picks.len() >= limit {
            break;
        }
        let cost = tokens[candidate.doc].as_ref().tokens(candidate.span);
        if budget.is_some_and(|b| selected.tokens + cost > b)
            || !seen.insert((candidate.doc, candidate.span, candidate.node))
        {
            continue;
        }
        selected.tokens += cost;
        selected.picks.push(*candidate);
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn candidate(doc: usize, node: Option<u32>, first: u32, last: u32, score: f32) -> Candidate {
        Candidate {
            doc,
            node,
            span: Span::new(first, last),
            score,
        }
    }

    #[test]
    fn an_ancestor_absorbs_its_picked_descendants() {
        let tokens = vec![TokenPrefix::new([10; 10])];
        let picked = select(
            &[
                candidate(0, None, 3, 3, 0.9),
                candidate(0, Some(2), 2, 5, 0.8),
                candidate(0, None, 4, 4, 0.7),
            ],
            &tokens,
            Some(100),
            10,
            true,
        );
        assert_eq!(picked.picks, vec![candidate(0, Some(2), 2, 5, 0.9)]);
        assert_eq!(picked.tokens, 40);
    }

    #[test]
    fn a_candidate_that_does_not_fit_is_skipped_and_smaller_ones_still_fit() {
        let tokens = vec![TokenPrefix::new([10; 10])];
        let picked = select(
            &[
                candidate(0, Some(0), 0, 9, 1.0),
                candidate(0, None, 7, 7, 0.5),
                candidate(0, None, 1, 2, 0.4),
            ],
            &tokens,
            Some(30),
            10,
            true,
        );
        assert_eq!(
            picked.picks,
            vec![candidate(0, None, 7, 7, 0.5), candidate(0, None, 1, 2, 0.4)]
        );
        assert_eq!(picked.tokens, 30);
    }

    #[test]
    fn overlapping_runs_merge_into_one_run() {
        let tokens = vec![TokenPrefix::new([1; 10])];
        let picked = select(
            &[
                candidate(0, None, 2, 4, 0.9),
                candidate(0, Some(5), 4, 6, 0.5),
            ],
            &tokens,
            None,
            10,
            true,
        );
        assert_eq!(picked.picks, vec![candidate(0, None, 2, 6, 0.9)]);
    }

    #[test]
    fn the_limit_counts_items() {
        let tokens = vec![TokenPrefix::new([1; 10]), TokenPrefix::new([1; 3])];
        let picked = select(
            &[
                candidate(0, None, 0, 0, 0.9),
                candidate(1, None, 0, 0, 0.8),
                candidate(0, None, 5, 5, 0.7),
                candidate(0, None, 0, 1, 0.6),
            ],
            &tokens,
            None,
            2,
            true,
        );
        assert_eq!(
            picked.picks,
            vec![candidate(1, None, 0, 0, 0.8), candidate(0, None, 0, 1, 0.9)]
        );
    }

    #[test]
    fn a_nested_listing_keeps_ancestors_and_descendants() {
        let tokens = vec![TokenPrefix::new([1; 10])];
        let nodes = [
            candidate(0, Some(0), 0, 9, 0.9),
            candidate(0, Some(1), 2, 5, 0.8),
            candidate(0, Some(1), 2, 5, 0.8),
        ];
        let picked = select(&nodes, &tokens, None, 10, false);
        assert_eq!(picked.picks, nodes[..2]);
        assert_eq!(picked.tokens, 14);
    }

    proptest! {
        #[test]
        fn never_exceeds_the_budget_nor_returns_an_edu_twice(
            sizes in proptest::collection::vec(1u32..40, 1..30),
            raw in proptest::collection::vec((0u32..30, 0u32..8, 0.0f32..1.0, any::<bool>()), 0..60),
            budget in 1u64..400,
            limit in 1usize..20,
        ) {
            let tokens = vec![TokenPrefix::new(sizes.iter().copied())];
            let n = sizes.len() as u32;
            let candidates: Vec<Candidate> = raw
                .iter()
                .map(|&(first, len, score, node)| {
                    let first = first % n;
                    let last = (first + len).min(n - 1);
                    candidate(0, node.then_some(first), first, last, score)
                })
                .collect();
            let picked = select(&candidates, &tokens, Some(budget), limit, true);
            prop_assert!(picked.tokens <= budget);
            prop_assert!(picked.picks.len() <= limit);
            let mut seen = vec![false; n as usize];
            let mut total = 0;
            for pick in &picked.picks {
                for edu in pick.span.first..=pick.span.last {
                    prop_assert!(!seen[edu as usize], "EDU {} returned twice", edu);
                    seen[edu as usize] = true;
                }
                total += tokens[0].tokens(pick.span);
            }
            prop_assert_eq!(total, picked.tokens);
        }
    }
}
