//! `edudb session add/show/context/ls/rm`: JSON shapes, text output, exit
//! codes and error messages.

use super::fixtures::*;
use crate::support::{edudb, edudb_with_stdin, stderr, text};

#[test]
fn session_add_jsonl_and_times_then_a_context_for_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let lines = [
        r#"{"text": "My sister adopted a grey cat called Biscuit.", "at": "2023-05-18T13:47:00Z"}"#,
        r#"{"role": "assistant", "text": "What a lovely name for a cat!", "placement": "continue"}"#,
        "",
        r#"{"text": "Which trains run from Sapporo to Otaru?", "at": "2023-06-01", "placement": "new_topic"}"#,
    ];
    let path = dir.path().join("turns.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let receipts = json(
        &db,
        &["session", "add", "s", "--jsonl", path.to_str().unwrap()],
    );
    let receipts = receipts.as_array().unwrap();
    assert_eq!(receipts.len(), 3);
    assert_eq!(receipts[0]["at"], "2023-05-18T13:47:00Z");
    assert_eq!(receipts[1]["at"], serde_json::Value::Null);
    assert_eq!(
        (receipts[1]["role"].as_str(), receipts[1]["parent"].as_u64()),
        (Some("assistant"), Some(0))
    );
    assert_eq!(receipts[2]["at"], "2023-06-01T00:00:00Z");
    assert_eq!(receipts[2]["topic"], 1);
    // One turn with a time; a bad time is refused before anything is written.
    let one = json(
        &db,
        &[
            "session",
            "add",
            "s",
            "--at",
            "2023-06-02T08:00:00+02:00",
            "And back?",
        ],
    );
    assert_eq!(one["at"], "2023-06-02T06:00:00Z");
    let out = edudb(&db, &["session", "add", "s", "--at", "yesterday", "When?"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"yesterday\" is not a time"),
        "{}",
        stderr(&out)
    );
    // A bad line names its file and line; nothing of the file is written.
    std::fs::write(&path, format!("{}\n{{\"txt\": \"typo\"}}\n", lines[0])).unwrap();
    let out = edudb(
        &db,
        &["session", "add", "s", "--jsonl", path.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("turns.jsonl:2: not a turn object"),
        "{}",
        stderr(&out)
    );

    assert_eq!(json(&db, &["session", "ls"])[0]["turns"], 4);
    // The context for a query finds the old turn and its reply, with dates.
    let context = json(
        &db,
        &[
            "session",
            "context",
            "s",
            "--budget",
            "60",
            "--query",
            "What is the cat called?",
        ],
    );
    let items = context["items"].as_array().unwrap();
    let turns: Vec<u64> = items.iter().map(|i| i["turn"].as_u64().unwrap()).collect();
    assert!(turns.contains(&0) && turns.contains(&1), "{context}");
    let cat = items.iter().find(|i| i["turn"] == 0).unwrap();
    assert_eq!(
        (cat["kind"].as_str(), cat["at"].as_str()),
        (Some("relevant_turn"), Some("2023-05-18T13:47:00Z"))
    );
    assert!(context["tokens_used"].as_u64().unwrap() <= 60);
    let view = json(&db, &["session", "show", "s"]);
    let first = &view["topics"][0]["branches"][0]["turns"][0];
    assert_eq!(first["at"], "2023-05-18T13:47:00Z");
    let out = edudb(&db, &["session", "show", "s"]);
    assert!(
        text(&out).contains("#0 user 2023-05-18T13:47:00Z [0-0]"),
        "{}",
        text(&out)
    );
    let out = edudb(
        &db,
        &[
            "session", "context", "s", "--budget", "60", "--query", "cat",
        ],
    );
    assert!(
        text(&out).contains("── turn #0 user (relevance ")
            && text(&out).contains(" 2023-05-18T13:47:00Z @session/s/000000"),
        "{}",
        text(&out)
    );
    // Each bad line says which, through standard input too; an empty input
    // is an error; none of it writes anything.
    for (input, wanted) in [
        (
            format!(
                "{}\n\n{{\"text\": \"x\", \"at\": \"2023-05-18T13:47\"}}",
                lines[0]
            ),
            "<stdin>:3: \"2023-05-18T13:47\" is not a time",
        ),
        (
            format!("{}\n{{\"text\": \"   \"}}", lines[0]),
            "<stdin>:2: ",
        ),
        ("\n\n".to_owned(), "<stdin>:0: no turns in it"),
    ] {
        let out = edudb_with_stdin(
            &db,
            &["session", "add", "s", "--jsonl", "-"],
            input.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(wanted), "{wanted}: {}", stderr(&out));
    }
    // Explicit placements by line, one naming a turn of the same file.
    let placed = "{\"text\": \"Back to Biscuit the cat.\", \"placement\": {\"topic\": 0}}\n{\"text\": \"Or a second cat?\", \"placement\": {\"fork\": 4}}\n";
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "s", "--jsonl", "-", "--json"],
        placed.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let receipts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (receipts[0]["turn"].as_u64(), receipts[0]["topic"].as_u64()),
        (Some(4), Some(0))
    );
    assert_eq!(
        (
            receipts[1]["parent"].as_u64(),
            receipts[1]["decision"]["branch"].as_str()
        ),
        (Some(4), Some("fork"))
    );
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "s", "--jsonl", "-"],
        placed.as_bytes(),
    );
    assert!(
        text(&out).starts_with("appended 2 turns to session s (turns 6-7, in 1 topics)"),
        "{}",
        text(&out)
    );
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
    assert_eq!(
        sorted_keys(&first),
        [
            "at", "branch", "decision", "doc", "edus", "parent", "role", "session", "summary",
            "tokens", "topic", "turn"
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
    let out = edudb_with_stdin(
        &db,
        &["session", "add", "trip", "--new-topic", "-"],
        b"Which Python library parses JSON fastest?\n",
    );
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
    // (tests/it/memory/context.rs measures the saving on longer turns).
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
    assert!(
        stderr(&out).contains("session forget SESSION TURN"),
        "{}",
        stderr(&out)
    );
    let forgot = json(&db, &["session", "forget", "trip", "1"]);
    assert_eq!(
        forgot,
        serde_json::json!({"session": "trip", "forgotten": 1})
    );
    let show = edudb(&db, &["session", "show", "trip"]);
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("#1 "),
        "{show:?}"
    );
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("(forgotten)"),
        "{show:?}"
    );
    assert_eq!(json(&db, &["check"])["damaged"], serde_json::json!([]));
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
            let tokens = u64::from(edudb::model::tokens::count(item["text"].as_str().unwrap()));
            assert!(tokens <= item["tokens"].as_u64().unwrap(), "{item}");
            total += tokens;
        }
        assert!(total <= budget, "{budget}: {context}");
    }
    assert_eq!(json(&db, &["check"])["sessions"], 1);
}
