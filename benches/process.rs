//! What one CLI command costs as a whole process (start, open the store,
//! work, flush, exit) on a store holding the 648 Rust RFCs: the reads
//! `docs`, `stats`, a BM25 query and a NEAR query scoped to one document,
//! and the small writes `session add`
//! (one turn) and `ingest` of a one-line file. Each runs many times; the
//! medians and 90th percentiles are printed with each command's ratio to
//! `docs`, measured in the same run.
//!
//! `cargo bench --bench process` (`-- --quick` for fewer runs);
//! `EDUDB_BENCH_BIN=PATH` measures another build of the binary instead.

use std::path::Path;
use std::process::Command;
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
    edudb(&db, &["ingest", "--quiet", rfcs.to_str().unwrap()]);
    println!(
        "process: ingested the RFCs in {:.1} s; {runs} runs per command",
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

    let mut medians = Vec::new();
    for (name, args) in &commands {
        // One warm-up run, so the page cache holds the store for every
        // command alike.
        let warm = args(runs);
        edudb(&db, &warm.iter().map(String::as_str).collect::<Vec<_>>());
        let mut times: Vec<Duration> = (0..runs)
            .map(|i| {
                let args = args(i);
                edudb(&db, &args.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .collect();
        times.sort();
        medians.push((*name, percentile(&times, 0.5), percentile(&times, 0.9)));
    }
    let base = medians[0].1.as_secs_f64();
    println!("\nprocess: whole-process times, p50 and p90, and p50 ratio to docs (same run)");
    for (name, p50, p90) in medians {
        println!(
            "  {name:<20} {:>7.1} ms {:>7.1} ms {:>7.2}x",
            p50.as_secs_f64() * 1e3,
            p90.as_secs_f64() * 1e3,
            p50.as_secs_f64() / base
        );
    }
}
