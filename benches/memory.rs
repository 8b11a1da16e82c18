//! Agent memory on a long dialogue: the first 1,000 turns of the two
//! LoCoMo dev conversations (`../shared/data/locomo_dev`, loaded as
//! `edudb eval memory` loads them) in one session.
//!
//! - `memory_load/append_turns_1000`: loading all of them in one
//!   [`Db::append_turns`] call into a fresh store;
//! - `memory_session`, on the loaded 1,000-turn session:
//!   `append_one` (one more turn through the library, auto-placed),
//!   `context_query_1024` (a query-aware context at 1,024 tokens),
//!   `context_1024` (the context without a query), against
//!   `bm25_query_1024`, the session-scoped BM25 query at the same budget,
//!   as the baseline measured in the same run;
//! - `memory_model` (only with `EDUDB_LOCAL_MODEL`, from
//!   `.ci/embedding-server model-dir`): the same session in a store whose
//!   embedder is all-MiniLM-L6-v2 in-process (its load time is printed),
//!   `context_query_1024` (which then embeds the query and scores the
//!   turns' vectors too) against `bm25_query_1024` there.
//!
//! `cargo bench --bench memory` (add `-- --quick` for a short run).

mod common;

use std::time::SystemTime;

use edudb::eval::memory::load_locomo;
use edudb::{CancelToken, Db, NoProgress, OpenOptions, Params, Role, TurnInput};

const TURNS: usize = 1_000;

/// The first [`TURNS`] turns of the dev conversations, in order.
fn turns() -> Vec<TurnInput> {
    let dir = common::shared_data().join("locomo_dev");
    let mut turns = Vec::new();
    for name in ["49.json", "50.json"] {
        turns.extend(load_locomo(&dir.join(name)).unwrap().turns);
    }
    turns.truncate(TURNS);
    assert_eq!(
        turns.len(),
        TURNS,
        "the dev set holds at least {TURNS} turns"
    );
    turns
}

fn open(dir: &std::path::Path) -> Db {
    open_with(dir, OpenOptions::default())
}

fn open_with(dir: &std::path::Path, options: OpenOptions) -> Db {
    Db::open_with(
        dir.join("store"),
        &OpenOptions {
            create: true,
            ..options
        },
    )
    .unwrap()
}

/// The query-aware context and the session BM25 query at 1,024 tokens on
/// `db`'s session `long`, in criterion group `group`.
fn bench_contexts(criterion: &mut criterion::Criterion, group: &str, db: &Db, question: &str) {
    let mut group = criterion.benchmark_group(group);
    group.bench_function("context_query_1024", |b| {
        b.iter(|| db.session_context("long", 1024, Some(question)).unwrap())
    });
    let statement = db
        .prepare("SELECT SPANS FROM session('long') SEED BM25($q) BUDGET 1024 TOKENS")
        .unwrap();
    let params = Params::new().text("q", question);
    group.bench_function("bm25_query_1024", |b| {
        b.iter(|| db.run(&statement, &params).unwrap())
    });
    group.finish();
}

fn main() {
    let run_started = SystemTime::now();
    let mut criterion = common::criterion();
    let turns = turns();
    {
        let mut group = criterion.benchmark_group("memory_load");
        group.sample_size(10);
        group.bench_function("append_turns_1000", |b| {
            b.iter_batched(
                || tempfile::tempdir().unwrap(),
                |dir| {
                    let db = open(dir.path());
                    db.append_turns("long", &turns, &NoProgress, &CancelToken::new())
                        .unwrap();
                    (db, dir)
                },
                criterion::BatchSize::PerIteration,
            )
        });
        group.finish();
    }
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.append_turns("long", &turns, &NoProgress, &CancelToken::new())
        .unwrap();
    let question = "What kind of car does Evan drive, and where did he go on road trips?";
    {
        let mut group = criterion.benchmark_group("memory_session");
        let mut n = 0;
        group.bench_function("append_one", |b| {
            b.iter(|| {
                n += 1;
                let text = format!("Evan: turn {n}, about the Prius and a trip to the Rockies.");
                db.append_turn("long", Role::Assistant, &text, edudb::Placement::Auto)
                    .unwrap()
            })
        });
        group.bench_function("context_1024", |b| {
            b.iter(|| db.session_context("long", 1024, None).unwrap())
        });
        group.finish();
    }
    bench_contexts(&mut criterion, "memory_session", &db, question);
    if let Some(model) = std::env::var_os("EDUDB_LOCAL_MODEL") {
        let dir = tempfile::tempdir().unwrap();
        let options = OpenOptions {
            embedder: Some(edudb::EmbedderConfig::Local {
                model: model.into(),
            }),
            ..OpenOptions::default()
        };
        let db = open_with(dir.path(), options);
        let started = std::time::Instant::now();
        db.append_turns("long", &turns, &NoProgress, &CancelToken::new())
            .unwrap();
        println!(
            "memory_model: loaded {TURNS} turns with all-MiniLM-L6-v2 in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        bench_contexts(&mut criterion, "memory_model", &db, question);
    }
    criterion.final_summary();
    common::print_ratios("memory_load", "append_turns_1000", &[], run_started);
    common::print_ratios(
        "memory_session",
        "bm25_query_1024",
        &["append_one", "context_query_1024", "context_1024"],
        run_started,
    );
    common::print_ratios(
        "memory_model",
        "bm25_query_1024",
        &["context_query_1024"],
        run_started,
    );
}
