//! What every handler shares, and how their work runs on the store: reads
//! side by side on the read pool, writes one at a time behind a bounded
//! queue, each answered "busy" (or of unknown outcome, for a write) past
//! the request timeout; and a vacuum alone, closing and reopening the
//! store while every other request waits ([`ServedStore`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use serde_json::Value;
use tokio::sync::{OwnedRwLockReadGuard, RwLock, Semaphore};

use super::failure::{Answer, Failure};
use super::forwarding::CommandRunner;
use super::served::Served;
use super::{jobs, reads};
use crate::error::Result;

/// Why a server has no store: it closed it for a vacuum, and opening it
/// again failed.
const CLOSED: &str = "the store could not be opened again after a vacuum";

/// The served store behind a gate: work on it holds the gate shared for as
/// long as it runs; a vacuum holds it alone (no work running, later work
/// waiting its turn behind it) while it closes the store and opens it
/// again. Empty once a store could not be opened again.
#[derive(Clone)]
pub(super) struct ServedStore(Arc<RwLock<Option<Served>>>);

/// A share of [`ServedStore`]'s gate: the store stays open while it is held.
pub(super) struct Held(OwnedRwLockReadGuard<Option<Served>>);

impl Held {
    /// The store, or why there is none.
    pub(super) fn db(&self) -> std::result::Result<&Served, String> {
        self.0.as_ref().ok_or_else(|| CLOSED.to_owned())
    }
}

impl ServedStore {
    pub(super) fn new(db: Served) -> ServedStore {
        ServedStore(Arc::new(RwLock::new(Some(db))))
    }

    /// A share of the gate, once no vacuum holds it or waits for it.
    pub(super) async fn share(&self) -> Held {
        Held(Arc::clone(&self.0).read_owned().await)
    }

    /// Runs `work` on the store on a blocking thread, holding a share of
    /// the gate; what it gave, or why it gave nothing.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Served) -> T + Send + 'static,
    ) -> std::result::Result<T, String> {
        let held = self.share().await;
        joined(tokio::task::spawn_blocking(move || held.db().map(work))).await?
    }

    /// Runs `work` with the store taken out of the gate, once every running
    /// work has ended and none other can start: `work` closes it, and gives
    /// its answer and the store opened again (on error none, and the store
    /// stays empty).
    pub(super) async fn alone(
        &self,
        work: impl FnOnce(Served) -> (Result<Value>, Result<Served>) + Send + 'static,
    ) -> std::result::Result<Result<Value>, String> {
        let mut gate = Arc::clone(&self.0).write_owned().await;
        let task = tokio::task::spawn_blocking(move || {
            let db = gate.take().ok_or_else(|| CLOSED.to_owned())?;
            let (answer, reopened) = work(db);
            let db = reopened.map_err(|err| format!("{CLOSED}: {err}"))?;
            *gate = Some(db);
            Ok(answer)
        });
        joined(task).await?
    }
}

/// What every handler shares.
pub(super) struct Shared {
    pub(super) store: ServedStore,
    /// The store's directory.
    pub(super) path: PathBuf,
    pub(super) token: Option<String>,
    pub(super) commands: Option<Arc<dyn CommandRunner>>,
    pub(super) timeout: Duration,
    /// The largest request body taken (the health answer tells clients).
    pub(super) max_body_bytes: usize,
    /// One permit: the running write.
    pub(super) writer: Arc<Semaphore>,
    /// The write queue's places (the running write holds one too).
    pub(super) queue: Arc<Semaphore>,
    /// Ingest jobs.
    pub(super) jobs: jobs::Jobs,
    /// Where reads run.
    pub(super) reads: reads::ReadPool,
    /// Set when the store failed in its file system and its handle was
    /// abandoned ([`Error::Abandoned`](crate::Error::Abandoned)), or could
    /// not be opened again after a vacuum: every later request would fail,
    /// so the server stops, with this as its error.
    pub(super) abandoned: std::sync::OnceLock<String>,
}

impl Shared {
    /// The shared state of a server of `db` that answers requests within
    /// `timeout`, takes bodies of up to `max_body_bytes` and queues up to
    /// `write_queue` writes behind the running one; no token and no command
    /// runner (the server sets them).
    pub(super) fn new(
        db: Served,
        timeout: Duration,
        max_body_bytes: usize,
        write_queue: usize,
    ) -> Result<Shared> {
        Ok(Shared {
            path: db.path().to_owned(),
            store: ServedStore::new(db),
            token: None,
            commands: None,
            timeout,
            max_body_bytes,
            writer: Arc::new(Semaphore::new(1)),
            queue: Arc::new(Semaphore::new(write_queue + 1)),
            jobs: jobs::Jobs::default(),
            reads: reads::ReadPool::new()?,
            abandoned: std::sync::OnceLock::new(),
        })
    }

    /// Notes an error from `db`: an abandoned store stops the server.
    fn note<T>(&self, db: &Served, result: &Result<T>) {
        if let Err(err) = result
            && db.is_abandoned()
        {
            let _ = self.abandoned.set(err.to_string());
        }
    }
}

/// Runs `work` on the served store on a blocking thread; an error from a
/// store that abandoned its handle stops the server.
pub(super) async fn on_store<T: Send + 'static>(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Served) -> Result<T> + Send + 'static,
) -> std::result::Result<Result<T>, String> {
    let noted = Arc::clone(shared);
    shared
        .store
        .run(move |db| {
            let result = work(db);
            noted.note(db, &result);
            result
        })
        .await
}

/// Runs a read on the read pool, concurrently with other requests; one
/// past the request timeout is answered "busy" (repeating a read is
/// harmless) while it finishes in the background.
pub(super) async fn read(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Served) -> Result<Value> + Send + 'static,
) -> Answer {
    let noted = Arc::clone(shared);
    let task = async move {
        let held = noted.store.share().await;
        let pool = Arc::clone(&noted);
        let read = move || {
            let db = held.db()?;
            let result = work(db);
            noted.note(db, &result);
            Ok(result)
        };
        pool.reads.run(read).await.and_then(|r| r)
    };
    answer_read(shared, task).await
}

/// Runs a read that waits on a model server or reads the whole store as
/// [`read`] does, but on a blocking thread, so it holds no thread of the
/// read pool for long.
pub(super) async fn read_waiting(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Served) -> Result<Value> + Send + 'static,
) -> Answer {
    answer_read(shared, on_store(shared, work)).await
}

/// The answer of a running read, or "busy" once it is past the timeout.
async fn answer_read(
    shared: &Shared,
    task: impl Future<Output = std::result::Result<Result<Value>, String>>,
) -> Answer {
    let late = || {
        Failure::busy(format!(
            "the request ran past {} s; it finishes in the background",
            shared.timeout.as_secs_f64()
        ))
    };
    within(shared, task, late).await
}

/// Runs a write after the ones before it, or refuses it as busy (nothing
/// done) when the queue is full or the earlier writes outlast the request
/// timeout. The write keeps its place in the queue until it has run, even
/// past its answer. A write past the request timeout is not "busy": it goes
/// on, so its outcome is unknown to the caller, and repeating it could
/// apply it twice.
pub(super) async fn write(
    shared: &Arc<Shared>,
    work: impl FnOnce(&Served) -> Result<Value> + Send + 'static,
) -> Answer {
    let Ok(place) = Arc::clone(&shared.queue).try_acquire_owned() else {
        return Err(Failure::busy("the write queue is full; retry"));
    };
    let waited = tokio::time::timeout(shared.timeout, Arc::clone(&shared.writer).acquire_owned());
    let Ok(Ok(turn)) = waited.await else {
        return Err(Failure::busy("timed out waiting for earlier writes; retry"));
    };
    // Spawned, so that it runs to its end even once its answer is late.
    let task = tokio::spawn({
        let shared = Arc::clone(shared);
        async move {
            on_store(&shared, move |db| {
                let _held = (place, turn);
                work(db)
            })
            .await
        }
    });
    let late = || {
        Failure::new(
            StatusCode::GATEWAY_TIMEOUT,
            "internal",
            format!(
                "the write ran past {} s and goes on in the background: its outcome is unknown until it ends, so read before repeating it",
                shared.timeout.as_secs_f64()
            ),
        )
    };
    within(shared, async { joined(task).await? }, late).await
}

/// What a spawned task gave, or why it gave nothing.
pub(super) async fn joined<T>(task: tokio::task::JoinHandle<T>) -> std::result::Result<T, String> {
    task.await.map_err(|e| e.to_string())
}

/// The answer of `task`, or `late()` once the request timeout has passed.
pub(super) async fn within(
    shared: &Shared,
    task: impl Future<Output = std::result::Result<Result<Value>, String>>,
    late: impl FnOnce() -> Failure,
) -> Answer {
    match tokio::time::timeout(shared.timeout, task).await {
        Err(_) => Err(late()),
        Ok(Err(why)) => Err(Failure::internal(format!("the request failed: {why}"))),
        Ok(Ok(result)) => result.map(Json).map_err(Failure::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Shared state over a new store, with `write_queue` places and
    /// `timeout` per request.
    fn shared(dir: &std::path::Path, write_queue: usize, timeout: Duration) -> Arc<Shared> {
        let db = crate::Db::create(dir.join("db")).unwrap();
        Arc::new(Shared::new(Served::Store(Box::new(db)), timeout, 16 << 20, write_queue).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_waits_while_the_store_is_held_alone_and_runs_on_the_store_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 4, Duration::from_secs(30));
        let (started, has_started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let alone = {
            let store = shared.store.clone();
            tokio::spawn(async move {
                store
                    .alone(move |db| {
                        started.send(()).unwrap();
                        released.recv().unwrap();
                        let path = db.path().to_owned();
                        drop(db);
                        (
                            Ok(json!("closed and opened")),
                            crate::Db::open(&path).map(|db| Served::Store(Box::new(db))),
                        )
                    })
                    .await
            })
        };
        tokio::task::spawn_blocking(move || has_started.recv().unwrap())
            .await
            .unwrap();
        let reading = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                read(&shared, |db| {
                    Ok(json!(
                        db.api().documents(None)?.as_array().map_or(0, Vec::len)
                    ))
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !reading.is_finished(),
            "a read waits while the store is held alone"
        );
        release.send(()).unwrap();
        let answer = alone.await.unwrap().unwrap().unwrap();
        assert_eq!(answer, json!("closed and opened"));
        assert_eq!(reading.await.unwrap().unwrap().0, json!(0));
        // A store that cannot be opened again leaves none: later work is
        // refused with why.
        let failed = shared
            .store
            .alone(|db| {
                drop(db);
                (Ok(json!("closed")), Err(crate::Error::Usage("gone".into())))
            })
            .await
            .unwrap_err();
        assert!(
            failed.contains(CLOSED) && failed.contains("gone"),
            "{failed}"
        );
        let refused = read(&shared, |db| {
            Ok(json!(
                db.api().documents(None)?.as_array().map_or(0, Vec::len)
            ))
        })
        .await
        .unwrap_err();
        assert!(refused.message.contains(CLOSED), "{}", refused.message);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_beyond_the_queue_is_busy_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 0, Duration::from_secs(30));
        let (started, has_started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let first = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                write(&shared, move |_| {
                    started.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(json!("first"))
                })
                .await
            })
        };
        tokio::task::spawn_blocking(move || has_started.recv().unwrap())
            .await
            .unwrap();
        let refused = write(&shared, |_| Ok(json!("second"))).await.unwrap_err();
        assert_eq!(
            (refused.status, refused.class),
            (StatusCode::SERVICE_UNAVAILABLE, "busy")
        );
        // Reads do not wait for the running write.
        let read = read(&shared, |db| {
            Ok(json!(
                db.api().documents(None)?.as_array().map_or(0, Vec::len)
            ))
        })
        .await
        .unwrap();
        assert_eq!(read.0, json!(0));
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap().0, json!("first"));
        // With the queue free again, the next write runs.
        assert_eq!(
            write(&shared, |_| Ok(json!("third"))).await.unwrap().0,
            json!("third")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_past_its_timeout_is_of_unknown_outcome_and_keeps_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 0, Duration::from_millis(50));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let late = write(&shared, move |_| {
            released.recv().unwrap();
            Ok(json!("late"))
        })
        .await
        .unwrap_err();
        assert_eq!(
            (late.status, late.class),
            (StatusCode::GATEWAY_TIMEOUT, "internal")
        );
        assert!(
            late.message.contains("outcome is unknown"),
            "{}",
            late.message
        );
        // It still runs, holding its place: the queue (no waiting places) is
        // full.
        let refused = write(&shared, |_| Ok(json!("next"))).await.unwrap_err();
        assert_eq!(refused.class, "busy");
        release.send(()).unwrap();
        // Once it has run, the next write goes through.
        let mut tries = 0;
        loop {
            match write(&shared, |_| Ok(json!("next"))).await {
                Ok(answer) => break assert_eq!(answer.0, json!("next")),
                Err(failure) if failure.class == "busy" && tries < 500 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(failure) => panic!("{}", failure.message),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_past_its_timeout_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path(), 4, Duration::from_millis(50));
        let (release, released) = std::sync::mpsc::channel::<()>();
        let late = read(&shared, move |_| {
            released.recv().unwrap();
            Ok(json!("late"))
        })
        .await
        .unwrap_err();
        assert_eq!(late.class, "busy");
        assert!(late.message.contains("ran past"), "{}", late.message);
        release.send(()).unwrap();
    }
}
