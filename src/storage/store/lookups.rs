//! The latest lookups of the metadata index, kept for as long as no batch
//! is applied ([`Store::documents_matching`]).
//!
//! [`Store::documents_matching`]: super::handle::Store::documents_matching

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::model::metadata::MetaTest;

/// How many lookups [`Lookups`] keeps.
const KEPT_LOOKUPS: usize = 16;

/// The latest lookups of the metadata index, newest first, each with the
/// count of batches applied when it began (the store's `batches`): valid only
/// while no batch has been applied since.
#[derive(Debug, Default)]
pub(super) struct Lookups(Mutex<VecDeque<Lookup>>);

/// One kept lookup.
#[derive(Debug)]
struct Lookup {
    batches: u64,
    name: String,
    test: MetaTest,
    found: BTreeSet<String>,
}

impl Lookups {
    /// The documents lookup (`name`, `test`) found, if it was made after
    /// the last of `batches`; the stale lookups are dropped.
    pub(super) fn find(
        &self,
        batches: u64,
        name: &str,
        test: &MetaTest,
    ) -> Option<BTreeSet<String>> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|lookup| lookup.batches == batches);
        let lookup = kept.iter().find(|l| l.name == name && l.test == *test)?;
        Some(lookup.found.clone())
    }

    /// Keeps what lookup (`name`, `test`), begun after `batches`, found.
    pub(super) fn keep(&self, batches: u64, name: &str, test: &MetaTest, found: &BTreeSet<String>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push_front(Lookup {
            batches,
            name: name.to_owned(),
            test: test.clone(),
            found: found.clone(),
        });
        kept.truncate(KEPT_LOOKUPS);
    }
}
