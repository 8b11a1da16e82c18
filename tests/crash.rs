//! Crash safety: `edudb ingest` and `edudb rm` are killed with SIGKILL at
//! random moments, many rounds over the same store. After every kill the
//! store must open, pass `check` (every document whole, the full-text index
//! caught up), and hold only documents that equal a complete analysis of
//! their source file. `edudb session add` and `session rm` get the same
//! treatment: every turn a session lists is whole.

#![cfg(unix)]

// The integration tests' helpers; these tests use only some of them.
#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use edudb::ingest::analyze;
use edudb::{Db, Format};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ROUNDS: usize = 24;
/// Rounds of the session test: each appends or removes at most one turn.
const SESSION_ROUNDS: usize = 32;

fn spawn(db: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Checks the store after a kill and returns how many documents it holds.
/// A kill before the store's directory had anything in it leaves no store.
fn verify(db_path: &Path, rng: &mut StdRng) -> usize {
    let db = match Db::open(db_path) {
        Err(edudb::Error::NoStore(_)) => {
            let empty = std::fs::read_dir(db_path).map_or(true, |mut d| d.next().is_none());
            assert!(empty, "a non-empty store directory must open");
            return 0;
        }
        opened => opened.expect("store must open after a crash"),
    };
    let report = db.check().expect("store must pass check after a crash");
    let metas = db.documents().unwrap();
    assert_eq!(report.documents, metas.len());
    for _ in 0..metas.len().min(8) {
        let meta = &metas[rng.random_range(0..metas.len())];
        let source: PathBuf = support::rfcs().join(format!("{}.md", meta.id));
        let text = std::fs::read_to_string(&source).unwrap();
        let stored = db.document(&meta.id).unwrap().to_document().unwrap();
        let complete = [Format::Markdown, Format::Text]
            .into_iter()
            .any(|format| analyze(&meta.id, text.clone(), format).unwrap() == stored);
        assert!(
            complete,
            "{} is not a complete analysis of its file",
            meta.id
        );
    }
    let hits = db.search("the", 200).unwrap();
    assert!(
        hits.iter().all(|h| metas.iter().any(|m| m.id == h.doc)),
        "search returned a missing document"
    );
    metas.len()
}

#[test]
fn sigkill_at_any_moment_leaves_whole_documents_only() {
    let seed = std::env::var("EDUDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = StdRng::seed_from_u64(seed);
    let rfcs = support::rfcs().to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let mut partial_rounds = 0;
    for round in 0..ROUNDS {
        let format = if round % 2 == 0 { "markdown" } else { "text" };
        let mut child = if round % 4 == 3 {
            let ids: Vec<String> = Db::open(&db)
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

/// Turn texts: the paragraphs of one RFC, in order.
fn turn_texts() -> Vec<String> {
    let text = std::fs::read_to_string(support::rfcs().join("0002-rfc-process.md")).unwrap();
    text.split("\n\n")
        .map(str::trim)
        .filter(|p| p.split_whitespace().count() >= 3)
        .map(str::to_owned)
        .collect()
}

/// After a kill during `edudb session add`/`session rm`: the store opens and
/// checks, and session `s`, when present, holds turns 0..n whose documents
/// are the texts appended, whole. Returns n.
fn verify_session(db_path: &Path, texts: &[String]) -> usize {
    let db = match Db::open(db_path) {
        Err(edudb::Error::NoStore(_)) => return 0,
        opened => opened.expect("store must open after a crash"),
    };
    db.check().expect("store must pass check after a crash");
    let dialogue = match db.dialogue("s") {
        Err(edudb::Error::NoSuchSession(_)) => return 0,
        found => found.unwrap(),
    };
    for turn in &dialogue.turns {
        let stored = db.document(&turn.doc).unwrap().to_document().unwrap();
        let expected = analyze(
            &turn.doc,
            texts[turn.number as usize % texts.len()].clone(),
            Format::Text,
        )
        .unwrap();
        assert_eq!(stored, expected, "turn {} is not whole", turn.number);
    }
    dialogue.turns.len()
}

#[test]
fn sigkill_during_turn_appends_leaves_whole_turns_only() {
    let seed = std::env::var("EDUDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = StdRng::seed_from_u64(seed);
    let texts = turn_texts();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let (mut partial_rounds, mut most_turns) = (0, 0);
    let mut turns = 0;
    for round in 0..SESSION_ROUNDS {
        let mut child = if round % 8 == 7 {
            spawn(&db, &["session", "rm", "s"])
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
            std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        }
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        turns = verify_session(&db, &texts);
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
