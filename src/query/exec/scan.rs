//! Without a seed: every node and EDU in scope.

use crate::model::edu::Span;
use crate::query::select::Candidate;
use crate::query::view::View;

/// Without a seed: every node (and EDU, when `edus`) in scope, score 0.
pub(super) fn scan(views: &[View], edus: bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (doc, view) in views.iter().enumerate() {
        for id in 0..view.document().tree.nodes.len() as u32 {
            out.push(Candidate {
                doc,
                node: Some(id),
                span: view.span_of(id),
                score: 0.0,
            });
        }
        if edus {
            out.extend((0..view.document().edus.len() as u32).map(|e| Candidate {
                doc,
                node: None,
                span: Span::new(e, e),
                score: 0.0,
            }));
        }
    }
    out
}
