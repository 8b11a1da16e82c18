//! SIGKILL of `edudb serve` mid-write: no acknowledged change lost, the
//! dead server's socket replaced.

use edudb::Db;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::*;
use crate::support;

/// Rounds of the server test: each kills `edudb serve` once.
const SERVER_ROUNDS: usize = 8;

/// How far a served ingest has got, as its client reports it.
#[derive(Default)]
struct IngestProgress {
    total: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
}

impl edudb::Progress for IngestProgress {
    fn start(&self, _what: &str, total: u64) {
        self.total.store(total, std::sync::atomic::Ordering::SeqCst);
    }

    fn advance(&self, units: u64, _item: &str) {
        self.done
            .fetch_add(units, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `edudb serve` is killed with SIGKILL while one client ingests RFCs as a
/// job and another appends turns one by one: three rounds in four once
/// the job has done a random part of its work, the fourth after it ended.
/// Each time, the store must open and pass `check` with every document
/// whole, the session must hold every turn the server acknowledged (and
/// at most the one in flight), and the dead server's socket must be left
/// unanswered, to be replaced by the next server.
#[test]
fn sigkill_of_a_server_mid_write_loses_no_acknowledged_change() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use edudb::serve::{self, Api, Client};
    use edudb::{CancelToken, IngestOptions, Role, TurnInput};

    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let texts = turn_texts();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    // The store exists before the first server, which does not create one.
    drop(Db::create(&db).unwrap());
    let files = rfc_files();
    let (mut turns, mut mid_ingest) = (0, 0);
    for round in 0..SERVER_ROUNDS {
        let (mut server, _, socket) = support::spawn_server(&db);
        assert_eq!(
            serve::live_socket(&db).as_deref(),
            Some(socket.as_path()),
            "round {round}: the new server answers on the store's socket"
        );
        let target = socket.to_string_lossy().into_owned();
        let picked: Vec<PathBuf> = files.choose_multiple(&mut rng, 40).cloned().collect();
        let sources = edudb::ingest::sources::expand(&picked, None).unwrap();
        let (ingester, appender) = (
            Client::connect(&target, None).unwrap(),
            Client::connect(&target, None).unwrap(),
        );
        let progress = IngestProgress::default();
        let acknowledged = AtomicUsize::new(0);
        let kill_at = if round % 4 == 3 {
            None
        } else {
            Some(rng.random_range(0.0..0.9))
        };
        let ingest_finished = std::thread::scope(|scope| {
            let ingest = scope.spawn(|| {
                let options = IngestOptions::default();
                ingester
                    .ingest(&sources, options, &progress, &CancelToken::new())
                    .is_ok()
            });
            scope.spawn(|| {
                for n in turns.. {
                    let turn = TurnInput::new(Role::User, texts[n % texts.len()].clone());
                    if appender.append_turn("s", &turn).is_err() {
                        break;
                    }
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                }
            });
            let reached = |fraction: f64| {
                let total = progress.total.load(Ordering::SeqCst);
                total > 0 && progress.done.load(Ordering::SeqCst) as f64 >= fraction * total as f64
            };
            while !ingest.is_finished() && !kill_at.is_some_and(reached) {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Appends go on alone for a moment.
            std::thread::sleep(Duration::from_millis(rng.random_range(0..50)));
            server.kill().unwrap();
            server.wait().unwrap();
            ingest.join().unwrap()
        });
        if !ingest_finished {
            mid_ingest += 1;
        }
        assert!(
            ingest_finished || kill_at.is_some(),
            "round {round}: the ingest failed without a kill"
        );
        assert!(
            socket.exists() && serve::live_socket(&db).is_none(),
            "round {round}: a killed server's socket stays, unanswered"
        );
        let documents = verify(&db, &mut rng);
        if ingest_finished {
            let stored = open(&db).and_then(|db| db.documents()).unwrap();
            for source in &sources {
                assert!(
                    stored.iter().any(|meta| meta.id == source.id),
                    "round {round}: {} was ingested, then lost",
                    source.id
                );
            }
        }
        let acknowledged = turns + acknowledged.load(Ordering::SeqCst);
        turns = verify_session(&db, &texts);
        assert!(
            turns == acknowledged || turns == acknowledged + 1,
            "round {round}: {turns} turns stored, {acknowledged} acknowledged"
        );
        eprintln!(
            "server round {round} (seed {seed}): killed {}, {documents} documents, {turns} turns",
            if ingest_finished {
                "after the ingest"
            } else {
                "mid-ingest"
            }
        );
    }
    assert!(
        mid_ingest >= SERVER_ROUNDS / 2,
        "only {mid_ingest} servers were killed mid-ingest"
    );
    assert!(turns > 0, "no turn was ever acknowledged");
}
