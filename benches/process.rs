//! What one CLI command costs as a whole process (start, open the store,
//! work, flush, exit) on a store holding the 648 Rust RFCs: the reads
//! `docs`, `stats`, a BM25 query, a NEAR query scoped to one document and
//! one over the whole store (its graph built at ingest), and the small
//! writes `session add` (one turn) and `ingest` of a one-line file. Then
//! the same commands again while `edudb serve` holds the store, so that
//! they go through it. Each runs many times; the medians and 90th
//! percentiles are printed with each command's ratio to `docs` run
//! directly, measured in the same run.
//!
//! `cargo bench --bench process` (`-- --quick` for fewer runs);
//! `EDUDB_BENCH_BIN=PATH` measures another build of the binary instead.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 40;
const QUICK_RUNS: usize = 15;

/// Runs the CLI with `args` on the store at `db`; panics unless it succeeds.
fn edudb(db: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let binary =
        std::env::var_os("EDUDB_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_edudb").into());
    let out = Command::new(binary)
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "edudb {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// A command's name and its arguments for the `i`th run.
type Measured<'a> = (&'a str, Box<dyn Fn(usize) -> Vec<String>>);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { QUICK_RUNS } else { RUNS };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let rfcs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/rust_rfcs/text");
    let started = Instant::now();
    edudb(
        &db,
        &["ingest", "--quiet", "--vectors", rfcs.to_str().unwrap()],
    );
    println!(
        "process: ingested the RFCs and built the vector graph in {:.1} s; {runs} runs per command",
        started.elapsed().as_secs_f64()
    );
    let small = dir.path().join("small.md");
    std::fs::write(&small, "# Note\n\nA short note to ingest.\n").unwrap();
    let small = small.to_str().unwrap().to_owned();

    let mut commands: Vec<Measured> = vec![
        ("docs", Box::new(|_| vec!["docs".into()])),
        ("stats", Box::new(|_| vec!["stats".into()])),
        (
            "query_bm25",
            Box::new(|_| {
                vec![
                    "query".into(),
                    "SELECT FROM * SEED BM25('borrow checker lifetimes') BUDGET 512 TOKENS".into(),
                ]
            }),
        ),
        (
            "query_near_one_doc",
            Box::new(|_| {
                vec![
                    "query".into(),
                    "SELECT FROM doc('0002-rfc-process') SEED NEAR('how are rfcs accepted') LIMIT 3"
                        .into(),
                ]
            }),
        ),
        (
            "query_near_all",
            Box::new(|_| {
                vec![
                    "query".into(),
                    "SELECT FROM * SEED NEAR('lifetime elision in functions') LIMIT 3".into(),
                ]
            }),
        ),
        (
            "session_add",
            Box::new(|i| {
                vec![
                    "session".into(),
                    "add".into(),
                    "bench".into(),
                    "--role".into(),
                    "user".into(),
                    format!("turn {i}: what do the RFCs say about trait objects?"),
                ]
            }),
        ),
    ];
    commands.push((
        "ingest_small_file",
        Box::new(move |i| {
            vec![
                "ingest".into(),
                "--quiet".into(),
                "--id".into(),
                format!("note-{i}"),
                small.clone(),
            ]
        }),
    ));

    let direct = measure(&db, &commands, runs);
    let base = direct[0].1.as_secs_f64();
    report("run directly", &direct, base);
    let server = serve(&db);
    let served = measure(&db, &commands, runs);
    report("through a running `edudb serve`", &served, base);
    stop(server);
}

/// Each command's p50 and p90 over `runs` runs, after one warm-up run (so
/// the page cache holds the store for every command alike).
fn measure(db: &Path, commands: &[Measured], runs: usize) -> Vec<(String, Duration, Duration)> {
    commands
        .iter()
        .map(|(name, args)| {
            let warm = args(runs);
            edudb(db, &warm.iter().map(String::as_str).collect::<Vec<_>>());
            let mut times: Vec<Duration> = (0..runs)
                .map(|i| {
                    let args = args(i);
                    edudb(db, &args.iter().map(String::as_str).collect::<Vec<_>>())
                })
                .collect();
            times.sort();
            (
                (*name).to_owned(),
                percentile(&times, 0.5),
                percentile(&times, 0.9),
            )
        })
        .collect()
}

fn report(how: &str, measured: &[(String, Duration, Duration)], base: f64) {
    println!(
        "\nprocess, {how}: whole-process times, p50 and p90, and p50 ratio to docs run directly"
    );
    for (name, p50, p90) in measured {
        println!(
            "  {name:<20} {:>7.1} ms {:>7.1} ms {:>7.2}x",
            p50.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3,
            p50.as_secs_f64() / base
        );
    }
}

/// Starts `edudb serve` on the store and waits until it listens.
fn serve(db: &Path) -> std::process::Child {
    let binary =
        std::env::var_os("EDUDB_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_edudb").into());
    let mut child = Command::new(binary)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("serving"), "{first}");
    child
}

/// Stops the server with SIGTERM and waits for it.
fn stop(mut server: std::process::Child) {
    Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    server.wait().unwrap();
}
