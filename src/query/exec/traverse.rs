//! TRAVERSE: CSTree-SRI's top-down walk of each document's tree.

use std::collections::HashMap;

use crate::model::edu::Span;
use crate::query::select::Candidate;
use crate::query::view::View;

/// EDUs taken from each node the walk stops at (CSTree-SRI's sentence-level top-k).
const EDUS_PER_WALK_LEAF: usize = 3;

/// CSTree-SRI's top-down walk. A node's continuation score φ is the best of
/// its own seed score and the seed scores of the EDUs it covers. From each
/// root with φ ≥ `threshold`, children with φ ≥ `threshold` (down to
/// `depth`) are explored; a node none of whose children is explored is a
/// walk leaf and becomes a candidate scored φ; a node walked through that
/// the seed ranked stays a candidate at its own seed score when that is
/// above every explored child's φ (a section whose heading the question
/// names is worth taking whole, even when a child leads further down).
/// Each visited node also contributes its best EDUs not covered by an
/// explored child. Returns the candidates and the number of nodes visited.
pub(super) fn traverse(
    views: &[View],
    nodes: &[Candidate],
    edus: &[Candidate],
    threshold: f32,
    depth: Option<u16>,
) -> (Vec<Candidate>, usize) {
    let mut node_scores: Vec<HashMap<u32, f32>> = vec![HashMap::new(); views.len()];
    for c in nodes {
        if let Some(id) = c.node {
            node_scores[c.doc].insert(id, c.score);
        }
    }
    let mut edu_scores: Vec<Vec<(u32, f32)>> = vec![Vec::new(); views.len()];
    for c in edus {
        edu_scores[c.doc].push((c.span.first, c.score));
    }
    for scores in &mut edu_scores {
        scores.sort_by_key(|&(edu, _)| edu);
    }
    let mut out = Vec::new();
    let mut visited = 0;
    for (doc, view) in views.iter().enumerate() {
        let hits = &edu_scores[doc];
        let in_span = |span: Span| {
            let from = hits.partition_point(|&(e, _)| e < span.first);
            let to = hits.partition_point(|&(e, _)| e <= span.last);
            &hits[from..to]
        };
        let phi = |id: u32| {
            let own = node_scores[doc].get(&id).copied().unwrap_or(0.0);
            in_span(view.span_of(id))
                .iter()
                .map(|&(_, s)| s)
                .fold(own, f32::max)
        };
        let continues = |score: f32| score >= threshold && score > 0.0;
        if !continues(phi(0)) {
            continue;
        }
        let mut stack = vec![0u32];
        while let Some(id) = stack.pop() {
            visited += 1;
            // The children explored, each with its φ.
            let explored: Vec<(u32, f32)> = view
                .children(id)
                .filter(|&c| depth.is_none_or(|d| view.node(c).level <= d))
                .map(|c| (c, phi(c)))
                .filter(|&(_, score)| continues(score))
                .collect();
            let mut own: Vec<(u32, f32)> = in_span(view.span_of(id))
                .iter()
                .copied()
                .filter(|&(e, _)| {
                    !explored
                        .iter()
                        .any(|&(c, _)| view.span_of(c).contains(&Span::new(e, e)))
                })
                .collect();
            own.sort_by(|a, b| b.1.total_cmp(&a.1));
            out.extend(
                own.iter()
                    .take(EDUS_PER_WALK_LEAF)
                    .map(|&(e, score)| Candidate {
                        doc,
                        node: None,
                        span: Span::new(e, e),
                        score,
                    }),
            );
            // A walk leaf scores φ. A node walked through stays a
            // candidate at its own seed score when that beats every
            // explored child's φ: as a whole it matches better than any
            // part below it (a section whose heading the question names).
            let score = if explored.is_empty() {
                Some(phi(id))
            } else {
                node_scores[doc]
                    .get(&id)
                    .copied()
                    .filter(|&own| explored.iter().all(|&(_, child)| own > child))
            };
            if let Some(score) = score {
                out.push(Candidate {
                    doc,
                    node: Some(id),
                    span: view.span_of(id),
                    score,
                });
            }
            stack.extend(explored.iter().map(|&(c, _)| c));
        }
    }
    (out, visited)
}
