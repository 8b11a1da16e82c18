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
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

const ROUNDS: usize = 24;
/// Rounds of the session test: each appends or removes at most one turn.
const SESSION_ROUNDS: usize = 32;

/// Opens the store, waiting up to five seconds while it is locked: a
/// killed child's lock is released only once the system has ended it.
fn open(path: &Path) -> edudb::Result<Db> {
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
fn crash_seed() -> u64 {
    std::env::var("EDUDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

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
fn verify(db_path: &Path, rng: &mut StdRng) -> usize {
    whole_documents(db_path, rng)
        .unwrap_or_else(|e| panic!("the store must open and pass check after a crash: {e}"))
        .len()
}

/// The ids of the store's documents, in order, once it opens and passes
/// `check`, a sample of its documents equal complete analyses of their
/// files, and search finds only listed documents; a library error (a full
/// disk) is returned. A kill before the store's directory had anything in
/// it leaves no store.
fn whole_documents(db_path: &Path, rng: &mut StdRng) -> edudb::Result<Vec<String>> {
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

/// The RFCs' Markdown files directly in the corpus directory (whose ids
/// are their names), sorted.
fn rfc_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(support::rfcs())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
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

/// A tmpfs of `MEBIBYTES` mounted on a temporary directory for the
/// full-disk test, unmounted when dropped. It holds a ballast file of
/// `BALLAST` bytes, removed when the test needs space to return.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    const MEBIBYTES: u64 = 28;
    const BALLAST: u64 = 8 << 20;

    /// Mounts it and puts the ballast in, or says why not (mounting needs
    /// root). With `EDUDB_REQUIRE_TMPFS` set (as CI sets it) failing to
    /// mount fails.
    fn mount() -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={}m", Self::MEBIBYTES))
            .arg("tmpfs")
            .arg(dir.path())
            .stderr(Stdio::piped())
            .output();
        match mounted {
            Ok(out) if out.status.success() => {
                let disk = Tmpfs { dir };
                disk.put_ballast();
                Some(disk)
            }
            failed => {
                let why = format!("cannot mount a tmpfs: {failed:?}");
                assert!(std::env::var_os("EDUDB_REQUIRE_TMPFS").is_none(), "{why}");
                eprintln!("skipped: {why}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `file` until it holds `bytes` more, or the file system has at
    /// most `free` bytes left, whichever comes first.
    fn write_until(&self, file: &Path, bytes: u64, free: u64) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .unwrap();
        let chunk = vec![0u8; 64 << 10];
        let mut written = 0;
        while written < bytes {
            let available = fs4::available_space(self.path()).unwrap();
            if available <= free {
                break;
            }
            let len = (chunk.len() as u64)
                .min(available - free)
                .min(bytes - written);
            if file
                .write_all(&chunk[..len as usize])
                .and_then(|()| file.sync_data())
                .is_err()
            {
                break;
            }
            written += len;
        }
    }

    /// Fills the file system until at most `free` bytes are left.
    fn fill(&self, free: u64) -> PathBuf {
        let path = self.path().join("filler");
        self.write_until(&path, u64::MAX, free);
        path
    }

    /// Puts the ballast back, as much of it as fits.
    fn put_ballast(&self) {
        self.write_until(&self.path().join("ballast"), Self::BALLAST, 0);
    }

    /// Removes the ballast: space returns.
    fn release_ballast(&self) {
        std::fs::remove_file(self.path().join("ballast")).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// Runs `command`, which must end within a minute (else the panic names
/// `what`), and returns its output.
fn output_within_a_minute(command: &mut Command, what: &str) -> std::process::Output {
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

/// Runs an edudb command that must end within a minute, `on` what (for
/// the message: a full disk must fail a write promptly, damage must not
/// hang a command); returns its output.
fn run_within_a_minute(db: &Path, args: &[&str], on: &str) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_edudb"));
    command.arg("--db").arg(db).args(args);
    output_within_a_minute(&mut command, &format!("edudb {args:?} on {on}"))
}

/// Runs an edudb command on a full disk (see [`run_within_a_minute`]);
/// returns whether it succeeded. A failure must be the full disk's clear
/// error.
fn run_on_full_disk(db: &Path, args: &[&str]) -> bool {
    run_on_full_disk_output(db, args).status.success()
}

/// [`run_on_full_disk`], with the command's output.
fn run_on_full_disk_output(db: &Path, args: &[&str]) -> std::process::Output {
    let out = run_within_a_minute(db, args, "a full disk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let args = &args[..args.len().min(4)];
    if !out.status.success() {
        eprintln!("edudb {} refused: {}", args[0], stderr.trim());
        assert_eq!(out.status.code(), Some(2), "edudb {args:?}: {stderr}");
        assert!(
            stderr.contains("is full") && stderr.contains("every earlier change is kept"),
            "edudb {args:?} failed without the full disk's error: {stderr}"
        );
    }
    out
}

/// The ids of the store's documents and, when `session` is given, how
/// many turns that session has (`None` when it does not exist). They are
/// read in a child process ([`list_store_on_a_full_disk`]), since a
/// process whose handle on the store failed on the full disk cannot open
/// the store again. When that read fails because the disk is full, space
/// returns (the ballast is removed) and the read must then succeed; the
/// ballast is put back, as far as it fits.
fn committed(
    disk: &Tmpfs,
    db: &Path,
    seed: u64,
    session: Option<&str>,
) -> (Vec<String>, Option<usize>) {
    let read = || {
        let seed = seed.to_string();
        let verdict = run_test_helper(
            "list_store_on_a_full_disk",
            &[
                ("EDUDB_FULL_DISK_STORE", db.as_os_str()),
                ("EDUDB_FULL_DISK_SESSION", session.unwrap_or("").as_ref()),
                ("EDUDB_CRASH_SEED", seed.as_ref()),
            ],
        );
        (verdict != "full").then_some(verdict)
    };
    let verdict = read().unwrap_or_else(|| {
        eprintln!("reading the store failed on the full disk; the ballast goes");
        disk.release_ballast();
        let verdict = read().expect("the store must read once space returns");
        disk.put_ballast();
        verdict
    });
    let (ids, turns) = verdict.split_once(' ').unwrap();
    let ids = ids
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    (ids.collect(), turns.parse().ok())
}

/// The in-process half of the full-disk test, run by it in a child process
/// (see [`committed`]): checks the store in `EDUDB_FULL_DISK_STORE` as
/// [`verify`] does and prints `verdict: ` with its document ids
/// (comma-separated) and the turn count of `EDUDB_FULL_DISK_SESSION` (`-`
/// for none), or `verdict: full` when the store could not be read for lack
/// of space (which must be the full disk's error).
#[test]
#[ignore = "run by a_full_disk_fails_writes_promptly_and_loses_no_committed_document"]
fn list_store_on_a_full_disk() {
    let store = PathBuf::from(std::env::var_os("EDUDB_FULL_DISK_STORE").unwrap());
    let session = std::env::var("EDUDB_FULL_DISK_SESSION").unwrap();
    let seed = std::env::var("EDUDB_CRASH_SEED").unwrap().parse().unwrap();
    let read = whole_documents(&store, &mut StdRng::seed_from_u64(seed)).and_then(|ids| {
        let turns = match session.as_str() {
            "" => None,
            session => match open(&store)?.dialogue(session) {
                Ok(dialogue) => Some(dialogue.turns.len()),
                Err(edudb::Error::NoSuchSession(_)) => None,
                Err(e) => return Err(e),
            },
        };
        Ok((ids, turns))
    });
    match read {
        Ok((ids, turns)) => {
            let turns = turns.map_or("-".to_owned(), |n| n.to_string());
            eprintln!("verdict: {} {turns}", ids.join(","));
        }
        Err(e @ edudb::Error::DiskFull { .. }) => {
            eprintln!("{e}");
            eprintln!("verdict: full");
        }
        Err(e) => panic!("the store must read on a full disk or fail for lack of space: {e}"),
    }
}

/// The one write of a full-disk round.
enum FullDiskWrite {
    /// Ingest the document of this id.
    Ingest(String),
    /// Remove this document.
    Remove(String),
    /// Append a turn to the round's session.
    Turn,
}

#[test]
fn a_full_disk_fails_writes_promptly_and_loses_no_committed_document() {
    let Some(disk) = Tmpfs::mount() else {
        return;
    };
    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let db = disk.path().join("store");
    let files = rfc_files();
    let (mut refused_ingests, mut refused_writes, mut partly_stored) = (0, 0, 0);
    for round in 0..8 {
        // Remove a third of the documents (refused, clearly, once even the
        // smaller removal reserve is gone: sled does not give space back),
        if round > 0 {
            let (ids, _) = committed(&disk, &db, seed, None);
            let mut args = vec!["rm"];
            args.extend(
                ids.choose_multiple(&mut rng, ids.len().div_ceil(3))
                    .map(String::as_str),
            );
            if args.len() > 1 {
                run_on_full_disk(&db, &args);
            }
        }
        // then ingest until the disk refuses: the first round offers the
        // whole corpus (about 11 MB of text; the store needs several times
        // that), so that its ingest surely fails part-way on a store that
        // had room for its first documents; later rounds offer 60 files.
        let offered = if round == 0 { files.len() } else { 60 };
        let batch: Vec<String> = files
            .choose_multiple(&mut rng, offered)
            .map(|path| path.to_string_lossy().into_owned())
            .collect();
        let mut args = vec!["ingest", "-q", "--json", "--format", "markdown"];
        args.extend(batch.iter().map(String::as_str));
        let out = run_on_full_disk_output(&db, &args);
        if !out.status.success() {
            refused_ingests += 1;
        }
        let (mut expected, _) = committed(&disk, &db, seed, None);
        // An ingest that failed after storing some documents says which
        // (stdout, --json) and which not: every one said stored is in the
        // store, and together they are the whole batch.
        if let (false, Ok(said)) = (
            out.status.success(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout),
        ) {
            let ids = |field: &str| -> Vec<String> {
                serde_json::from_value(said[field].clone()).unwrap()
            };
            let (stored, not_stored) = (ids("stored"), ids("not_stored"));
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("were stored before that"),
                "the message says what was stored"
            );
            for id in &stored {
                assert!(expected.contains(id), "{id} said stored, not in the store");
            }
            let mut said: Vec<String> = stored.into_iter().chain(not_stored).collect();
            said.sort();
            let mut batch_ids: Vec<String> = (batch.iter())
                .map(|p| {
                    Path::new(p)
                        .file_stem()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            batch_ids.sort();
            assert_eq!(said, batch_ids, "stored and not stored are the whole batch");
            partly_stored += 1;
        }

        // Another program fills the disk, leaving from nothing to a little
        // more than a write needs; reads must still answer or fail clearly,
        // and one write either happens whole or not at all.
        let free = [0, 256 << 10, 4 << 20, 12 << 20][round % 4];
        let filler = disk.fill(free);
        run_on_full_disk(&db, &["docs"]);
        let file = files[rng.random_range(0..files.len())].clone();
        let id = file.file_stem().unwrap().to_string_lossy().into_owned();
        let session = format!("s{round}");
        let write = match (round % 3, expected.choose(&mut rng).cloned()) {
            (1, Some(victim)) => FullDiskWrite::Remove(victim),
            (2, _) => FullDiskWrite::Turn,
            _ => FullDiskWrite::Ingest(id),
        };
        let written = match &write {
            FullDiskWrite::Ingest(_) => run_on_full_disk(
                &db,
                &[
                    "ingest",
                    "-q",
                    "--format",
                    "markdown",
                    &file.to_string_lossy(),
                ],
            ),
            FullDiskWrite::Remove(victim) => run_on_full_disk(&db, &["rm", victim]),
            FullDiskWrite::Turn => run_on_full_disk(
                &db,
                &[
                    "session",
                    "add",
                    &session,
                    "--new-topic",
                    "--",
                    "a turn on a full disk",
                ],
            ),
        };
        // Removing is how space comes back: it works on a full disk too,
        // in the room the store keeps for it.
        assert!(
            written || !matches!(write, FullDiskWrite::Remove(_)),
            "round {round}: a removal with {free} bytes free was refused"
        );
        match (written, &write) {
            (false, _) => refused_writes += 1,
            (true, FullDiskWrite::Ingest(id)) => {
                if let Err(at) = expected.binary_search(id) {
                    expected.insert(at, id.clone());
                }
            }
            (true, FullDiskWrite::Remove(victim)) => expected.retain(|doc| doc != victim),
            (true, FullDiskWrite::Turn) => {}
        }

        // Space returns: every committed document is there, whole.
        std::fs::remove_file(filler).unwrap();
        let (ids, turns) = committed(&disk, &db, seed, Some(&session));
        assert_eq!(ids, expected, "round {round} (seed {seed})");
        if matches!(write, FullDiskWrite::Turn) {
            assert_eq!(
                turns,
                written.then_some(1),
                "round {round}: session {session}"
            );
        }
        eprintln!(
            "round {round} (seed {seed}): {} documents, {free} bytes left, write {}",
            expected.len(),
            if written { "done" } else { "refused" }
        );
    }
    assert!(
        refused_ingests >= 4,
        "the disk refused only {refused_ingests} ingests"
    );
    assert!(
        refused_writes >= 2,
        "the disk refused only {refused_writes} single writes"
    );
    assert!(
        partly_stored >= 1,
        "no ingest failed part-way ({refused_ingests} refused)"
    );
}

/// Runs an edudb command on a damaged store (see [`run_within_a_minute`]):
/// it must end with success or exit 2 (never a panic or a signal); returns
/// its exit code and standard output.
fn run_on_damage(db: &Path, args: &[&str]) -> (i32, String) {
    let out = run_within_a_minute(db, args, "a damaged store");
    let code = out.status.code();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(code, Some(0 | 2)),
        "edudb {args:?} ended with {:?}: {stderr}",
        out.status,
    );
    // A panic caught inside the library is an error, not printed too.
    assert!(!stderr.contains("panicked"), "edudb {args:?}: {stderr}");
    (
        code.unwrap_or(2),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The store's files a round of the damage campaign damages, in turn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Damaged {
    /// Three random 4 KiB blocks of sled's data log and blob files.
    DataLog,
    /// One byte of sled's own metadata: its snapshot or its configuration.
    EngineMetadata,
    /// A random 4 KiB block of a full-text index file.
    FullText,
    /// A random 4 KiB block of a large record kept in a file of its own.
    RecordFile,
}

impl Damaged {
    const ALL: [Damaged; 4] = [
        Damaged::DataLog,
        Damaged::EngineMetadata,
        Damaged::FullText,
        Damaged::RecordFile,
    ];

    /// Damages this kind of file of the store at `store`.
    fn apply(self, store: &Path, rng: &mut StdRng) {
        let sled = store.join("sled");
        match self {
            Damaged::DataLog => {
                let mut files = vec![sled.join("db")];
                files.extend(files_in(&sled.join("blobs")));
                for _ in 0..3 {
                    overwrite_block(files.choose(rng).unwrap(), rng);
                }
            }
            Damaged::EngineMetadata => {
                let mut files = vec![sled.join("conf")];
                files.extend(files_in(&sled).into_iter().filter(|path| {
                    path.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("snap.")
                }));
                let path = files.choose(rng).unwrap();
                let mut bytes = std::fs::read(path).unwrap();
                // Not a snapshot's length (8 bytes before its checksum),
                // which sled reads only from compressed snapshots.
                let len = bytes.len();
                let at = loop {
                    let at = rng.random_range(0..len);
                    if path.ends_with("conf") || !(len - 12..len - 4).contains(&at) {
                        break at;
                    }
                };
                bytes[at] ^= rng.random_range(1..=255u8);
                std::fs::write(path, bytes).unwrap();
            }
            Damaged::FullText => {
                let files: Vec<PathBuf> = files_in(&store.join("fulltext"))
                    .into_iter()
                    .filter(|path| std::fs::metadata(path).unwrap().len() > 4096)
                    .collect();
                overwrite_block(files.choose(rng).unwrap(), rng);
            }
            Damaged::RecordFile => {
                let files = files_in(&sled.join("records"));
                overwrite_block(files.choose(rng).expect("a record file"), rng);
            }
        }
    }
}

/// The files directly in `dir`.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect()
}

/// Overwrites a random 4 KiB block of the file at `path` (when it is
/// longer than that) with random bytes.
fn overwrite_block(path: &Path, rng: &mut StdRng) {
    use std::io::{Seek, SeekFrom, Write};
    let len = std::fs::metadata(path).unwrap().len();
    if len <= 4096 {
        return;
    }
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(rng.random_range(0..len - 4096)))
        .unwrap();
    let noise: Vec<u8> = (0..4096).map(|_| rng.random()).collect();
    file.write_all(&noise).unwrap();
}

/// The damage campaign: each round damages one kind of the store's files
/// ([`Damaged`], in turn) in a copy of the same store, then runs commands
/// on it. None may panic or hang; each works or names the damage. Damage
/// to sled's own metadata is repaired at open (every document whole);
/// damage to the full-text index is rebuilt from the store; a damaged
/// record file names its document; in every store that opens, `salvage`
/// copies every document that still reads whole; and salvage before any
/// open (reading a damaged data log page by page) copies only whole
/// documents, at least as many as the engine keeps.
#[test]
fn damage_to_each_of_the_store_files_never_crashes_and_is_repaired_or_named() {
    let seed = crash_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    let mut files: Vec<String> = rfc_files()
        .iter()
        .take(60)
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    // A document whose text is kept in a file of its own (over 256 KiB).
    let large = dir.path().join("large.md");
    let rfc = std::fs::read_to_string(&files[0]).unwrap();
    let mut text = String::from("# Large\n\n");
    while text.len() < 300 << 10 {
        text.push_str(&rfc);
        text.push_str("\n\n");
    }
    std::fs::write(&large, text).unwrap();
    files.push(large.to_string_lossy().into_owned());
    let mut args = vec!["ingest", "-q", "--format", "markdown"];
    args.extend(files.iter().map(String::as_str));
    assert!(support::edudb(&pristine, &args).status.success());
    // Opened once more, as a store in use is: sled has a snapshot to
    // recover from, not only its log.
    assert!(support::edudb(&pristine, &["docs"]).status.success());
    let (mut opened, mut named) = (0, 0);
    for round in 0..32 {
        let damaged = Damaged::ALL[round % Damaged::ALL.len()];
        let store = dir.path().join(format!("round{round}"));
        copy_store(&pristine, &store);
        damaged.apply(&store, &mut rng);
        // A copy no command has opened, for salvage: an open lets the
        // engine cut a damaged log short.
        let untouched = dir.path().join(format!("round{round}-untouched"));
        copy_store(&store, &untouched);
        let (code, json) = run_on_damage(&store, &["check", "--json"]);
        for args in [
            &["docs"][..],
            &["stats"],
            &["search", "lifetime"],
            &[
                "query",
                "SELECT SPANS FROM * SEED BM25('lifetime elision') BUDGET 256 TOKENS",
            ],
            &[
                "query",
                "SELECT SPANS FROM * SEED NEAR('lifetime elision') BUDGET 256 TOKENS",
            ],
        ] {
            run_on_damage(&store, args);
        }
        // The report is JSON whenever the store opens; a clean one exits 0.
        if let Ok(report) = serde_json::from_str::<serde_json::Value>(&json) {
            let named = report["damaged"].as_array().map(Vec::len);
            assert_eq!(code == 0, named == Some(0), "round {round}: {json}");
        } else {
            assert_eq!(code, 2, "round {round}");
        }
        // sled's recovery of damaged files can differ from one open to the
        // next, so the report and the reads it vouches for come from one
        // open: a store sled cannot open (its first page damaged) is an
        // error, and in any other every document the report does not name
        // reads back whole or is absent (sled recovers its log up to the
        // damage, as after a crash), never garbled.
        // In a process of its own: sled keeps process-wide state that a
        // damaged store can leave stuck (a thread holding its concurrency
        // guard), which would hang every later write in this process.
        let verdict = run_test_helper(
            "verify_damaged_store",
            &[
                ("EDUDB_DAMAGED_STORE", store.as_os_str()),
                (
                    "EDUDB_DAMAGED_FILES",
                    std::ffi::OsStr::new(&files.join("\n")),
                ),
            ],
        );
        // Salvaged before any open, every document copied is whole.
        let salvaged: usize = run_test_helper(
            "salvage_damaged_store",
            &[
                ("EDUDB_DAMAGED_STORE", untouched.as_os_str()),
                (
                    "EDUDB_DAMAGED_FILES",
                    std::ffi::OsStr::new(&files.join("\n")),
                ),
            ],
        )
        .parse()
        .unwrap();
        eprintln!("round {round} ({damaged:?}, seed {seed}): {verdict}; {salvaged} salvaged");
        match damaged {
            Damaged::DataLog => {
                // Three damaged blocks cost a few pages of keys, not all.
                assert!(salvaged > 0, "round {round}: nothing salvaged");
                if verdict != "unopenable" {
                    opened += 1;
                    let named_here: usize = verdict.parse().unwrap();
                    named += usize::from(named_here > 0);
                    // The log read page by page loses no more than the
                    // engine's cut does.
                    assert!(
                        salvaged + named_here >= files.len(),
                        "round {round}: {salvaged} salvaged, {named_here} named of {}",
                        files.len()
                    );
                }
            }
            Damaged::EngineMetadata | Damaged::FullText => {
                assert_eq!(verdict, "0", "round {round}: {damaged:?} must be repaired")
            }
            Damaged::RecordFile => assert_eq!(
                verdict, "1",
                "round {round}: the damaged record's document must be named, and only it"
            ),
        }
    }
    assert!(
        opened >= 1 && named >= 1,
        "data log damage: {opened} stores opened, {named} with damage named"
    );
}

/// Copies the store directory `from` to `to`, as `cp -r` does.
fn copy_store(from: &Path, to: &Path) {
    let copied = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(copied.success());
}

/// Runs the ignored test `name` of this binary in a child process with
/// `env`, under a minute's deadline; it must pass. Returns the last line
/// it printed to standard error that starts with `verdict: `.
fn run_test_helper(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
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

/// Run by the damage campaign in a child process: salvages the damaged
/// store in `EDUDB_DAMAGED_STORE`, which nothing has opened since it was
/// damaged, with [`Db::salvage_store`] (which reads a damaged data log
/// page by page); checks that the copy passes `check` and that every
/// document in it is exactly its file among `EDUDB_DAMAGED_FILES`. Prints
/// `verdict: N`, the documents copied.
#[test]
#[ignore = "run by damage_to_each_of_the_store_files_never_crashes_and_is_repaired_or_named"]
fn salvage_damaged_store() {
    let store = PathBuf::from(std::env::var_os("EDUDB_DAMAGED_STORE").unwrap());
    let files = std::env::var("EDUDB_DAMAGED_FILES").unwrap();
    let to = tempfile::tempdir().unwrap();
    let copy = to.path().join("copy");
    let report = Db::salvage_store(
        store,
        &copy,
        &Default::default(),
        &edudb::NoProgress,
        &edudb::CancelToken::new(),
    )
    .expect("a damaged store is salvaged");
    let copy = open(&copy).unwrap();
    assert!(copy.check().unwrap().damaged.is_empty());
    let mut copied = 0;
    for path in files.lines() {
        let id = Path::new(path).file_stem().unwrap().to_string_lossy();
        match copy.document(&id) {
            Ok(doc) => {
                let text = std::fs::read_to_string(path).unwrap();
                assert_eq!(doc, analyze(&id, text, Format::Markdown).unwrap(), "{id}");
                copied += 1;
            }
            Err(edudb::Error::NoSuchDocument(_)) => {}
            Err(e) => panic!("{id} in the salvaged copy: {e}"),
        }
    }
    assert_eq!(copied, report.documents);
    eprintln!("verdict: {copied}");
}

/// The in-process half of the random-bytes test, run by it in a child
/// process: opens the damaged store in `EDUDB_DAMAGED_STORE` and checks
/// that every file in `EDUDB_DAMAGED_FILES` the report does not name reads
/// back whole or is absent. Prints `verdict: unopenable` or `verdict: N`
/// (the entries named).
#[test]
#[ignore = "run by damage_to_each_of_the_store_files_never_crashes_and_is_repaired_or_named"]
fn verify_damaged_store() {
    let store = PathBuf::from(std::env::var_os("EDUDB_DAMAGED_STORE").unwrap());
    let files = std::env::var("EDUDB_DAMAGED_FILES").unwrap();
    // sled's recovery of damaged files can differ from one open to the
    // next, so the report and the reads it vouches for come from one open.
    let Ok(db) = open(&store) else {
        eprintln!("verdict: unopenable");
        return;
    };
    let report = db.check().expect("check reports damage instead of failing");
    let damaged: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
    // What reads is salvaged into a new store, which must pass check.
    let to = tempfile::tempdir().unwrap();
    let salvaged = db.salvage(
        to.path().join("copy"),
        &edudb::NoProgress,
        &edudb::CancelToken::new(),
    );
    let copy = salvaged.and_then(|_| open(&to.path().join("copy")));
    let copy = match copy {
        Ok(copy) => Some(copy),
        // sled may fail a read it cannot recover from with an I/O error.
        Err(e) if !e.is_user_error() => {
            eprintln!("salvage failed: {e}");
            None
        }
        Err(e) => panic!("salvage: {e}"),
    };
    if let Some(copy) = &copy {
        let checked = copy.check().expect("the salvaged store checks");
        assert!(checked.damaged.is_empty(), "{:?}", checked.damaged);
    }
    for path in files.lines() {
        let id = Path::new(path).file_stem().unwrap().to_string_lossy();
        if damaged.contains(&id.as_ref()) {
            continue;
        }
        let stored = db.document(&id);
        let text = std::fs::read_to_string(path).unwrap();
        let expected = analyze(&id, text, Format::Markdown).unwrap();
        assert!(
            stored.as_ref().is_ok_and(|doc| doc == &expected)
                || matches!(stored, Err(edudb::Error::NoSuchDocument(_))),
            "{id} is not named ({damaged:?}) but reads {:?}",
            stored.map(|_| "another document")
        );
        // Every document that reads whole is in the salvaged store, whole.
        if let (Ok(_), Some(copy)) = (&stored, &copy) {
            let copied = copy.document(&id);
            assert!(
                copied.as_ref().is_ok_and(|doc| doc == &expected),
                "{id} reads whole but was not salvaged whole"
            );
        }
    }
    eprintln!("verdict: {}", damaged.len());
}
