//! The store through the command line: user errors and exit codes, a busy
//! store, the store named by the environment, the demo, a reader that goes
//! away, checks, lost changes and salvage.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::fixtures::*;
use crate::support::{demo_dir, edudb, edudb_with_stdin, stderr, text};

#[test]
fn user_errors_exit_1_with_clear_messages() {
    let (dir, db) = fixture();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["show", "missing"], "no document with id \"missing\""),
        (
            vec!["show", "guide", "4..99"],
            "EDU range 4..99 is outside document \"guide\", whose EDUs are 0..5 (both ends included)",
        ),
        (
            vec!["show", "guide", "5..2"],
            "EDU range 5..2 runs backwards",
        ),
        (vec!["show", "guide", "x..y"], "bad EDU range"),
        (vec!["rm", "missing"], "no document with id"),
        (vec!["search", "AND ("], "search query"),
        (vec!["search", "x", "--limit", "0"], "--limit"),
        (vec!["ingest", "--format", "docx", "x.md"], "unknown format"),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, message) in cases {
        let out = edudb(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, b"fine\nbroken \xc3 here").unwrap();
    let out = edudb(&db, &["ingest", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid UTF-8 at byte 12 (line 2, column 8)")
            && stderr(&out).contains("hint: pass --lossy"),
        "{}",
        stderr(&out)
    );
    let out = edudb(&dir.path().join("nowhere"), &["docs"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no edudb store"), "{}", stderr(&out));
}

#[test]
fn a_second_process_gets_busy_after_its_timeout() {
    let (_dir, db) = fixture();
    let held = edudb::Db::open(&db).unwrap();
    let out = edudb(&db, &["ingest", "-", "--id", "x", "--wait", "0.1"]);
    assert_eq!(out.status.code(), Some(3), "busy, not bad input");
    let pid = format!("is locked by another process (pid {})", std::process::id());
    assert!(
        stderr(&out).contains(&pid)
            && stderr(&out).contains("waited 0.1 s")
            && stderr(&out).contains("--wait SECONDS"),
        "{}",
        stderr(&out)
    );
    drop(held);
    assert!(edudb(&db, &["docs"]).status.success());
}

#[test]
fn a_second_process_waits_for_the_store_within_its_timeout() {
    let (_dir, db) = fixture();
    // A wait too long for a deadline (1e19 s) waits without end.
    for wait in ["60", "1e19"] {
        let held = edudb::Db::open(&db).unwrap();
        let mut waiting = Command::new(env!("CARGO_BIN_EXE_edudb"))
            .arg("--db")
            .arg(&db)
            .args(["docs", "--json"])
            .env("EDUDB_WAIT", wait)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            waiting.try_wait().unwrap().is_none(),
            "wait {wait}: the command ended while the store was held instead of waiting"
        );
        drop(held);
        let out = waiting.wait_with_output().unwrap();
        assert!(out.status.success(), "wait {wait}: {}", stderr(&out));
        let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(docs.as_array().is_some_and(|d| !d.is_empty()), "{docs}");
    }
    for bad in ["-1", "abc"] {
        let out = edudb(&db, &["docs", &format!("--wait={bad}")]);
        assert_eq!(out.status.code(), Some(1), "--wait {bad}");
        assert!(
            stderr(&out).contains("is not a number of seconds"),
            "--wait {bad}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn environment_variable_selects_the_store() {
    let (_dir, db) = fixture();
    let out = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .env("EDUDB_PATH", &db)
        .args(["docs", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(docs.as_array().unwrap().len(), 2);
}

#[test]
fn demo_runs_without_any_setup() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .current_dir(dir.path())
        .args(["demo", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ingested 5 documents"), "{text}");
    assert!(text.contains("2585-unsafe-block-in-unsafe-fn"), "{text}");
    assert!(
        text.contains("OPERATOR") && text.contains("-token budget)"),
        "{text}"
    );
    assert!(
        text.contains("nodes at level 2 of 2585-unsafe-block-in-unsafe-fn"),
        "{text}"
    );
    assert!(text.contains("session rfc-chat (5 turns"), "{text}");
    assert!(text.contains("of 120 tokens"), "{text}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "demo left files behind"
    );
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.txt");
    let sentence = "A sentence long enough to stand as its own unit of discourse. ";
    std::fs::write(&big, sentence.repeat(5_000)).unwrap();
    let db = dir.path().join("store");
    assert!(
        edudb(&db, &["ingest", "-q", big.to_str().unwrap()])
            .status
            .success()
    );
    // More output than a pipe buffers, to a reader that has already left.
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(&db)
        .args(["show", "big"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn check_counts_stored_vectors_and_reindex_the_indexed_ones() {
    let (_dir, db) = fixture();
    let check = text(&edudb(&db, &["check"]));
    assert!(check.contains("EDU vectors stored"), "{check}");
    let reindex = text(&edudb(&db, &["reindex"]));
    assert!(
        reindex.contains("EDU vectors in the graph (heading EDUs are not indexed"),
        "{reindex}"
    );
    // The two differ by exactly the heading EDUs.
    let report = json(&db, &["check"]);
    assert_eq!(report["damaged"], Value::Array(vec![]));
    let stored = report["vectors"]["edus"].as_u64().unwrap();
    let indexed = json(&db, &["reindex"])["vectors"]["edus"].as_u64().unwrap();
    let headings: u64 = ["guide", "sub/page"]
        .iter()
        .map(|doc| {
            let edus = json(&db, &["show", doc]);
            edus.as_array()
                .unwrap()
                .iter()
                .filter(|e| e["kind"] == "heading")
                .count() as u64
        })
        .sum();
    assert!(headings > 0);
    assert_eq!(stored, indexed + headings);
}

#[test]
fn changes_a_restored_older_store_lacks_are_reported_as_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let ingest = |id: &str, text: &str| {
        let out = edudb_with_stdin(&db, &["ingest", "-", "--id", id], text.as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
    };
    // An older copy of the store's sled files, and putting it back under
    // the newer full-text index.
    let copy_store = |name: &str| {
        let copy = dir.path().join(name);
        let copied = Command::new("cp")
            .arg("-r")
            .arg(db.join("sled"))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(copied.success());
        copy
    };
    let restore = |copy: &std::path::Path| {
        std::fs::remove_dir_all(db.join("sled")).unwrap();
        std::fs::rename(copy, db.join("sled")).unwrap();
    };
    ingest("kept", "A document written before the copy was taken.");
    // Removed before the copy: its terms may stay in an index segment, and
    // it must not be taken for a loss.
    ingest("removed", "Otters float on their backs in the kelp.");
    assert!(edudb(&db, &["rm", "removed"]).status.success());
    let copy = copy_store("sled-copy");
    ingest("lost", "Zebras gallop across the savannah at dawn.");
    // The older copy of the store goes back under the newer full-text index.
    restore(&copy);
    let out = edudb(&db, &["docs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("changes after 3 were lost"),
        "{}",
        stderr(&out)
    );
    assert!(text(&out).contains("kept") && !text(&out).contains("lost"));
    // The index was rebuilt from the store: search no longer finds it.
    let out = edudb(&db, &["search", "zebras"]);
    assert!(!text(&out).contains("lost"), "{}", text(&out));
    // But the loss was recorded: every check names the document (exit 2,
    // damage) until it is ingested again or removed.
    let damaged = |db: &std::path::Path| -> Vec<(String, String)> {
        let out = edudb(db, &["check", "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (report["damaged"].as_array().unwrap().iter())
            .map(|d| {
                (
                    d["doc"].as_str().unwrap().to_owned(),
                    d["problem"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    for _ in 0..2 {
        let out = edudb(&db, &["check"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let named = damaged(&db);
        assert!(
            matches!(&named[..], [(doc, problem)] if doc == "lost" && problem.contains("lost to damage") && problem.contains("change 3")),
            "{named:?}"
        );
    }
    // A salvage copies what is kept and names what was lost as left out.
    let salvaged = dir.path().join("salvaged");
    let out = edudb(&db, &["salvage", "--json", salvaged.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["documents"], 1, "{report}");
    let left_out = report["skipped"].as_array().unwrap();
    assert!(
        matches!(&left_out[..], [one] if one["doc"] == "lost" && one["problem"].as_str().unwrap().contains("lost to damage")),
        "{report}"
    );
    ingest("lost", "Zebras gallop across the savannah at dawn.");
    assert!(edudb(&db, &["check"]).status.success());
    // Stored again, its loss is forgotten: removing it later is an
    // ordinary removal, not a loss.
    assert!(edudb(&db, &["rm", "lost"]).status.success());
    assert!(
        edudb(&db, &["check"]).status.success(),
        "{:?}",
        damaged(&db)
    );
    // Another loss, acknowledged by removing the document (once).
    let copy = copy_store("sled-copy-2");
    ingest("gone", "Herons stand still in the shallow river.");
    restore(&copy);
    let out = edudb(&db, &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = format!("{}{}", text(&out), stderr(&out));
    assert!(
        said.contains("gone") && said.contains("lost to damage"),
        "{said}"
    );
    assert!(edudb(&db, &["rm", "gone"]).status.success());
    assert!(edudb(&db, &["check"]).status.success());
    assert_eq!(edudb(&db, &["rm", "gone"]).status.code(), Some(1));

    // A session whose turns and dialogue were all lost is named as a
    // session, and removing the session acknowledges it.
    let copy = copy_store("sled-copy-3");
    let added = edudb(
        &db,
        &["session", "add", "trip", "We fly to Sapporo on Monday."],
    );
    assert!(added.status.success(), "{}", stderr(&added));
    restore(&copy);
    let named = damaged(&db);
    assert!(
        matches!(&named[..], [(doc, problem)] if doc == "session trip" && problem.contains("remove the session")),
        "{named:?}"
    );
    let removed = edudb(&db, &["session", "rm", "trip"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(
        edudb(&db, &["check"]).status.success(),
        "{:?}",
        damaged(&db)
    );
}

#[test]
fn a_store_whose_log_is_damaged_at_its_start_is_salvaged_from_it_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = edudb(&db, &["ingest", "-q", demo_dir().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = |db: &Path| {
        let out = edudb(db, &["docs", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let docs: Value = serde_json::from_slice(&out.stdout).unwrap();
        (docs.as_array().unwrap().iter())
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let ids = listed(&db);
    let sled = db.join("sled");
    // Without a snapshot the engine replays its log from the start, where
    // the damage is: it cannot open the store at all.
    for entry in std::fs::read_dir(&sled).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("snap.")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    let mut log = std::fs::read(sled.join("db")).unwrap();
    for byte in &mut log[100..4196] {
        *byte ^= 0x5a;
    }
    std::fs::write(sled.join("db"), log).unwrap();
    let copy = dir.path().join("untouched");
    assert!(
        Command::new("cp")
            .arg("-r")
            .arg(&db)
            .arg(&copy)
            .status()
            .unwrap()
            .success()
    );
    // The engine cuts its log short at the damage, losing every document
    // (`check` names them), or cannot open it at all; never a crash.
    let out = edudb(&db, &["check"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    // Salvage before any open reads the log without the engine: every
    // document, whole.
    let salvaged = dir.path().join("salvaged");
    let out = edudb(&copy, &["salvage", salvaged.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text(&out).contains("read page by page"), "{}", text(&out));
    assert_eq!(listed(&salvaged), ids);
    assert!(edudb(&salvaged, &["check"]).status.success());
    // The scratch store it was read into is gone.
    let left: Vec<_> = std::fs::read_dir(&copy)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("salvage-scratch"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A directory that is no store is refused as one, and left as it was.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "not a store").unwrap();
    let out = edudb(&plain, &["salvage", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 1);
}
