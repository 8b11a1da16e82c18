//! The server's read pool: reads of the store are CPU work, so they run on
//! a pool of compute threads (rayon) rather than on tokio's blocking
//! threads, and a read's own parallel steps (the seed's two rankings, say)
//! run on the same pool without handing the work to another thread and
//! waiting for it. Measured on 2 cores: a served query's p50 fell from
//! 0.31–0.33 ms to 0.23–0.26 ms (docs/benchmarks.md). Writes, and reads
//! that wait on something other than the CPU for long (`ask`, `check`),
//! stay on blocking threads. A read that loads the vector graph holds its
//! lock while the graph's inserts run on a pool of their own
//! ([`crate::storage::vectors`]), so no read queued here can be run inside
//! it and wait for that lock.
//!
//! The pool counts the reads given to it, so the server can wait for every
//! one to end before the store closes ([`ReadPool::wait_idle`]). A read
//! whose caller stopped waiting (answered "busy") before it started is
//! skipped.

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::error::{Error, Result, catch_quietly, panic_message};

/// Compute threads per core. More than one, so a read waiting on a model
/// server (an OpenAI-compatible embedder) or on the disk leaves a thread
/// to run the next one.
const THREADS_PER_CORE: usize = 2;

/// A pool of threads running store reads.
pub(super) struct ReadPool {
    pool: rayon::ThreadPool,
    running: Arc<Running>,
}

/// Reads given to the pool and not yet ended.
#[derive(Default)]
struct Running {
    count: Mutex<usize>,
    ended: Condvar,
}

/// One read's place in [`Running`], given back when it is dropped.
struct Place(Arc<Running>);

impl Place {
    fn take(running: &Arc<Running>) -> Place {
        *running.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Place(Arc::clone(running))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.ended.notify_all();
    }
}

impl ReadPool {
    /// A pool of [`THREADS_PER_CORE`] threads per core.
    pub(super) fn new() -> Result<ReadPool> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(THREADS_PER_CORE * cores)
            .thread_name(|i| format!("edudb-read-{i}"))
            .build()
            .map_err(|e| Error::Serve(format!("starting the read pool: {e}")))?;
        Ok(ReadPool {
            pool,
            running: Arc::default(),
        })
    }

    /// Runs `work` on the pool. The future gives its result, or, when it
    /// panicked, the panic's message (the pool goes on). Dropping the
    /// future before `work` starts skips it.
    pub(super) fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = std::result::Result<T, String>> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let place = Place::take(&self.running);
        self.pool.spawn(move || {
            // Dropped last: what `work` held is gone before the read ends.
            let _place = place;
            if answer.is_closed() {
                drop(work);
                return;
            }
            let outcome = catch_quietly(work).map_err(|panic| {
                let message = format!("it panicked: {}", panic_message(panic.as_ref()));
                tracing::error!("a read {message}");
                message
            });
            let _ = answer.send(outcome);
        });
        async move {
            answered
                .await
                .unwrap_or_else(|_| Err("the read pool stopped".to_owned()))
        }
    }

    /// Blocks until every read given to the pool has ended.
    pub(super) fn wait_idle(&self) {
        let mut count = self
            .running
            .count
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        while *count > 0 {
            count = self
                .running
                .ended
                .wait(count)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_read_gives_its_result_and_a_panic_its_message() {
        let pool = ReadPool::new().unwrap();
        assert_eq!(pool.run(|| 6 * 7).await, Ok(42));
        let failed = pool.run(|| -> u32 { panic!("a broken read") }).await;
        assert_eq!(failed, Err("it panicked: a broken read".to_owned()));
        // The pool still runs reads after a panic.
        assert_eq!(pool.run(|| "after").await, Ok("after"));
    }

    #[tokio::test]
    async fn a_read_whose_caller_left_before_it_started_is_skipped() {
        let pool = ReadPool::new().unwrap();
        let threads =
            THREADS_PER_CORE * std::thread::available_parallelism().map_or(1, |n| n.get());
        // Every thread busy until released.
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        let (started, has_started) = mpsc::channel();
        let busy: Vec<_> = (0..threads)
            .map(|_| {
                let (released, started) = (Arc::clone(&released), started.clone());
                pool.run(move || {
                    started.send(()).unwrap();
                    released.lock().unwrap().recv().unwrap();
                })
            })
            .collect();
        for _ in 0..threads {
            has_started.recv().unwrap();
        }
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let left = {
            let ran = Arc::clone(&ran);
            pool.run(move || ran.store(true, std::sync::atomic::Ordering::SeqCst))
        };
        drop(left);
        for _ in 0..threads {
            release.send(()).unwrap();
        }
        for read in busy {
            read.await.unwrap();
        }
        pool.wait_idle();
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test]
    async fn waiting_for_idle_waits_for_a_running_read_and_what_it_holds() {
        let pool = Arc::new(ReadPool::new().unwrap());
        let held = Arc::new(());
        let (started, has_started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let read = {
            let held = Arc::clone(&held);
            pool.run(move || {
                let _held = held;
                started.send(()).unwrap();
                released.recv().unwrap();
            })
        };
        has_started.recv().unwrap();
        let (idle, is_idle) = mpsc::channel();
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                pool.wait_idle();
                idle.send(()).unwrap();
            })
        };
        assert!(
            is_idle.recv_timeout(Duration::from_millis(100)).is_err(),
            "idle while a read runs"
        );
        release.send(()).unwrap();
        is_idle.recv().unwrap();
        // What the read held was dropped before it counted as ended.
        assert_eq!(Arc::strong_count(&held), 1);
        waiter.join().unwrap();
        assert_eq!(read.await, Ok(()));
        // With nothing running, waiting returns at once.
        pool.wait_idle();
    }
}
