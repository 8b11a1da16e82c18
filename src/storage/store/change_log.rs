//! The change log: every change to a document gets a sequence number,
//! which derived indexes replay to catch up, and which is trimmed once
//! they have.

use super::handle::{Batch, Store};
use super::losses::{forget_in, put_losses};
use super::records::{SEQ_KEY, TRIMMED_KEY, log_key, read_u64};
use crate::error::Result;

impl Store {
    /// The sequence number of the latest change (0 for a new store).
    pub fn last_seq(&self) -> Result<u64> {
        read_u64(self.value(SEQ_KEY)?.as_deref(), "seq")
    }

    /// The highest sequence number already dropped from the change log.
    pub fn trimmed_seq(&self) -> Result<u64> {
        read_u64(self.value(TRIMMED_KEY)?.as_deref(), "trimmed")
    }

    /// Appends a change-log entry for each of `ids`, numbered after the last
    /// change, to `batch` and applies it atomically; returns the last
    /// sequence number. The caller holds the only writer.
    pub(super) fn apply_logged(&self, mut batch: Batch<'_>, ids: &[&str]) -> Result<u64> {
        let mut seq = self.last_seq()?;
        for id in ids {
            seq += 1;
            batch.insert(&log_key(seq), id.as_bytes());
        }
        batch.insert(SEQ_KEY, &seq.to_be_bytes());
        // Documents (and sessions, through their turns) written or removed
        // are no longer lost: their losses are forgotten with the change.
        // An unreadable record is left for the check to name.
        if let Ok(mut losses) = self.losses() {
            let sessions: Vec<&str> = (ids.iter())
                .filter_map(|id| crate::model::ids::parse_turn_id(id).map(|(session, _)| session))
                .collect();
            if forget_in(&mut losses, ids, &sessions) {
                put_losses(&mut batch, &losses)?;
            }
        }
        self.apply(batch)?;
        Ok(seq)
    }

    /// Ids changed after `seq`, with the latest sequence number of each, in log order.
    pub fn changes_after(&self, seq: u64) -> Result<Vec<(u64, String)>> {
        let start = log_key(seq.saturating_add(1));
        let end = log_key(u64::MAX);
        self.scan_between(&start, &end)?
            .map(|entry| {
                let (key, value) = entry?;
                let seq = u64::from_be_bytes(key[1..9].try_into().unwrap_or_default());
                Ok((seq, String::from_utf8_lossy(&value).into_owned()))
            })
            .collect()
    }

    /// Drops change-log entries up to and including `seq`, once every
    /// derived index has applied them.
    pub fn trim_log(&self, seq: u64) -> Result<()> {
        let mut batch = Batch::reclaiming();
        for entry in self.scan_between(&log_key(0), &log_key(seq))? {
            let (key, _) = entry?;
            batch.remove(&key);
        }
        batch.insert(TRIMMED_KEY, &seq.max(self.trimmed_seq()?).to_be_bytes());
        self.apply(batch)
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::store::test_support::*;

    #[test]
    fn change_log_replays_and_trims() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Alpha text."));
        put(&store, &doc("b", "Beta text."));
        store.remove("a").unwrap();
        assert_eq!(store.last_seq().unwrap(), 3);
        assert_eq!(
            store.changes_after(1).unwrap(),
            [(2, "b".to_owned()), (3, "a".to_owned())]
        );
        store.trim_log(2).unwrap();
        assert_eq!(store.trimmed_seq().unwrap(), 2);
        assert_eq!(store.changes_after(0).unwrap(), [(3, "a".to_owned())]);
    }
}
