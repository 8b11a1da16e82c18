//! What the crash tests share: opening a store a killed process held,
//! the seed, spawning and timing the binary, the RFC corpus, checking a
//! store's documents and turns against their sources, and running
//! one of this binary's ignored helpers in a child process.

use edudb::ingest::analyze;
use edudb::{Db, Format};
use rand::Rng;
use rand::rngs::StdRng;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;

/// Opens the store, waiting up to five seconds while it is locked: a
/// killed child's lock is released only once the system has ended it.
pub fn open(path: &Path) -> edudb::Result<Db> {
    Db::open_with(
        path,
        &edudb::OpenOptions {
            busy_timeout: Duration::from_secs(5),
            ..Default::default()
        },
    )
}

/// The seed of a test's random choices: `EDUDB_CRASH_SEED`, or a fixed
/// default so that a run repeats.
pub fn crash_seed() -> u64 {
    std::env::var("EDUDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

pub fn spawn(db: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The RFCs' Markdown files directly in the corpus directory (whose ids
/// are their names), sorted.
pub fn rfc_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(support::rfcs())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// Runs `command`, which must end within a minute (else the panic names
/// `what`), and returns its output.
pub fn output_within_a_minute(command: &mut Command, what: &str) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("{what} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Copies the store directory `from` to `to`, as `cp -r` does.
pub fn copy_store(from: &Path, to: &Path) {
    let copied = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(copied.success());
}

/// Runs the ignored test `name` (its path, `module::test`) of this binary
/// in a child process with `env`, under a minute's deadline; it must pass.
/// Returns the last line it printed to standard error that starts with
/// `verdict: `.
pub fn run_test_helper(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied());
    let out = output_within_a_minute(&mut command, name);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} failed: {stderr}");
    stderr
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("verdict: "))
        .unwrap_or_else(|| panic!("{name} gave no verdict: {stderr}"))
        .to_owned()
}

/// Runs an edudb command that must end within a minute, `on` what (for
/// the message: a full disk must fail a write promptly, damage must not
/// hang a command); returns its output.
pub fn run_within_a_minute(db: &Path, args: &[&str], on: &str) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_edudb"));
    command.arg("--db").arg(db).args(args);
    output_within_a_minute(&mut command, &format!("edudb {args:?} on {on}"))
}

/// Checks the store after a kill and returns how many documents it holds.
pub fn verify(db_path: &Path, rng: &mut StdRng) -> usize {
    whole_documents(db_path, rng)
        .unwrap_or_else(|e| panic!("the store must open and pass check after a crash: {e}"))
        .len()
}

/// The ids of the store's documents, in order, once it opens and passes
/// `check`, a sample of its documents equal complete analyses of their
/// files, and search finds only listed documents; a library error (a full
/// disk) is returned. A kill before the store's directory had anything in
/// it leaves no store.
pub fn whole_documents(db_path: &Path, rng: &mut StdRng) -> edudb::Result<Vec<String>> {
    let db = match open(db_path) {
        Err(edudb::Error::NoStore(_)) => {
            let empty = std::fs::read_dir(db_path).map_or(true, |mut d| d.next().is_none());
            assert!(empty, "a non-empty store directory must open");
            return Ok(Vec::new());
        }
        opened => opened?,
    };
    let report = db.check()?;
    assert!(report.damaged.is_empty(), "check found damage: {report:?}");
    let metas = db.documents()?;
    let turns: usize = db.sessions()?.iter().map(|s| s.turns as usize).sum();
    assert_eq!(report.documents, metas.len() + turns);
    for _ in 0..metas.len().min(8) {
        let meta = &metas[rng.random_range(0..metas.len())];
        let source: PathBuf = support::rfcs().join(format!("{}.md", meta.id));
        let text = std::fs::read_to_string(&source).unwrap();
        let stored = db.document(&meta.id)?;
        let complete = [Format::Markdown, Format::Text]
            .into_iter()
            .any(|format| analyze(&meta.id, text.clone(), format).unwrap() == stored);
        assert!(
            complete,
            "{} is not a complete analysis of its file",
            meta.id
        );
    }
    let hits = db.search("the", 200)?;
    assert!(
        hits.iter().all(|h| metas.iter().any(|m| m.id == h.doc)),
        "search returned a missing document"
    );
    let mut ids: Vec<String> = metas.into_iter().map(|m| m.id).collect();
    ids.sort();
    Ok(ids)
}

/// Turn texts: the paragraphs of one RFC, in order.
pub fn turn_texts() -> Vec<String> {
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
pub fn verify_session(db_path: &Path, texts: &[String]) -> usize {
    let db = match open(db_path) {
        Err(edudb::Error::NoStore(_)) => return 0,
        opened => opened.expect("store must open after a crash"),
    };
    db.check().expect("store must pass check after a crash");
    let dialogue = match db.dialogue("s") {
        Err(edudb::Error::NoSuchSession(_)) => return 0,
        found => found.unwrap(),
    };
    for turn in &dialogue.turns {
        let stored = db.document(&turn.doc).unwrap();
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
