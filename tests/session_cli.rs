//! End-to-end tests of `edudb session add/show/context/ls/rm`: JSON
//! shapes, text output, exit codes and error messages.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn edudb(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

fn json(db: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = edudb(db, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn session_add_show_context_ls_rm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let first = json(
        &db,
        &[
            "session",
            "add",
            "trip",
            "We plan a winter trip to Hokkaido with our child.",
        ],
    );
    assert_eq!(first["turn"], 0);
    assert_eq!(first["doc"], "@session/trip/000000");
    assert_eq!(first["role"], "user");
    assert_eq!(first["decision"]["topic"], "first");
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "branch", "decision", "doc", "edus", "parent", "role", "session", "summary", "tokens",
            "topic", "turn"
        ]
    );
    let second = json(
        &db,
        &[
            "session",
            "add",
            "trip",
            "--role",
            "assistant",
            "--continue",
            "Sapporo hosts a snow festival in February.",
        ],
    );
    assert_eq!(
        (second["parent"].as_u64(), second["role"].as_str()),
        (Some(0), Some("assistant"))
    );
    // Text from standard input, a new topic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_edudb"))
        .arg("--db")
        .arg(&db)
        .args(["session", "add", "trip", "--new-topic", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Which Python library parses JSON fastest?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text(&out).contains("turn 2 (user) → topic 1"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("decision: topic new"), "{}", text(&out));
    let fork = json(
        &db,
        &["session", "add", "trip", "--fork", "0", "Or Okinawa?"],
    );
    assert_eq!(
        (fork["parent"].as_u64(), fork["topic"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(fork["decision"]["branch"], "fork");

    // show: JSON tree and the box-drawn one.
    let view = json(&db, &["session", "show", "trip"]);
    assert_eq!(view["turns"], 4);
    assert_eq!(view["current"], 3);
    assert_eq!(view["topics"].as_array().unwrap().len(), 2);
    let branches = view["topics"][0]["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 2);
    assert_eq!(branches[1]["fork"], 0);
    assert_eq!(branches[1]["turns"][0]["current"], true);
    let summary = &branches[0]["turns"][1]["summary"];
    assert_eq!(
        summary["text"],
        "Sapporo hosts a snow festival in February."
    );
    assert_eq!(summary["bytes"], serde_json::json!([0, 42]));
    let out = edudb(&db, &["session", "show", "trip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = text(&out);
    assert!(
        shown.starts_with("session trip (4 turns, 2 topics"),
        "{shown}"
    );
    assert!(shown.contains("├── topic 0 (active)"), "{shown}");
    assert!(
        shown.contains("└── branch 2 forks at #0 (active)"),
        "{shown}"
    );
    assert!(
        shown.contains("#1 assistant [0-0] 0..42 Sapporo hosts"),
        "{shown}"
    );
    assert!(
        shown.contains("#3 user [0-0] 0..11 Or Okinawa?  ◀ current"),
        "{shown}"
    );

    // context: JSON contract and text.
    let context = json(&db, &["session", "context", "trip", "--budget", "1000"]);
    assert!(context["tokens_used"].as_u64().unwrap() <= 1000);
    // One-EDU turns: each summary is its whole turn, so no saving here
    // (tests/memory.rs measures the saving on longer turns).
    assert!(context["tokens_used"].as_u64() <= context["history_tokens"].as_u64());
    let kinds: Vec<&str> = context["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"topic_summary") && kinds.contains(&"branch_summary"),
        "{kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "path_turn").count(), 2);
    let tight = json(&db, &["session", "context", "trip", "--budget", "5"]);
    assert!(tight["tokens_used"].as_u64().unwrap() <= 5);
    let out = edudb(&db, &["session", "context", "trip", "--budget", "1000"]);
    assert!(
        text(&out).contains("── turn #3 user @session/trip/000003 [0-0]"),
        "{}",
        text(&out)
    );

    // ls, and the turns stay out of `docs`.
    json(&db, &["session", "add", "notes", "A second session."]);
    let list = json(&db, &["session", "ls"]);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["notes", "trip"]);
    assert_eq!(list[1]["turns"], 4);
    assert_eq!(json(&db, &["docs"]), serde_json::json!([]));
    let query = json(
        &db,
        &[
            "query",
            "SELECT FROM session('trip') SEED BM25('snow festival') LIMIT 3",
        ],
    );
    assert!(
        query["results"][0]["doc"]
            .as_str()
            .unwrap()
            .starts_with("@session/trip/")
    );
    assert_eq!(json(&db, &["check"])["sessions"], 2);

    // rm, and errors: exit 1 with a message saying what.
    let out = edudb(&db, &["rm", "@session/trip/000001"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("turns are removed with their session"),
        "{}",
        stderr(&out)
    );
    assert_eq!(json(&db, &["session", "rm", "trip"])["removed"], "trip");
    let out = edudb(&db, &["session", "show", "trip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no session with id \"trip\""),
        "{}",
        stderr(&out)
    );
    let out = edudb(&db, &["session", "add", "notes", "--topic", "5", "More."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has no topic 5"), "{}", stderr(&out));
    let out = edudb(&db, &["session", "add", "bad/id", "Text."]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid session id"),
        "{}",
        stderr(&out)
    );
    let out = edudb(&db, &["session", "add", "notes", "  "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("empty"), "{}", stderr(&out));
    let out = edudb(
        &db,
        &["session", "add", "notes", "--fork", "0", "--new-topic", "x"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "conflicting placements are a usage error"
    );
    let out = edudb(&db, &["session", "add", "notes", "--role", "robot", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&db, &["session", "ls"]).as_array().unwrap().len(), 1);
    assert_eq!(json(&db, &["check"])["sessions"], 1);
}

#[test]
fn bad_input_creates_no_store_and_hyphen_text_is_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new");
    // A bad id or blank text fails before the store is created.
    for args in [
        ["session", "add", "bad/id", "x"],
        ["session", "add", "ok", "   "],
    ] {
        let out = edudb(&db, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
    // Text starting with '-' is the turn's text, not a flag.
    let turn = json(&db, &["session", "add", "s", "-5 °C tonight?"]);
    assert_eq!(turn["turn"], 0);
    let view = json(&db, &["session", "show", "s"]);
    assert_eq!(
        view["topics"][0]["branches"][0]["turns"][0]["summary"]["text"],
        "-5 °C tonight?"
    );
    // The receipt says the asked placement in words, not JSON.
    let out = edudb(&db, &["session", "add", "s", "--fork", "0", "Or colder?"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let receipt = text(&out);
    assert!(receipt.contains("(asked fork at turn 0;"), "{receipt}");
    assert!(!receipt.contains('{'), "{receipt}");
}

#[test]
fn auto_placement_and_bulleted_context_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for turn in [
        "- apples\n- pears\n- plums, and a long list item about which fruit keeps best in a cold cellar",
        "- the apples keep longest\n- the pears next\n- plums soften within a week in the cellar",
        "Which Python library parses JSON fastest?",
    ] {
        let out = edudb(&db, &["session", "add", "fruit", turn]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(text(&out).contains("(asked auto;"), "{}", text(&out));
    }
    let receipt = json(&db, &["session", "add", "fruit", "- and the plums?"]);
    assert_eq!(receipt["decision"]["requested"], "auto");
    assert_eq!(json(&db, &["session", "show", "fruit"])["turns"], 4);
    // Recount the returned text: never over its stated tokens or the budget.
    for budget in [3u64, 10, 20, 30, 45, 60, 1000] {
        let context = json(
            &db,
            &[
                "session",
                "context",
                "fruit",
                "--budget",
                &budget.to_string(),
            ],
        );
        let mut total = 0;
        for item in context["items"].as_array().unwrap() {
            let tokens = u64::from(edudb::tokens::count(item["text"].as_str().unwrap()));
            assert!(tokens <= item["tokens"].as_u64().unwrap(), "{item}");
            total += tokens;
        }
        assert!(total <= budget, "{budget}: {context}");
    }
    assert_eq!(json(&db, &["check"])["sessions"], 1);
}
