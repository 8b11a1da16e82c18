//! EXPAND: grows a candidate structurally.

use crate::model::edu::Span;
use crate::query::plan::Growth;
use crate::query::select::Candidate;
use crate::query::view::View;

/// Grows one candidate structurally; its score is kept.
pub(super) fn expand(view: &View, candidate: &Candidate, growth: Growth) -> Candidate {
    let whole_node = |id: u32| Candidate {
        node: Some(id),
        span: view.span_of(id),
        ..*candidate
    };
    let run = |span: Span| Candidate {
        node: view.node_of_run(span),
        span,
        ..*candidate
    };
    match (growth, candidate.node) {
        (Growth::Subtree, Some(_)) => *candidate,
        (Growth::Subtree | Growth::Parent, None) => whole_node(view.innermost(candidate.span)),
        (Growth::Parent, Some(id)) => whole_node(view.node(id).parent.unwrap_or(id)),
        (Growth::Siblings, Some(id)) => match view.node(id).parent {
            None => *candidate,
            Some(parent) => {
                let siblings: Vec<u32> = view.children(parent).collect();
                let at = siblings.iter().position(|&s| s == id).unwrap_or(0);
                let first = siblings[at.saturating_sub(1)];
                let last = siblings[(at + 1).min(siblings.len() - 1)];
                run(Span::new(
                    view.span_of(first).first,
                    view.span_of(last).last,
                ))
            }
        },
        (Growth::Siblings, None) => {
            let within = view.span_of(view.innermost(candidate.span));
            run(Span::new(
                candidate.span.first.saturating_sub(1).max(within.first),
                (candidate.span.last + 1).min(within.last),
            ))
        }
        (Growth::Context(n), _) => run(Span::new(
            candidate.span.first.saturating_sub(n),
            candidate.span.last.saturating_add(n).min(view.last_edu()),
        )),
    }
}
