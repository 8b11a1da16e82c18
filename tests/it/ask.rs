//! `Db::ask` and its evidence cursor: progress control, introspection and
//! cited answers, with a scripted chat model (the rules) and with the real
//! chat server (the plumbing, through the CLI).

use std::sync::Arc;

use edudb::{AskOptions, CancelToken, ChatRequest, Db, Error, NoProgress, Stopped};
use serde_json::{Value, json};

use crate::scripted::ScriptedChat;
use crate::support::{chat_server, edudb, ingest_markdown, stderr, text};

fn scripted(
    judge: impl Fn(&ChatRequest, usize) -> String + Send + Sync + 'static,
    answer: impl Fn(&ChatRequest, usize) -> String + Send + Sync + 'static,
) -> Arc<ScriptedChat> {
    Arc::new(
        ScriptedChat::new()
            .on("judgement", judge)
            .on("answer", answer),
    )
}

/// A model that finds every passage shown useful and enough, and answers
/// citing the first passage given.
pub(crate) fn satisfied_reader() -> Arc<ScriptedChat> {
    scripted(
        |request, _| json!({"relevant": new_numbers(request), "enough": true}).to_string(),
        |request, _| {
            let first: u64 = request.user.split("Passages:\n[").nth(1).unwrap()[..1]
                .parse()
                .unwrap();
            json!({"answer": "From the passages.", "citations": [first]}).to_string()
        },
    )
}

const LANGUAGES: &str = "# Languages\n\n## Rust\n\nRust is a systems language. Its borrow checker \
enforces ownership. Rust has no garbage collector.\n\n## Go\n\nGo was designed at Google. Go has \
goroutines for concurrency. Channels carry messages between goroutines.\n\n## Python\n\nPython is \
dynamic. Python has a global interpreter lock. Python threads share the lock.\n";

/// A store with the languages document, asking `chat`.
fn store(chat: Option<Arc<ScriptedChat>>) -> (tempfile::TempDir, Db) {
    let (dir, db) = match chat {
        Some(chat) => crate::support::store_asking(chat),
        None => crate::support::store(),
    };
    ingest_markdown(&db, "languages", LANGUAGES);
    (dir, db)
}

/// EDU-level evidence, so each item is one sentence.
fn edus_options(group: usize) -> AskOptions {
    AskOptions {
        budget: 200,
        statement: Some(
            "SELECT SPANS FROM * SEED BM25($question) WHERE kind = edu BUDGET $budget TOKENS ORDER BY SCORE".into(),
        ),
        group,
        answer: true,
    }
}

/// The numbers a judgement request shows as new passages.
fn new_numbers(request: &ChatRequest) -> Vec<u64> {
    let new = request.user.split("New passages:").nth(1).unwrap_or("");
    new.lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once(']')?.0.parse().ok())
        .collect()
}

fn ask(db: &Db, question: &str, options: &AskOptions) -> edudb::Result<edudb::AskResult> {
    db.ask(question, options, &NoProgress, &CancelToken::new())
}

#[test]
fn the_evidence_cursor_reads_the_selection_best_first_under_the_budget() {
    let (_dir, db) = store(None);
    let options = edus_options(1);
    let evidence = db.evidence("goroutines concurrency Go", &options).unwrap();
    let total = evidence.remaining();
    let items: Vec<edudb::Item> = evidence.collect();
    assert_eq!(items.len(), total);
    assert!(items.len() >= 3);
    assert!(items.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(items.iter().map(|i| i.tokens).sum::<u64>() <= 200);
    assert!(items[0].text.contains("goroutines"));
    // The same picks as the statement itself.
    let selection = crate::support::selection_with(
        &db,
        options.statement(),
        &edudb::Params::new()
            .text("question", "goroutines concurrency Go")
            .number("budget", 200.0),
    );
    let mut want: Vec<[u32; 2]> = selection.items.iter().map(|i| i.edus).collect();
    let mut got: Vec<[u32; 2]> = items.iter().map(|i| i.edus).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    // A statement that is not a SELECT is refused.
    let err = db
        .evidence(
            "x",
            &AskOptions {
                statement: Some("SHOW DOCS".into()),
                ..AskOptions::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::Usage(ref m) if m.contains("SELECT")),
        "{err}"
    );
}

#[test]
fn reading_stops_when_the_model_has_enough_and_the_answer_cites_coordinates() {
    // Step 1: the first new passage helps, not enough; step 2: enough.
    let chat = scripted(
        |request, asked| {
            let new = new_numbers(request);
            json!({"relevant": [new[0]], "enough": asked == 1}).to_string()
        },
        |request, _| {
            // Cite the first passage given.
            let first: u64 = request.user.split("Passages:\n[").nth(1).unwrap()[..1]
                .parse()
                .unwrap();
            json!({"answer": "Go uses goroutines.", "citations": [first]}).to_string()
        },
    );
    let (_dir, db) = store(Some(Arc::clone(&chat)));
    let result = ask(&db, "Go goroutines Rust Python", &edus_options(2)).unwrap();
    assert_eq!(result.stopped, Stopped::Enough);
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.steps[0].shown, vec![1, 2]);
    assert_eq!(result.steps[0].relevant, vec![1]);
    assert_eq!(result.steps[1].shown, vec![3, 4]);
    assert!(result.steps.iter().all(|s| s.judged_by == "model"));
    assert_eq!(result.evidence.len(), 4);
    assert_eq!(result.answer.as_deref(), Some("Go uses goroutines."));
    assert_eq!(result.citations, vec![1]);
    // The cited item is exact text of the store at its coordinates.
    let cited: Vec<&edudb::Item> = result.cited().collect();
    let doc = db.document("languages").unwrap();
    let text = &doc.text;
    assert_eq!(
        &text[cited[0].bytes[0] as usize..cited[0].bytes[1] as usize],
        cited[0].text
    );
    // The second judgement saw the useful passage; the answer saw only the
    // useful ones.
    let seen = chat.seen.lock().unwrap();
    assert!(
        seen[1]
            .user
            .split("New passages:")
            .next()
            .unwrap()
            .contains("[1] (")
    );
    let answer_request = seen.iter().find(|r| r.schema_name == "answer").unwrap();
    assert!(answer_request.user.contains("[1] ") && answer_request.user.contains("[3] "));
    assert!(!answer_request.user.contains("[2] "));
    assert_eq!((result.cost.calls, result.cost.fallbacks), (3, 0));
    let json = result.to_json();
    assert_eq!(json["stopped"], "enough");
    assert_eq!(json["cited"][0]["edus"], json!(cited[0].edus));
}

#[test]
fn reading_goes_to_the_budget_and_invalid_replies_fall_back() {
    // Judgements cite a passage that was not shown (refused every time);
    // answers cite a passage that was not given (refused every time).
    let chat = scripted(
        |_, _| json!({"relevant": [99], "enough": true}).to_string(),
        |_, _| json!({"answer": "made up", "citations": [99]}).to_string(),
    );
    let (_dir, db) = store(Some(Arc::clone(&chat)));
    let options = edus_options(3);
    let result = ask(&db, "goroutines concurrency Go", &options).unwrap();
    let retrieved = db
        .evidence("goroutines concurrency Go", &options)
        .unwrap()
        .remaining();
    assert_eq!(result.stopped, Stopped::Budget);
    assert_eq!(result.evidence.len(), retrieved);
    assert!(
        result
            .steps
            .iter()
            .all(|s| s.judged_by == "fallback" && s.relevant == s.shown)
    );
    assert_eq!(result.answer, None);
    assert!(result.citations.is_empty());
    // Three tries per step and for the answer, one fallback each.
    let steps = result.steps.len() as u32;
    assert_eq!(result.cost.calls, 3 * (steps + 1));
    assert_eq!(result.cost.fallbacks, steps + 1);
    let seen = chat.seen.lock().unwrap();
    assert!(
        seen[1]
            .user
            .contains("rejected: passage 99 is not one of the new passages 1-3")
    );
}

#[test]
fn ask_refuses_what_it_cannot_do() {
    let (_dir, db) = store(None);
    let err = ask(&db, "Go?", &AskOptions::default()).unwrap_err();
    assert!(
        matches!(err, Error::NoChatModel { .. }) && err.is_user_error(),
        "{err}"
    );
    let chat = scripted(|_, _| unreachable!(), |_, _| unreachable!());
    let (_dir, db) = store(Some(chat));
    let err = ask(&db, "  ", &AskOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err}");
    let zero = AskOptions {
        group: 0,
        ..AskOptions::default()
    };
    assert!(matches!(
        ask(&db, "Go?", &zero).unwrap_err(),
        Error::Usage(_)
    ));
    // Nothing retrieved: no call at all.
    let result = ask(&db, "zebra xylophone", &AskOptions::default()).unwrap();
    assert_eq!(result.stopped, Stopped::Nothing);
    assert_eq!((result.cost.calls, result.answer), (0, None));
}

#[test]
fn real_server_asks_through_the_cli_with_exact_citations() {
    let Some(url) = chat_server() else { return };
    let llm = ["--llm-url", url.as_str(), "--llm-model", "smollm2"];
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("db");
    let file = dir.path().join("languages.md");
    std::fs::write(&file, LANGUAGES).unwrap();
    let out = edudb(&db_path, &["ingest", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = edudb(
        &db_path,
        &[
            &[
                "--json",
                "ask",
                "What does Go use for concurrency?",
                "--budget",
                "120",
            ][..],
            &llm[..],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let result: Value = serde_json::from_str(&text(&out)).unwrap();
    let evidence = result["evidence"].as_array().unwrap();
    assert!(!evidence.is_empty());
    let steps = result["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert!(result["cost"]["calls"].as_u64().unwrap() as usize >= steps.len());
    // Every cited number names an evidence item, and every item is the
    // store's text at its coordinates.
    for n in result["citations"].as_array().unwrap() {
        let n = n.as_u64().unwrap() as usize;
        assert!((1..=evidence.len()).contains(&n));
    }
    for item in evidence {
        let bytes = &item["bytes"];
        let (start, end) = (
            bytes[0].as_u64().unwrap() as usize,
            bytes[1].as_u64().unwrap() as usize,
        );
        assert_eq!(&LANGUAGES[start..end], item["text"].as_str().unwrap());
    }
    let out = edudb(
        &db_path,
        &[
            &[
                "ask",
                "What does Go use for concurrency?",
                "--explain",
                "--no-answer",
            ][..],
            &llm[..],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = text(&out);
    assert!(shown.contains("step: shown [1"), "{shown}");
    assert!(shown.contains("no answer"), "{shown}");
}

#[test]
fn a_refused_judgement_is_asked_again_and_without_the_answer_step_reading_is_all() {
    // The first try of the first judgement names a passage not shown; the
    // retry is accepted. Nothing is ever judged useful or enough.
    let chat = scripted(
        |_, asked| match asked {
            0 => json!({"relevant": [42], "enough": false}).to_string(),
            _ => json!({"relevant": [], "enough": false}).to_string(),
        },
        |_, _| unreachable!("no answer step"),
    );
    let (_dir, db) = store(Some(Arc::clone(&chat)));
    let options = AskOptions {
        answer: false,
        ..edus_options(2)
    };
    let result = ask(&db, "Go goroutines Rust Python", &options).unwrap();
    assert_eq!(result.stopped, Stopped::Budget);
    assert!(
        result
            .steps
            .iter()
            .all(|s| s.judged_by == "model" && s.relevant.is_empty())
    );
    assert_eq!(result.steps[0].cost.calls, 2);
    assert_eq!(result.cost.fallbacks, 0);
    assert_eq!(result.answer, None);
    assert_eq!(chat.asked("answer"), 0);
    // With the answer step, nothing judged useful: the answer reads
    // everything shown.
    let chat = scripted(
        |_, _| json!({"relevant": [], "enough": false}).to_string(),
        |_, _| json!({"answer": "no idea", "citations": []}).to_string(),
    );
    let (_dir, db) = store(Some(Arc::clone(&chat)));
    let result = ask(&db, "Go goroutines Rust Python", &edus_options(2)).unwrap();
    let seen = chat.seen.lock().unwrap();
    let answer_request = seen.iter().find(|r| r.schema_name == "answer").unwrap();
    for n in 1..=result.evidence.len() {
        assert!(answer_request.user.contains(&format!("[{n}] (")), "{n}");
    }
    assert_eq!(result.answer.as_deref(), Some("no idea"));
    // A citation number of 0 names nothing, and cited() says so safely.
    let mut odd = result.clone();
    odd.citations = vec![0, 1];
    assert_eq!(odd.cited().count(), 1);
}

#[test]
fn the_evidence_cursor_gives_groups_in_order() {
    let (_dir, db) = store(None);
    let options = edus_options(1);
    let all: Vec<edudb::Item> = db
        .evidence("Go goroutines Rust Python", &options)
        .unwrap()
        .collect();
    let mut cursor = db.evidence("Go goroutines Rust Python", &options).unwrap();
    let mut groups = Vec::new();
    while cursor.remaining() > 0 {
        let group = cursor.next_group(3);
        assert!(!group.is_empty() && group.len() <= 3);
        groups.extend(group);
    }
    assert_eq!(groups, all);
    assert!(cursor.next_group(3).is_empty());
}

#[test]
fn cancelling_an_ask_stops_it_between_steps() {
    let cancel = CancelToken::new();
    let on_judge = cancel.clone();
    let chat = scripted(
        move |request, _| {
            on_judge.cancel();
            json!({"relevant": new_numbers(request), "enough": false}).to_string()
        },
        |_, _| unreachable!("no answer after a cancellation"),
    );
    let (_dir, db) = store(Some(Arc::clone(&chat)));
    let err = db
        .ask(
            "Go goroutines Rust Python",
            &edus_options(1),
            &NoProgress,
            &cancel,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    // One judgement was asked; the cancellation stopped the next.
    assert_eq!(chat.asked("judgement"), 1);
    assert_eq!(chat.asked("answer"), 0);
}
