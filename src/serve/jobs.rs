//! Ingest jobs: `POST /v1/ingest` takes many documents at once and answers
//! at once with a job, which runs as a write (after the writes before it)
//! while `GET /v1/jobs/{job}` reports its progress and, once it ends, its
//! outcome; `DELETE /v1/jobs/{job}` cancels it (documents already written
//! stay, whole). A finished job is kept for [`KEPT_FINISHED`] later jobs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::api::{described, ingest_answer};
use crate::engine::write::IngestReport;
use crate::error::{Error, Result};
use crate::progress::{CancelToken, Progress};

/// Finished jobs kept for their status to be read.
pub const KEPT_FINISHED: usize = 64;

/// The server's jobs, by number.
#[derive(Default)]
pub struct Jobs {
    next: AtomicU64,
    table: Mutex<BTreeMap<u64, Arc<Job>>>,
}

impl Jobs {
    /// A new job over `sources` documents of `total` bytes, numbered after
    /// the last; the oldest finished jobs beyond [`KEPT_FINISHED`] are
    /// forgotten.
    pub fn add(&self, sources: usize, total: u64) -> Arc<Job> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Arc::new(Job {
            id,
            sources,
            cancel: CancelToken::new(),
            done: AtomicU64::new(0),
            total,
            processed: AtomicUsize::new(0),
            outcome: Mutex::new(None),
        });
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let finished: Vec<u64> = table
            .iter()
            .filter(|(_, job)| job.is_finished())
            .map(|(&id, _)| id)
            .collect();
        for old in &finished[..finished.len().saturating_sub(KEPT_FINISHED)] {
            table.remove(old);
        }
        table.insert(id, Arc::clone(&job));
        job
    }

    /// Job `id`, while it is kept.
    pub fn get(&self, id: u64) -> Option<Arc<Job>> {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.get(&id).cloned()
    }

    /// Asks every unfinished job to stop (the server is shutting down).
    pub fn cancel_all(&self) {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        for job in table.values() {
            job.cancel.cancel();
        }
    }
}

/// One ingest job; it is its own [`Progress`].
pub struct Job {
    id: u64,
    sources: usize,
    /// Cancels it.
    pub cancel: CancelToken,
    done: AtomicU64,
    /// Bytes in all, fixed when it is added: a job runs one ingest per
    /// format, each of which would `start` with its own total.
    total: u64,
    processed: AtomicUsize,
    /// Its outcome's fields, once it ended.
    outcome: Mutex<Option<Value>>,
}

impl Job {
    fn is_finished(&self) -> bool {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Records how the ingest ended: its report, or the error that stopped
    /// it (a cancellation included).
    pub fn finish(&self, ended: Result<IngestReport>) {
        let outcome = match ended {
            Ok(report) => {
                let mut outcome = ingest_answer(report);
                outcome["state"] = json!("done");
                outcome
            }
            Err(err) => {
                let state = if matches!(err, Error::Cancelled) {
                    "cancelled"
                } else {
                    "failed"
                };
                let mut outcome = json!({"state": state});
                if let Error::PartlyIngested {
                    stored, not_stored, ..
                } = &err
                {
                    outcome["stored"] = json!(stored);
                    outcome["not_stored"] = json!(not_stored);
                }
                outcome["error"] = described(err);
                outcome
            }
        };
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
    }

    /// `{job, state, sources, processed, done, total}` and, once it ended,
    /// `documents`, `failures` and `llm` (done) or `error` (failed,
    /// cancelled), with `stored` and `not_stored` when it failed part-way.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "job": self.id,
            "state": "running",
            "sources": self.sources,
            "processed": self.processed.load(Ordering::Relaxed),
            "done": self.done.load(Ordering::Relaxed),
            "total": self.total,
        });
        let outcome = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
        if let (Some(Value::Object(outcome)), Some(fields)) = (&*outcome, status.as_object_mut()) {
            fields.extend(outcome.clone());
        }
        status
    }
}

impl Progress for Job {
    fn advance(&self, units: u64, _item: &str) {
        self.done.fetch_add(units, Ordering::Relaxed);
        self.processed.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_job_is_kept_for_kept_finished_later_jobs_and_a_running_one_always() {
        let jobs = Jobs::default();
        let running = jobs.add(1, 10);
        let first = jobs.add(1, 10);
        first.finish(Ok(IngestReport::default()));
        for _ in 0..KEPT_FINISHED {
            jobs.add(1, 10).finish(Ok(IngestReport::default()));
        }
        // `first` has seen KEPT_FINISHED later jobs added, the last of
        // which dropped nothing yet; the next addition forgets it.
        assert!(jobs.get(first.id).is_some());
        jobs.add(1, 10);
        assert!(jobs.get(first.id).is_none());
        assert!(
            jobs.get(running.id).is_some(),
            "a running job is never forgotten"
        );
    }
}
