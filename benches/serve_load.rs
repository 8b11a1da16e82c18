//! Load on a served store: BM25 queries with a 512-token budget (each an
//! RFC's name in words) on a store holding the 648 Rust RFCs, from 1, 4 and 16 concurrent clients, first
//! in-process (threads sharing one `Db`) and then through `edudb serve`
//! over loopback (each client a `serve::Client` of its own); then session
//! appends, one writer, the same two ways, and the bare round trip of
//! `GET /v1/health`. Prints queries per second and
//! p50/p99 latencies with each served figure's ratio to the in-process one
//! measured in the same run, and, per client count, the lowest served p50
//! that count allows at the in-process rate (Little's law).
//!
//! `cargo bench --bench serve_load` (`-- --quick` for fewer queries).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edudb::serve::{Api, Client, ServeOptions};
use edudb::{CancelToken, Db, IngestOptions, NoProgress, Params, Role, TurnInput};

/// Queries each configuration runs (all clients together): enough for a
/// p50 that moves by less than the difference measured (with 480 it moved
/// by ±25% between runs on 2 cores).
const QUERIES: usize = 2_400;
const QUICK_QUERIES: usize = 160;
/// Session appends each way.
const APPENDS: usize = 100;
const QUICK_APPENDS: usize = 40;

const STATEMENT: &str = "SELECT FROM * SEED BM25($q) BUDGET 512 TOKENS";

/// Latencies of one configuration and its wall time.
struct Load {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Load {
    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }
}

/// Runs `total` calls of `call(client, i)` spread over `clients` threads,
/// each with its own state from `connect`.
fn load<C>(
    clients: usize,
    total: usize,
    connect: impl Fn() -> C + Sync,
    call: impl Fn(&C, usize) + Sync,
) -> Load {
    let started = Instant::now();
    let latencies = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|worker| {
                let (connect, call) = (&connect, &call);
                scope.spawn(move || {
                    let state = connect();
                    (worker..total)
                        .step_by(clients)
                        .map(|i| {
                            let began = Instant::now();
                            call(&state, i);
                            began.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    Load {
        latencies,
        wall: started.elapsed(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn row(what: &str, local: &Load, served: &Load) {
    let (l50, s50) = (local.percentile(0.5), served.percentile(0.5));
    println!(
        "{what:<24} in-process {:>8.1}/s p50 {:>9} p99 {:>9} | served {:>8.1}/s p50 {:>9} p99 {:>9} | served/in-process p50 {:.2}x, throughput {:.2}x",
        local.per_second(),
        ms(l50),
        ms(local.percentile(0.99)),
        served.per_second(),
        ms(s50),
        ms(served.percentile(0.99)),
        s50.as_secs_f64() / l50.as_secs_f64(),
        served.per_second() / local.per_second(),
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (queries, appends) = if quick {
        (QUICK_QUERIES, QUICK_APPENDS)
    } else {
        (QUERIES, APPENDS)
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let rfcs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/rust_rfcs/text");
    let sources = edudb::ingest::sources::expand(&[rfcs], None).unwrap();
    let started = Instant::now();
    {
        let db = Db::create(&path).unwrap();
        db.ingest(
            &sources,
            IngestOptions::default(),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    }
    println!(
        "serve_load: ingested {} RFCs in {:.1} s; {queries} queries per configuration, {appends} appends each way; {} cores",
        sources.len(),
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    // What the clients ask, in turn: each RFC's name in words
    // (`0001-private-fields`: "private fields").
    let questions: Vec<String> = sources
        .iter()
        .map(|s| {
            s.id.trim_start_matches(|c: char| c.is_ascii_digit() || c == '-')
                .replace('-', " ")
        })
        .collect();
    let params = |i: usize| Params::new().text("q", questions[i % questions.len()].clone());
    let turn = |i: usize| {
        TurnInput::new(
            Role::User,
            format!("Turn {i}: we meet on day {i} to plan the trip."),
        )
    };

    let db = Arc::new(Db::open(&path).unwrap());
    let local: Vec<(usize, Load)> = [1, 4, 16]
        .into_iter()
        .map(|clients| {
            let query = |db: &Arc<Db>, i: usize| {
                db.query(STATEMENT, &params(i)).unwrap();
            };
            (clients, load(clients, queries, || Arc::clone(&db), query))
        })
        .collect();
    let local_appends = load(
        1,
        appends,
        || Arc::clone(&db),
        |db, i| {
            db.append_turns("local", &[turn(i)], &NoProgress, &CancelToken::new())
                .unwrap();
        },
    );
    drop(db);

    let stop = CancelToken::new();
    let (ready, bound) = std::sync::mpsc::channel();
    let server = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            let db = Db::open(&path).unwrap();
            edudb::serve::run(
                edudb::serve::Served::Store(Box::new(db)),
                &ServeOptions::default(),
                |b| ready.send(b.clone()).unwrap(),
                &stop,
            )
        })
    };
    let url = format!("http://{}", bound.recv().unwrap().address);
    let connect = || Client::connect(&url, None).unwrap();
    let served: Vec<Load> = local
        .iter()
        .map(|(clients, _)| {
            load(*clients, queries, connect, |client, i| {
                client.query(STATEMENT, &params(i), false).unwrap();
            })
        })
        .collect();
    let round_trip = load(1, queries, connect, |client, _| {
        client.health().unwrap();
    });
    let served_appends = load(1, appends, connect, |client, i| {
        client.append_turn("served", &turn(i)).unwrap();
    });
    stop.cancel();
    server.join().unwrap().unwrap();

    for ((clients, local), served) in local.iter().zip(&served) {
        row(&format!("query, {clients} client(s)"), local, served);
        // Little's law: with `clients` requests always in flight, a served
        // p50 near the mean needs `clients / p50` answers a second, and no
        // server answers faster than the store runs in-process.
        println!(
            "  {clients} in flight at the in-process rate: served p50 no lower than about {} (2x in-process p50: {})",
            ms(Duration::from_secs_f64(
                *clients as f64 / local.per_second()
            )),
            ms(local.percentile(0.5) * 2),
        );
    }
    row("session append, 1 writer", &local_appends, &served_appends);
    println!(
        "round trip (GET /v1/health, 1 client): p50 {} p99 {}",
        ms(round_trip.percentile(0.5)),
        ms(round_trip.percentile(0.99))
    );
    println!(
        "scaling, 16 clients over 1: in-process {:.2}x, served {:.2}x",
        local[2].1.per_second() / local[0].1.per_second(),
        served[2].per_second() / served[0].per_second(),
    );
}
