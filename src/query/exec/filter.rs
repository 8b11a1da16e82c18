//! WHERE: which candidates a statement's filter keeps.

use crate::query::ast::CompareOp;
use crate::query::condition::Filter;
use crate::query::select::Candidate;
use crate::query::view::View;

/// `actual <op> wanted`.
pub(super) fn compare<T: PartialOrd>(op: CompareOp, actual: T, wanted: T) -> bool {
    match op {
        CompareOp::Eq => actual == wanted,
        CompareOp::Ne => actual != wanted,
        CompareOp::Lt => actual < wanted,
        CompareOp::Le => actual <= wanted,
        CompareOp::Gt => actual > wanted,
        CompareOp::Ge => actual >= wanted,
    }
}

/// Whether `candidate` of `view` (whose session turn time is `time`)
/// meets `filter`.
pub(super) fn matches(
    filter: &Filter,
    view: &View,
    candidate: &Candidate,
    time: Option<i64>,
) -> bool {
    match filter {
        Filter::Level(op, level) => compare(*op, view.level(candidate), *level),
        Filter::Page(op, page) => view.pages(candidate).is_some_and(|pages| {
            let (first, last) = (pages.start + 1, pages.end);
            match op {
                CompareOp::Eq => first <= *page && *page <= last,
                CompareOp::Ne => !(first == *page && last == *page),
                CompareOp::Lt => first < *page,
                CompareOp::Le => first <= *page,
                CompareOp::Gt => last > *page,
                CompareOp::Ge => last >= *page,
            }
        }),
        Filter::Time(op, wanted) => time.is_some_and(|time| compare(*op, time, *wanted)),
        Filter::Kind(equal, kind) => {
            let actual = candidate.node.map(|n| view.node(n).kind);
            (actual == *kind) == *equal
        }
        Filter::Title(regex) => candidate
            .node
            .is_some_and(|n| regex.is_match(view.node(n).title.as_str())),
        Filter::Doc(id) => view.id == *id,
        Filter::Docs(docs) => docs.contains(&view.id),
        Filter::And(filters) => filters.iter().all(|f| matches(f, view, candidate, time)),
        Filter::Or(filters) => filters.iter().any(|f| matches(f, view, candidate, time)),
        Filter::Not(a) => !matches(a, view, candidate, time),
    }
}
