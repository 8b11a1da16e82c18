//! The record of documents a damaged data log lost: kept until each is
//! stored again or its loss acknowledged.

use super::handle::{Batch, Store};
use super::records::LOST_KEY;
use crate::error::{Error, Result};

/// Documents a damaged change log lost: sled recovers its log only up to
/// the first damage, dropping every change after it, which the full-text
/// index (committed after the store) shows by having applied more.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loss {
    /// The change the store recovered to.
    pub store_change: u64,
    /// The change the full-text index had applied: the store had reached it.
    pub index_change: u64,
    /// When the loss was found, in seconds since the Unix epoch.
    pub found_at: i64,
    /// The documents the index held that the store no longer has
    /// (session turns left out: they go with their session).
    pub ids: Vec<String>,
    /// The sessions whose turns the index held and whose dialogue the
    /// store no longer has.
    #[serde(default)]
    pub sessions: Vec<String>,
}

/// Takes `ids` and `sessions` off `losses`, dropping losses left empty;
/// false when none of them was on it.
pub(super) fn forget_in(losses: &mut Vec<Loss>, ids: &[&str], sessions: &[&str]) -> bool {
    let listed = |losses: &Vec<Loss>| -> usize {
        losses.iter().map(|l| l.ids.len() + l.sessions.len()).sum()
    };
    let before = listed(losses);
    for loss in losses.iter_mut() {
        loss.ids.retain(|id| !ids.contains(&id.as_str()));
        loss.sessions.retain(|id| !sessions.contains(&id.as_str()));
    }
    losses.retain(|loss| !loss.ids.is_empty() || !loss.sessions.is_empty());
    listed(losses) != before
}

/// Writes `losses` (none: the record removed) to `batch`.
pub(super) fn put_losses(batch: &mut Batch<'_>, losses: &[Loss]) -> Result<()> {
    if losses.is_empty() {
        batch.remove(LOST_KEY);
        return Ok(());
    }
    let json = serde_json::to_vec(losses).map_err(|e| Error::Storage(e.to_string()))?;
    batch.insert(LOST_KEY, &json);
    Ok(())
}

impl Store {
    /// Every loss recorded ([`Store::record_loss`]), oldest first.
    pub fn losses(&self) -> Result<Vec<Loss>> {
        let Some(json) = self.value(LOST_KEY)? else {
            return Ok(Vec::new());
        };
        serde_json::from_slice(&json).map_err(|e| Error::Corrupt {
            key: "the record of lost documents".into(),
            message: e.to_string(),
        })
    }

    /// Records (durably) that a damaged change log lost `loss`'s
    /// documents and sessions (those recorded already are not repeated),
    /// so that every later check names them until each is stored again or
    /// removed ([`Store::forget_lost`]).
    pub fn record_loss(&self, mut loss: Loss) -> Result<()> {
        let mut losses = self.losses()?;
        for earlier in &losses {
            loss.ids.retain(|id| !earlier.ids.contains(id));
            loss.sessions.retain(|id| !earlier.sessions.contains(id));
        }
        if loss.ids.is_empty() && loss.sessions.is_empty() {
            return Ok(());
        }
        losses.push(loss);
        let mut batch = Batch::default();
        put_losses(&mut batch, &losses)?;
        self.apply(batch)?;
        self.flush()
    }

    /// Takes document `id` (or, with `session`, session `id`) off the
    /// record of losses, its loss acknowledged; false when it was not on
    /// it, or the record cannot be read (a check names that).
    pub fn forget_lost(&self, id: &str, session: bool) -> Result<bool> {
        let Ok(mut losses) = self.losses() else {
            return Ok(false);
        };
        let (ids, sessions) = if session {
            (&[][..], &[id][..])
        } else {
            (&[id][..], &[][..])
        };
        if !forget_in(&mut losses, ids, sessions) {
            return Ok(false);
        }
        let mut batch = Batch::reclaiming();
        put_losses(&mut batch, &losses)?;
        self.apply(batch)?;
        self.flush()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::test_support::*;

    #[test]
    fn losses_are_recorded_durably_and_forgotten_one_document_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let loss = |ids: &[&str], sessions: &[&str], at: i64| Loss {
            store_change: 3,
            index_change: 5,
            found_at: at,
            ids: ids.iter().map(|id| id.to_string()).collect(),
            sessions: sessions.iter().map(|id| id.to_string()).collect(),
        };
        {
            let store = Store::open(dir.path()).unwrap();
            assert_eq!(store.losses().unwrap(), []);
            store.record_loss(loss(&["a", "b"], &["s"], 1)).unwrap();
            // Found again (a rebuild that did not finish): not repeated.
            store.record_loss(loss(&["b", "c"], &["s"], 2)).unwrap();
            store.record_loss(loss(&["c"], &[], 3)).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.losses().unwrap(),
            [loss(&["a", "b"], &["s"], 1), loss(&["c"], &[], 2)]
        );
        assert!(store.forget_lost("c", false).unwrap());
        assert!(!store.forget_lost("c", false).unwrap(), "forgotten once");
        assert!(!store.forget_lost("z", false).unwrap());
        assert!(!store.forget_lost("a", true).unwrap(), "a is no session");
        assert_eq!(store.losses().unwrap(), [loss(&["a", "b"], &["s"], 1)]);
        // Storing a document, or a session's turn, forgets its loss in the
        // same batch.
        put(&store, &doc("a", "Back again."));
        let t0 = turn("s", 0);
        store
            .put_turns(&[written(&t0)], &dialogue("s", &t0))
            .unwrap();
        assert_eq!(store.losses().unwrap(), [loss(&["b"], &[], 1)]);
        assert!(store.forget_lost("b", false).unwrap());
        assert_eq!(store.losses().unwrap(), []);
        assert_eq!(store.value(LOST_KEY).unwrap(), None);
        store.put_raw(LOST_KEY, b"not json".as_slice()).unwrap();
        assert!(matches!(store.losses(), Err(Error::Corrupt { .. })));
        assert!(
            !store.forget_lost("a", false).unwrap(),
            "unreadable: not on it"
        );
    }
}
