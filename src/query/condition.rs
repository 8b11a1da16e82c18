//! A compiled WHERE condition ([`Filter`]), and its conditions on whole
//! documents (`meta.KEY …`, `doc = 'id'`): a metadata condition is looked
//! up in the store's metadata index when the statement is bound, and the
//! documents a WHERE clause allows become the documents the query seeds
//! from, so they restrict the seed before ranking instead of filtering
//! what a budget already cut.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use regex::Regex;

use super::ast::CompareOp;
use super::catalog::Catalog;
use crate::error::Result;
use crate::model::metadata::{MetaTest, MetaValue};
use crate::model::tree::NodeKind;

/// A compiled WHERE condition.
#[derive(Debug, Clone)]
pub enum Filter {
    /// `level <op> n`
    Level(CompareOp, u16),
    /// `kind = name`: `None` names bare EDU runs (`edu`).
    Kind(bool, Option<NodeKind>),
    /// `title ~ regex`
    Title(Regex),
    /// `doc = 'id'`
    Doc(String),
    /// A metadata condition: the documents meeting it (looked up once,
    /// when the statement is bound).
    Docs(Arc<BTreeSet<String>>),
    /// `time <op> t`: the candidate's session turn's time (seconds since
    /// the Unix epoch); a turn without a time never matches.
    Time(CompareOp, i64),
    /// `page <op> n`: some page (1-based) the candidate lies on meets it;
    /// a candidate of a document without pages (not a PDF) never does.
    Page(CompareOp, u32),
    /// Every one.
    And(Vec<Filter>),
    /// At least one.
    Or(Vec<Filter>),
    /// Not.
    Not(Box<Filter>),
}

/// A metadata condition with its values bound.
#[derive(Debug, Clone)]
pub(super) enum MetaCheck {
    /// `meta.KEY <op> value`
    Compare(CompareOp, MetaValue),
    /// `meta.KEY BETWEEN a AND b`
    Between(MetaValue, MetaValue),
    /// `meta.KEY IN (…)`
    In(Vec<MetaValue>),
    /// `meta.KEY CONTAINS 'text'`
    Contains(String),
    /// `EXISTS meta.KEY`
    Exists,
}

/// The documents whose metadata key `key` meets `check`. A value of
/// another type than the condition's never meets it; `!=` holds for the
/// documents that have the key with another value.
pub(super) fn meta_documents(
    catalog: &dyn Catalog,
    key: &str,
    check: &MetaCheck,
) -> Result<BTreeSet<String>> {
    let find = |test: MetaTest| catalog.documents_matching(key, &test);
    let range = |low, high| find(MetaTest::Range(low, high));
    Ok(match check {
        MetaCheck::Compare(op, value) => {
            let value = value.clone();
            match op {
                CompareOp::Eq => find(MetaTest::equal(value))?,
                CompareOp::Ne => {
                    let equal = find(MetaTest::equal(value))?;
                    let mut any = find(MetaTest::Exists)?;
                    any.retain(|doc| !equal.contains(doc));
                    any
                }
                CompareOp::Lt => range(Bound::Unbounded, Bound::Excluded(value))?,
                CompareOp::Le => range(Bound::Unbounded, Bound::Included(value))?,
                CompareOp::Gt => range(Bound::Excluded(value), Bound::Unbounded)?,
                CompareOp::Ge => range(Bound::Included(value), Bound::Unbounded)?,
            }
        }
        MetaCheck::Between(low, high) => {
            range(Bound::Included(low.clone()), Bound::Included(high.clone()))?
        }
        MetaCheck::In(values) => {
            let mut any = BTreeSet::new();
            for value in values {
                any.append(&mut find(MetaTest::equal(value.clone()))?);
            }
            any
        }
        MetaCheck::Contains(text) => find(MetaTest::Contains(text.clone()))?,
        MetaCheck::Exists => find(MetaTest::Exists)?,
    })
}

/// The documents that can hold a candidate meeting `filter`, drawn from
/// `universe` (every document in scope): `None` when the filter does not
/// restrict documents (a condition on nodes under an `OR`, say). Exact for
/// a filter made of document conditions only.
pub(super) fn documents_meeting(
    filter: &Filter,
    universe: &mut dyn FnMut() -> Result<BTreeSet<String>>,
) -> Result<Option<BTreeSet<String>>> {
    Ok(match filter {
        Filter::Docs(docs) => Some(docs.as_ref().clone()),
        Filter::Doc(id) => Some(BTreeSet::from([id.clone()])),
        Filter::And(filters) => {
            let mut meeting: Option<BTreeSet<String>> = None;
            for filter in filters {
                if let Some(docs) = documents_meeting(filter, universe)? {
                    meeting = Some(match meeting {
                        Some(so_far) => so_far.intersection(&docs).cloned().collect(),
                        None => docs,
                    });
                }
            }
            meeting
        }
        Filter::Or(filters) => {
            let mut meeting = BTreeSet::new();
            for filter in filters {
                match documents_meeting(filter, universe)? {
                    Some(mut docs) => meeting.append(&mut docs),
                    None => return Ok(None),
                }
            }
            Some(meeting)
        }
        Filter::Not(inner) if on_documents_only(inner) => {
            let excluded = documents_meeting(inner, universe)?.unwrap_or_default();
            let mut meeting = universe()?;
            meeting.retain(|doc| !excluded.contains(doc));
            Some(meeting)
        }
        _ => None,
    })
}

/// Whether `filter` holds or fails for whole documents only.
fn on_documents_only(filter: &Filter) -> bool {
    match filter {
        Filter::Docs(_) | Filter::Doc(_) => true,
        Filter::And(filters) | Filter::Or(filters) => filters.iter().all(on_documents_only),
        Filter::Not(inner) => on_documents_only(inner),
        _ => false,
    }
}
