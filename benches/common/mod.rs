//! Shared by the benchmark binaries: where the evaluation data lives, and the
//! ratio report printed after criterion has measured every function of a
//! group in the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use criterion::Criterion;

/// `../shared/data` beside the repository root.
pub fn shared_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
}

/// Passages per Markdown document made from a passage corpus.
const PASSAGES_PER_DOCUMENT: usize = 50;

/// The 2WikiMultihopQA passages as Markdown documents.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn wiki2_documents() -> Vec<edudb::Source> {
    passage_documents("wiki2/hipporag_2wikimultihopqa_corpus.json", "wiki2")
}

/// A HippoRAG passage corpus (a JSON list of `{title, text}`) under
/// `../shared/data/<corpus>` as Markdown documents of
/// [`PASSAGES_PER_DOCUMENT`] passages, each under a heading with its title,
/// with ids `<prefix>/<n>`.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn passage_documents(corpus: &str, prefix: &str) -> Vec<edudb::Source> {
    let path = shared_data().join(corpus);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} in ../shared/data: {e}", path.display()));
    let passages: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    passages
        .chunks(PASSAGES_PER_DOCUMENT)
        .enumerate()
        .map(|(i, chunk)| {
            let mut markdown = format!("# {prefix} passages {i}\n\n");
            for p in chunk {
                markdown.push_str(&format!(
                    "## {}\n\n{}\n\n",
                    p["title"].as_str().unwrap_or_default(),
                    p["text"].as_str().unwrap_or_default()
                ));
            }
            edudb::Source {
                id: format!("{prefix}/{i:04}"),
                origin: edudb::ingest::sources::Origin::Bytes(markdown.into_bytes()),
            }
        })
        .collect()
}

/// A fresh store at `dir/store` holding the Rust RFCs and `more` sources,
/// all ingested as Markdown; panics if any input fails.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn markdown_store(dir: &Path, more: Vec<edudb::Source>) -> (edudb::Db, edudb::IngestReport) {
    let db = edudb::Db::create(dir.join("store")).unwrap();
    let mut sources = edudb::ingest::sources::expand(&[shared_data().join("rust_rfcs/text")], None)
        .expect("RFC corpus in ../shared/data");
    sources.extend(more);
    let markdown = edudb::IngestOptions {
        format: Some(edudb::Format::Markdown),
        ..edudb::IngestOptions::default()
    };
    let report = db
        .ingest(
            &sources,
            markdown,
            &edudb::NoProgress,
            &edudb::CancelToken::new(),
        )
        .unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    (db, report)
}

/// The first half of `text` (at least its first character): a query
/// near, but not identical to, an indexed text.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn half(text: &str) -> &str {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut == 0 {
        cut = text.chars().next().map_or(0, char::len_utf8);
    }
    &text[..cut]
}

/// The `k` best rows of `matrix` for `query` by dot product: a flat scan
/// with the SIMD-friendly dot product and a partial selection, scoring into
/// `scores` (reused between calls), best first.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn flat_scan(
    matrix: &[f32],
    dimension: usize,
    query: &[f32],
    k: usize,
    scores: &mut Vec<(f32, usize)>,
) -> Vec<(f32, usize)> {
    scores.clear();
    scores.extend(
        (matrix.chunks_exact(dimension).enumerate())
            .map(|(i, row)| (edudb::compute::embed::dot(row, query), i)),
    );
    scores.select_nth_unstable_by(k, |a, b| b.0.total_cmp(&a.0));
    let mut best = scores[..k].to_vec();
    best.sort_by(|a, b| b.0.total_cmp(&a.0));
    best
}

/// The directory criterion writes its estimates to; set explicitly so the
/// ratio report can read them back.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("criterion")
}

/// A criterion configured to write where [`print_ratios`] reads, honouring
/// the command-line arguments (filters, `--quick`, ...).
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn criterion() -> Criterion {
    Criterion::default()
        .output_directory(&criterion_dir())
        .configure_from_args()
}

/// Median time in nanoseconds of `group/function` from estimates written
/// since `run_started`, or `None` when it was not measured in this run.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn median_ns(group: &str, function: &str, run_started: SystemTime) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join("new/estimates.json");
    if std::fs::metadata(&path).ok()?.modified().ok()? < run_started {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: serde_json::Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

/// Prints, for each function of `group`, its median and its ratio to the
/// median of `baseline`, both measured since `run_started`.
#[allow(dead_code)] // Not every bench binary uses every helper.
pub fn print_ratios(group: &str, baseline: &str, functions: &[&str], run_started: SystemTime) {
    let Some(base) = median_ns(group, baseline, run_started) else {
        println!("{group}: baseline {baseline} was not measured in this run; no ratios");
        return;
    };
    println!("\n{group}: medians and ratios to {baseline} (same run)");
    for function in std::iter::once(&baseline).chain(functions) {
        match median_ns(group, function, run_started) {
            Some(median) => println!(
                "  {function:<28} {:>10.2} ms   {:>6.2}x",
                median / 1e6,
                median / base
            ),
            None => println!("  {function:<28} not measured in this run"),
        }
    }
}

/// Runs the CLI with `args` on the store at `db`; returns its wall time and
/// peak resident memory in bytes. Panics unless it succeeds.
#[allow(dead_code)] // Not every bench binary uses every helper.
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4")]
pub fn edudb(db: &Path, args: &[&str]) -> (Duration, u64) {
    let binary =
        std::env::var_os("EDUDB_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_edudb").into());
    let started = Instant::now();
    let child = std::process::Command::new(binary)
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `usage` is a plain struct wait4 fills; `pid` is our child,
    // reaped here (so `child` is not waited for again).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = started.elapsed();
    assert_eq!(reaped, pid, "waiting for edudb {args:?}");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "edudb {args:?} failed"
    );
    // Linux reports the peak in kibibytes.
    (took, usage.ru_maxrss as u64 * 1024)
}
