//! The documents a query reads: its scope's ids, and the rule for one
//! that is damaged.

use crate::error::Result;
use crate::query::plan::SelectPlan;

/// The query's rule for a document it reads as one among others: damage
/// (a record that does not read whole) leaves the document out of the
/// query with a warning, as listings do, so one damaged document never
/// fails a query over the rest; any other failure fails the query.
pub(super) fn unless_damaged<T>(id: &str, read: Result<T>) -> Result<Option<T>> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(err) if err.is_damage() => {
            tracing::warn!(
                "document {id} is damaged and was left out of the query ({err}); `edudb check` names every damaged document"
            );
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// The scope's document ids, `None` for every document.
pub(super) fn scope_ids(plan: &SelectPlan) -> Option<Vec<&str>> {
    plan.docs
        .as_ref()
        .map(|ids| ids.iter().map(String::as_str).collect())
}
