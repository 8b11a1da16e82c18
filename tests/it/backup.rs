//! Online backup: a copy that holds every document, session and piece of
//! metadata, checks clean, and is consistent while writes go on: the
//! copy is the store as it was after some prefix of the writes made
//! during the backup, never a mix.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use edudb::memory::Placement;
use edudb::{CancelToken, Db, IngestOptions, Metadata, NoProgress, Role, TurnInput};
use serde_json::json;

use crate::support::{edudb, ingest_rfcs, stderr, store};

#[test]
fn a_backup_holds_every_document_session_and_metadata_and_checks_clean() {
    let (dir, db) = store();
    ingest_rfcs(&db, 6);
    let first = db.documents().unwrap()[0].id.clone();
    db.update_metadata(
        &first,
        &[("team".into(), edudb::MetaValue::text("lang".into()))],
        &[],
    )
    .unwrap();
    for text in [
        "We fly to Sapporo on Monday.",
        "Then the train to Otaru.",
        "The ferry is at noon.",
    ] {
        db.append_turn("trip", Role::User, text, Placement::Auto)
            .unwrap();
    }
    db.forget_turn("trip", 1).unwrap();
    let to = dir.path().join("copy");
    let report = db.backup(&to, &NoProgress, &CancelToken::new()).unwrap();
    assert_eq!((report.documents, report.sessions), (6, 1));
    assert!(report.skipped.is_empty() && report.bytes > 0 && report.path == to);
    assert!(!dir.path().join("copy.partial").exists());

    let copy = Db::open(&to).unwrap();
    assert!(copy.check().unwrap().damaged.is_empty());
    let ids = |db: &Db| {
        db.documents()
            .unwrap()
            .into_iter()
            .map(|d| d.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&copy), ids(&db));
    for id in ids(&db) {
        let (a, b) = (db.document(&id).unwrap(), copy.document(&id).unwrap());
        assert_eq!((a.text, a.edus, a.tree), (b.text, b.edus, b.tree), "{id}");
        assert_eq!(
            db.metadata(&id).unwrap(),
            copy.metadata(&id).unwrap(),
            "{id}"
        );
    }
    assert_eq!(
        copy.metadata(&first).unwrap().to_json(),
        json!({"team": "lang"})
    );
    assert_eq!(copy.dialogue("trip").unwrap(), db.dialogue("trip").unwrap());
    let hits = |db: &Db| {
        (db.search("unsafe code", 5).unwrap().into_iter())
            .map(|hit| (hit.doc, hit.edus))
            .collect::<Vec<_>>()
    };
    assert_eq!(hits(&copy), hits(&db));

    // A cancelled backup leaves nothing behind.
    let cancel = CancelToken::new();
    cancel.cancel();
    let stopped = dir.path().join("stopped");
    let err = db.backup(&stopped, &NoProgress, &cancel).unwrap_err();
    assert!(matches!(err, edudb::Error::Cancelled), "{err}");
    assert!(!stopped.exists() && !dir.path().join("stopped.partial").exists());

    // A destination that holds something, or lies inside the store, is
    // refused before anything is written.
    let refused = db
        .backup(&to, &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(refused.to_string().contains("not empty"), "{refused}");
    let inside = db.path().join("inner");
    let refused = db
        .backup(&inside, &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(
        refused.to_string().contains("outside the store"),
        "{refused}"
    );
    assert!(!inside.exists());
}

/// The kinds of the stream test's writes, by the write's number modulo 5:
/// a new document `w{i}`, a new version of `r` (which clears its
/// metadata), a turn, `r`'s metadata set to `v = i`, and `v` unset.
const KINDS: usize = 5;

/// The stream test's store after its first `k` writes: the documents
/// `w0…` added, the version of `r` last written, the turns appended and
/// `r`'s metadata `v`.
type State = (Vec<String>, Option<usize>, usize, Option<usize>);

/// What the writer of the stream test has done after its first `k` writes.
fn after(k: usize) -> State {
    let written: Vec<usize> = (0..k).collect();
    let added = (written.iter())
        .filter(|i| *i % KINDS == 0)
        .map(|i| format!("w{i}"))
        .collect();
    let version = written.iter().rev().find(|i| *i % KINDS == 1).copied();
    let turns = written.iter().filter(|i| *i % KINDS == 2).count();
    let v = (written.iter().rev())
        .find(|i| [1, 3, 4].contains(&(*i % KINDS)))
        .filter(|i| *i % KINDS == 3)
        .copied();
    (added, version, turns, v)
}

#[test]
fn a_backup_during_a_stream_of_writes_is_the_store_after_a_prefix_of_them() {
    let (dir, db) = store();
    ingest_rfcs(&db, 30);
    let acknowledged = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let to = dir.path().join("copy");
    let (before, report, after_backup) = std::thread::scope(|scope| {
        scope.spawn(|| {
            let markdown = || IngestOptions {
                format: Some("markdown".parse().unwrap()),
                ..IngestOptions::default()
            };
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                match i % KINDS {
                    0 => db
                        .ingest_bytes(
                            &format!("w{i}"),
                            format!("# W{i}\n\nWrite {i}.\n").into(),
                            markdown(),
                        )
                        .map(drop),
                    1 => db
                        .ingest_bytes(
                            "r",
                            format!("# R\n\nVersion {i} of r.\n").into(),
                            markdown(),
                        )
                        .map(drop),
                    3 => db
                        .update_metadata(
                            "r",
                            &[("v".into(), edudb::MetaValue::Number(i as f64))],
                            &[],
                        )
                        .map(drop),
                    4 => db.update_metadata("r", &[], &["v".into()]).map(drop),
                    _ => db
                        .append_turns(
                            "stream",
                            &[TurnInput {
                                metadata: Metadata::from_json(&json!({"write": i})).unwrap(),
                                ..TurnInput::new(Role::User, format!("Turn of write {i}."))
                            }],
                            &NoProgress,
                            &CancelToken::new(),
                        )
                        .map(drop),
                }
                .unwrap();
                i += 1;
                acknowledged.store(i, Ordering::SeqCst);
            }
        });
        while acknowledged.load(Ordering::SeqCst) < 10 {
            std::thread::yield_now();
        }
        let before = acknowledged.load(Ordering::SeqCst);
        let report = db.backup(&to, &NoProgress, &CancelToken::new()).unwrap();
        let after_backup = acknowledged.load(Ordering::SeqCst);
        // Let the writer go on a while after the backup, then stop it.
        while acknowledged.load(Ordering::SeqCst) < after_backup + 5 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
        (before, report, after_backup)
    });
    let copy = Db::open(&to).unwrap();
    assert!(copy.check().unwrap().damaged.is_empty());
    let added: Vec<String> = {
        let mut ids: Vec<(usize, String)> = (copy.documents().unwrap().into_iter())
            .filter_map(|d| Some((d.id.strip_prefix('w')?.parse().ok()?, d.id)))
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, id)| id).collect()
    };
    let version = (copy.document("r").ok()).map(|d| {
        let text = d.text;
        let number = text
            .split("Version ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        number.parse::<usize>().unwrap()
    });
    let turns = copy.dialogue("stream").map_or(0, |d| d.turns.len());
    let v = (copy.metadata("r").ok())
        .and_then(|m| m.get("v").map(|v| v.to_json().as_u64().unwrap() as usize));
    let state = (added, version, turns, v);
    // A write finished as the backup ended may not be counted yet.
    let prefix = (before..=after_backup + 1).find(|&k| after(k) == state);
    assert!(
        prefix.is_some(),
        "the copy {state:?} is the store after no prefix of {before}..={after_backup} writes"
    );
    assert!(report.caught_up > 0 || before == after_backup, "{report:?}");
    // Every turn copied keeps its metadata.
    if let Ok(dialogue) = copy.dialogue("stream") {
        for turn in dialogue.turns {
            assert!(copy.metadata(&turn.doc).unwrap().get("write").is_some());
        }
    }
}

#[test]
fn the_command_line_backs_up_a_served_store_through_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let out = edudb(
        &path,
        &[
            "ingest",
            "-q",
            crate::support::rfcs()
                .join("0002-rfc-process.md")
                .to_str()
                .unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let (child, _address, socket) = crate::support::spawn_server(&path);
    let to = dir.path().join("copy");
    let out = edudb(&path, &["backup", to.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["documents"], 1);
    assert_eq!(report["path"], to.to_str().unwrap());
    // The server kept the store the whole time, and still does.
    let out = edudb(&path, &["docs", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    crate::support::stop_server(child, &socket);
    let out = edudb(&to, &["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn vacuum_gives_back_the_space_of_removed_documents_and_keeps_the_rest() {
    let (dir, db) = store();
    ingest_rfcs(&db, 40);
    let ids: Vec<String> = db.documents().unwrap().into_iter().map(|d| d.id).collect();
    for id in ids.iter().step_by(2) {
        db.remove(id).unwrap();
    }
    db.append_turn(
        "trip",
        Role::User,
        "We fly to Sapporo on Monday.",
        Placement::Auto,
    )
    .unwrap();
    let before: Vec<(String, String)> = (db.documents().unwrap().into_iter())
        .map(|d| (d.id.clone(), db.document(&d.id).unwrap().text))
        .collect();
    let path = db.path().to_owned();
    // The store must be closed: held open, it is busy.
    let busy =
        Db::vacuum(&path, &Default::default(), &NoProgress, &CancelToken::new()).unwrap_err();
    assert!(busy.is_busy(), "{busy}");
    drop(db);
    let report = Db::vacuum(&path, &Default::default(), &NoProgress, &CancelToken::new()).unwrap();
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    assert_eq!((report.documents, report.sessions), (before.len(), 1));
    let db = Db::open(&path).unwrap();
    assert!(db.check().unwrap().damaged.is_empty());
    let after: Vec<(String, String)> = (db.documents().unwrap().into_iter())
        .map(|d| (d.id.clone(), db.document(&d.id).unwrap().text))
        .collect();
    assert_eq!(after, before);
    assert_eq!(db.dialogue("trip").unwrap().turns.len(), 1);
    only_the_store_is_left(dir.path());
}

#[test]
fn the_command_line_vacuums_a_served_store_through_its_server_while_a_reader_keeps_reading() {
    let (dir, db) = store();
    ingest_rfcs(&db, 20);
    let ids: Vec<String> = db.documents().unwrap().into_iter().map(|d| d.id).collect();
    for id in ids.iter().step_by(2) {
        db.remove(id).unwrap();
    }
    let path = db.path().to_owned();
    drop(db);
    let (child, _address, socket) = crate::support::spawn_server(&path);
    // Every hit's place and text, in order of place: the vacuum drops the
    // removed documents' deleted entries, so scores (and their order)
    // may change, but not what matches.
    let search = |path: &std::path::Path| {
        let out = edudb(
            path,
            &["search", "lifetime borrow", "--limit", "10000", "--json"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let hits: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let mut places: Vec<String> = hits
            .iter()
            .map(|h| format!("{} {} {} {}", h["doc"], h["node"], h["edus"], h["text"]))
            .collect();
        places.sort();
        places
    };
    let before = search(&path);
    assert!(before.len() >= 5, "{before:?}");
    // A reader goes on through the vacuum: its searches wait for it, none
    // fails, and each finds what it found before.
    let stop = AtomicBool::new(false);
    let answered = AtomicUsize::new(0);
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(search(&path), before);
                answered.fetch_add(1, Ordering::Relaxed);
            }
        });
        while answered.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let out = edudb(&path, &["vacuum", "--json"]);
        stop.store(true, Ordering::Relaxed);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    });
    assert!(
        report["bytes_after"].as_u64() < report["bytes_before"].as_u64(),
        "{report}"
    );
    assert_eq!(report["documents"], 10, "{report}");
    // The server holds the vacuumed store and serves it.
    assert_eq!(search(&path), before);
    let out = edudb(&path, &["docs", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(10), "{listed}");
    crate::support::stop_server(child, &socket);
    let out = edudb(&path, &["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    only_the_store_is_left(dir.path());
}

#[test]
fn a_backup_never_removes_the_store_or_what_a_backup_did_not_leave() {
    let dir = tempfile::tempdir().unwrap();
    // A store whose name is another path's `.partial`.
    let db = Db::create(dir.path().join("data.partial")).unwrap();
    ingest_rfcs(&db, 2);
    let refused = db
        .backup(dir.path().join("data"), &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(
        refused.to_string().contains("outside the store"),
        "{refused}"
    );
    assert_eq!(db.documents().unwrap().len(), 2);
    // A folder of the user's in the way is refused, not removed.
    let theirs = dir.path().join("copy.partial");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    let refused = db
        .backup(dir.path().join("copy"), &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(refused.to_string().contains("in the way"), "{refused}");
    assert!(theirs.join("notes.txt").exists());
    // A file where the copy would go.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let refused = db
        .backup(dir.path().join("file"), &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(refused.to_string().contains("is a file"), "{refused}");
}

/// Checks that `dir` holds its store, `db`, and nothing beside it (no copy,
/// no leftover of a vacuum).
fn only_the_store_is_left(dir: &std::path::Path) {
    let beside: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        beside,
        [std::ffi::OsString::from("db")],
        "only the store is left"
    );
}

/// Writes run on the store while the backup's first pass (which holds no
/// writer) goes on: each once that pass has copied the item it names.
type Writes<'a> = Vec<(String, Box<dyn FnOnce() + Send + 'a>)>;

/// A [`edudb::Progress`] that runs [`Writes`].
struct WritesDuringFirstPass<'a>(std::sync::Mutex<Writes<'a>>);

impl edudb::Progress for WritesDuringFirstPass<'_> {
    fn advance(&self, _units: u64, item: &str) {
        let due: Writes = {
            let mut writes = self.0.lock().unwrap();
            let (due, later) = writes.drain(..).partition(|(after, _)| after == item);
            *writes = later;
            due
        };
        for (_, writes) in due {
            writes();
        }
    }
}

#[test]
fn a_session_that_only_gained_turns_during_a_backup_gets_just_those_and_any_other_change_is_copied_whole()
 {
    let (dir, db) = store();
    ingest_rfcs(&db, 3);
    let say = |session: &str, text: &str| {
        db.append_turn(session, Role::User, text, Placement::Auto)
            .unwrap();
    };
    for session in ["long", "forgetful", "again"] {
        for i in 0..4 {
            say(
                session,
                &format!("Turn {i} of {session}, about the ferry to Otaru."),
            );
        }
    }
    // Each record of a copy is written once: a change of its log each.
    let records = |copy: &Db| {
        let stats = copy.stats().unwrap();
        stats.documents + stats.turns
    };
    let plain = db
        .backup(dir.path().join("plain"), &NoProgress, &CancelToken::new())
        .unwrap();
    let copy = Db::open(dir.path().join("plain")).unwrap();
    assert_eq!(
        copy.stats().unwrap().last_change,
        records(&copy),
        "{plain:?}"
    );
    drop(copy);

    // Documents are copied first, then sessions in id order ("long" last).
    let first_document = db.documents().unwrap()[0].id.clone();
    let hook = WritesDuringFirstPass(std::sync::Mutex::new(vec![
        (
            first_document,
            Box::new(|| say("long", "Said while the documents were copied.")),
        ),
        (
            "long".to_owned(),
            Box::new(|| {
                say("long", "A turn said once the sessions were copied.");
                say("long", "And one more.");
                db.forget_turn("forgetful", 1).unwrap();
                db.remove_session("again").unwrap();
                for i in 0..5 {
                    say("again", &format!("Begun again: turn {i}, about trains."));
                }
            }),
        ),
    ]));
    let to = dir.path().join("copy");
    let report = db.backup(&to, &hook, &CancelToken::new()).unwrap();
    assert_eq!(report.caught_up, 3, "{report:?}");
    let copy = Db::open(&to).unwrap();
    assert!(copy.check().unwrap().damaged.is_empty());
    for session in ["long", "forgetful", "again"] {
        let dialogue = db.dialogue(session).unwrap();
        assert_eq!(copy.dialogue(session).unwrap(), dialogue, "{session}");
        for turn in dialogue.turns.iter().filter(|t| !t.is_forgotten()) {
            let (a, b) = (
                db.document(&turn.doc).unwrap(),
                copy.document(&turn.doc).unwrap(),
            );
            assert_eq!((a.text, a.edus), (b.text, b.edus), "{}", turn.doc);
        }
    }
    assert_eq!(copy.dialogue("long").unwrap().turns.len(), 7);
    // "long" got its two turns said after it was read alone (the one said
    // before is in its first copy); "forgetful" and "again" were removed
    // from the copy (a change per turn document) and copied whole.
    let first_pass = 3 + 13;
    let removed = 4 + 4;
    let written_again = 3 + 5;
    assert_eq!(
        copy.stats().unwrap().last_change,
        first_pass + 2 + removed + written_again,
        "{report:?}"
    );
}
