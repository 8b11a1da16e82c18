//! Damage to each of the store's files in turn: no panic, no hang, every
//! command works or names the damage, and salvage recovers every document
//! whose own records are intact.

use edudb::ingest::analyze;
use edudb::{Db, Format};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

use crate::harness::*;
use crate::support;

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
/// documents, at least as many as the engine keeps less one (a known gap,
/// below).
#[test]
fn damage_to_each_of_the_store_files_never_crashes_and_is_repaired_or_named() {
    let seed = crash_seed();
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
    let mut rng = StdRng::seed_from_u64(seed);
    let outcomes: Vec<Option<bool>> = (0..ROUNDS)
        .map(|round| damage_round(round, seed, &mut rng, dir.path(), &pristine, &files))
        .collect();
    let opened = outcomes.iter().flatten().count();
    let named = outcomes.iter().flatten().filter(|named| **named).count();
    assert!(
        opened >= 1 && named >= 1,
        "data log damage: {opened} stores opened, {named} with damage named"
    );
}

/// Rounds of the damage campaign, each damaging one kind of file in turn.
const ROUNDS: usize = 32;

/// One round of the damage campaign: a copy of `pristine` in `dir`,
/// damaged as the round's kind is (with randomness from `rng`, one
/// stream over the rounds; `seed` is its seed, for the log), every command
/// run on it, its check's report, reads and salvage
/// checked. For data-log damage, whether the store opened and, if so,
/// whether damage was named; `None` otherwise.
fn damage_round(
    round: usize,
    seed: u64,
    rng: &mut StdRng,
    dir: &Path,
    pristine: &Path,
    files: &[String],
) -> Option<bool> {
    let damaged = Damaged::ALL[round % Damaged::ALL.len()];
    let store = dir.join(format!("round{round}"));
    copy_store(pristine, &store);
    damaged.apply(&store, rng);
    // A copy no command has opened, for salvage: an open lets the
    // engine cut a damaged log short.
    let untouched = dir.join(format!("round{round}-untouched"));
    copy_store(&store, &untouched);
    let file_list = files.join("\n");
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
        // Builds the vector graph, as the first vector search did
        // before searches stopped waiting for it.
        &["reindex"],
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
        "damage::verify_damaged_store",
        &[
            ("EDUDB_DAMAGED_STORE", store.as_os_str()),
            ("EDUDB_DAMAGED_FILES", std::ffi::OsStr::new(&file_list)),
        ],
    );
    // Salvaged before any open, every document copied is whole.
    let salvaged: usize = run_test_helper(
        "damage::salvage_damaged_store",
        &[
            ("EDUDB_DAMAGED_STORE", untouched.as_os_str()),
            ("EDUDB_DAMAGED_FILES", std::ffi::OsStr::new(&file_list)),
        ],
    )
    .parse()
    .unwrap();
    eprintln!("round {round} ({damaged:?}, seed {seed}): {verdict}; {salvaged} salvaged");
    match damaged {
        Damaged::DataLog => {
            // Three damaged blocks cost a few pages of keys, not all.
            assert!(salvaged > 0, "round {round}: nothing salvaged");
            if verdict == "unopenable" {
                return None;
            }
            let named_here: usize = verdict.parse().unwrap();
            // The log read page by page loses no more than the engine's
            // cut does, but for one document: on some runs (sled's layout
            // varies with timing; 2 rounds in 9 runs on 2026-12-02) the
            // page-by-page read loses one document that sled's open,
            // recovering from its snapshot, keeps whole. A known gap of
            // salvage (issue 54's storage-faults work), not yet found.
            assert!(
                salvaged + named_here + 1 >= files.len(),
                "round {round}: {salvaged} salvaged, {named_here} named of {}",
                files.len()
            );
            Some(named_here > 0)
        }
        Damaged::EngineMetadata | Damaged::FullText => {
            assert_eq!(verdict, "0", "round {round}: {damaged:?} must be repaired");
            None
        }
        Damaged::RecordFile => {
            assert_eq!(
                verdict, "1",
                "round {round}: the damaged record's document must be named, and only it"
            );
            None
        }
    }
}

/// Run by the damage campaign in a child process: salvages the damaged
/// store in `EDUDB_DAMAGED_STORE`, which nothing has opened since it was
/// damaged, with [`Db::salvage_store`] (which reads a damaged data log
/// page by page), naming the embedder it was built with; checks that the copy passes `check` and that every
/// document in it is exactly its file among `EDUDB_DAMAGED_FILES`. Prints
/// `verdict: N`, the documents copied.
#[test]
#[ignore = "run by damage_to_each_of_the_store_files_never_crashes_and_is_repaired_or_named"]
fn salvage_damaged_store() {
    let store = PathBuf::from(std::env::var_os("EDUDB_DAMAGED_STORE").unwrap());
    let files = std::env::var("EDUDB_DAMAGED_FILES").unwrap();
    let to = tempfile::tempdir().unwrap();
    let copy = to.path().join("copy");
    // Named as a salvage's caller would: damage may take the store's
    // record of it.
    let built_with = edudb::OpenOptions {
        embedder: Some(edudb::EmbedderConfig::default()),
        ..Default::default()
    };
    let report = Db::salvage_store(
        store,
        &copy,
        &built_with,
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
    let db = match open(&store) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("the damaged store does not open: {e}");
            eprintln!("verdict: unopenable");
            return;
        }
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
