//! SIGKILL at any moment of `ingest` and `rm`, and of `session add` and
//! `session rm`: every document and every listed turn whole.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

use crate::harness::*;
use crate::support;

const ROUNDS: usize = 24;
/// Rounds of the session test: each appends or removes at most one turn.
const SESSION_ROUNDS: usize = 32;

#[test]
fn sigkill_at_any_moment_leaves_whole_documents_only() {
    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let rfcs = support::rfcs().to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let mut partial_rounds = 0;
    for round in 0..ROUNDS {
        let format = if round % 2 == 0 { "markdown" } else { "text" };
        let mut child = if round % 4 == 3 {
            let ids: Vec<String> = open(&db)
                .and_then(|db| db.documents())
                .unwrap_or_default()
                .into_iter()
                .map(|m| m.id)
                .take(200)
                .collect();
            let mut args = vec!["rm"];
            args.extend(ids.iter().map(String::as_str));
            spawn(&db, &args)
        } else {
            spawn(&db, &["ingest", "-q", rfcs.as_str(), "--format", format])
        };
        // The first kill lands while the store is being created.
        let longest_ms = if round == 0 { 30 } else { 2500 };
        std::thread::sleep(Duration::from_millis(rng.random_range(0..longest_ms)));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        let count = verify(&db, &mut rng);
        if !finished {
            partial_rounds += 1;
        }
        eprintln!(
            "round {round} (seed {seed}): killed {} with {count} documents",
            if finished { "after exit" } else { "mid-run" }
        );
    }
    assert!(
        partial_rounds >= ROUNDS / 2,
        "only {partial_rounds} rounds were killed mid-run"
    );
    let out = support::edudb(&db, &["ingest", "-q", rfcs.as_str()]);
    assert!(out.status.success());
    let total = edudb::ingest::sources::expand(&[support::rfcs()], None)
        .unwrap()
        .len();
    assert_eq!(verify(&db, &mut rng), total);
}

#[test]
fn sigkill_during_turn_appends_leaves_whole_turns_only() {
    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let texts = turn_texts();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let (mut partial_rounds, mut most_turns) = (0, 0);
    let mut turns = 0;
    let jsonl = dir.path().join("turns.jsonl");
    for round in 0..SESSION_ROUNDS {
        let before = turns;
        // Two rounds in eight (one killed at random, one run to its end)
        // append three turns in one `--jsonl` write: afterwards the session
        // has all three or none.
        let bulk = matches!(round % 8, 5 | 6);
        let mut child = if round % 8 == 7 {
            spawn(&db, &["session", "rm", "s"])
        } else if bulk {
            let lines: Vec<String> = (0..3)
                .map(|i| {
                    let placement = if turns + i == 0 {
                        "new_topic"
                    } else {
                        "continue"
                    };
                    serde_json::json!({
                        "text": texts[(turns + i) % texts.len()],
                        "placement": placement,
                    })
                    .to_string()
                })
                .collect();
            std::fs::write(&jsonl, lines.join("\n")).unwrap();
            spawn(
                &db,
                &["session", "add", "s", "--jsonl", jsonl.to_str().unwrap()],
            )
        } else {
            let text = &texts[turns % texts.len()];
            let placement = ["--continue", "--new-topic", "--fork=0"][round % 3];
            let placement = if turns == 0 { "--new-topic" } else { placement };
            spawn(
                &db,
                &["session", "add", "s", placement, "--", text.as_str()],
            )
        };
        // Every fourth round runs to its end, so the session grows however
        // slow the machine; the others are killed at a random moment.
        if round % 4 == 2 {
            assert!(child.wait().unwrap().success(), "round {round} failed");
        } else {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..60)));
        }
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        turns = verify_session(&db, &texts);
        if bulk {
            assert!(
                turns == before || turns == before + 3,
                "round {round}: a three-turn append left {} of its turns",
                turns - before
            );
        }
        most_turns = most_turns.max(turns);
        if !finished {
            partial_rounds += 1;
        }
        eprintln!(
            "session round {round} (seed {seed}): killed {} with {turns} turns",
            if finished { "after exit" } else { "mid-run" }
        );
    }
    assert!(
        partial_rounds >= SESSION_ROUNDS / 4,
        "only {partial_rounds} rounds were killed mid-run"
    );
    // Two rounds run to their end between removals.
    assert!(
        most_turns >= 2,
        "the session never grew: {most_turns} turns"
    );
}

/// Rounds of the vacuum test: each kills one `vacuum` at a random moment.
const VACUUM_ROUNDS: usize = 10;

#[test]
fn sigkill_at_any_moment_of_a_vacuum_leaves_the_old_store_or_the_new_one_whole() {
    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let files: Vec<String> = (rfc_files().into_iter().take(60))
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["ingest", "-q"];
    args.extend(files.iter().map(String::as_str));
    assert!(support::edudb(&db, &args).status.success());
    // Half removed: space for the vacuum to give back.
    let removed: Vec<String> = (files.iter().step_by(2))
        .map(|f| {
            std::path::Path::new(f)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["rm"];
    args.extend(removed.iter().map(String::as_str));
    assert!(support::edudb(&db, &args).status.success());
    let kept = whole_documents(&db, &mut rng).unwrap();
    assert_eq!(kept.len(), files.len() - removed.len());
    let out = run_within_a_minute(&db, &["vacuum", "--json"], "the store");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["bytes_after"].as_u64() < report["bytes_before"].as_u64(),
        "{report}"
    );
    // How long a whole vacuum of the store the rounds see takes (the first
    // one had the removed half to drop as well), to kill them within it.
    let started = std::time::Instant::now();
    let out = run_within_a_minute(&db, &["vacuum"], "the store");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut whole_ms = (started.elapsed().as_millis() as u64).max(50);
    let mut partial_rounds = 0;
    // Past the planned rounds, more (up to three times as many) until
    // enough were killed mid-run: on a loaded machine a vacuum's time
    // varies, and one that ended before its kill shows it takes less than
    // was waited.
    let mut round = 0;
    while round < VACUUM_ROUNDS || (partial_rounds < VACUUM_ROUNDS / 2 && round < 3 * VACUUM_ROUNDS)
    {
        let mut child = spawn(&db, &["vacuum"]);
        let waited = rng.random_range(0..whole_ms);
        std::thread::sleep(Duration::from_millis(waited));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        partial_rounds += usize::from(!finished);
        if finished {
            whole_ms = (waited * 3 / 4).max(50);
        }
        assert_eq!(
            whole_documents(&db, &mut rng).unwrap(),
            kept,
            "round {round} (seed {seed}): the store after a kill {}",
            if finished { "after exit" } else { "mid-run" }
        );
        round += 1;
    }
    assert!(
        partial_rounds >= VACUUM_ROUNDS / 2,
        "only {partial_rounds} rounds were killed mid-run"
    );
    // What a killed vacuum left beside the store goes with the next one.
    let out = run_within_a_minute(&db, &["vacuum"], "the store");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for leftover in ["store.vacuum", "store.vacuum.partial"] {
        assert!(!dir.path().join(leftover).exists(), "{leftover} is left");
    }
    assert_eq!(whole_documents(&db, &mut rng).unwrap(), kept);
}
