//! The chat model (`HttpChat`) and the LLM structurer through the store and
//! the CLI.
//!
//! The first tests use a real chat model server (llama-server with
//! SmolLM2-135M-Instruct from `.ci/llm-server`, its base URL in
//! `EDUDB_LLM_SERVER`); they skip with a notice when it is not set, and fail
//! instead when `EDUDB_REQUIRE_LLM_SERVER=1`. The model is far too small to
//! outline well: these tests check the plumbing (requests, schemas,
//! validation, fallbacks, accounting), never the outline's quality. The
//! rest run against scripted loopback servers.

use std::sync::Arc;

use edudb::{
    ChatConfig, ChatError, ChatModel, ChatRequest, Db, Error, HttpChat, IngestOptions, Structurer,
};
use serde_json::{Value, json};

use crate::scripted::{Received, Reply, ScriptedServer, answer};
use crate::support::{chat_server, edudb, stderr, store_asking, text};

/// Three topics, four sentences each.
const THREE_TOPICS: &str = "Rust is a systems programming language. It guarantees memory \
safety without a garbage collector. Ownership rules are checked at compile time. Borrowing \
lets functions use values without taking them.\n\nPython is a dynamic scripting language. It \
is popular for data science. Its interpreter has a global lock. Many libraries are written in \
C for speed.\n\nGo was designed at Google. It has goroutines for concurrency. Channels pass \
messages between goroutines. Its compiler is very fast.\n";

fn outline_request(user: &str) -> ChatRequest {
    ChatRequest {
        system: "Reply with JSON: a list of topics.".into(),
        user: user.into(),
        schema_name: "topics",
        schema: json!({
            "type": "object",
            "properties": {"topics": {"type": "array", "maxItems": 3,
                "items": {"type": "string", "maxLength": 40}}},
            "required": ["topics"],
            "additionalProperties": false
        }),
        max_tokens: 120,
        temperature: 0.0,
    }
}

fn llm_ingest() -> IngestOptions {
    IngestOptions {
        structurer: Structurer::Llm,
        ..Default::default()
    }
}

/// Every section title's words (function words aside) occur in the
/// section's own text, and the top level tiles the document.
fn assert_exact_tree(db: &Db, id: &str) {
    let tree = db.tree(id).unwrap();
    let doc = db.document(id).unwrap();
    tree.validate(doc.edus.len() as u32).unwrap();
    let tops: Vec<_> = tree.nodes[0]
        .children
        .iter()
        .map(|&c| tree.nodes[c as usize].span)
        .collect();
    assert_eq!(tops[0].first, 0);
    assert_eq!(tops.last().unwrap().last as usize, doc.edus.len() - 1);
    assert!(tops.windows(2).all(|w| w[1].first == w[0].last + 1));
    for node in tree.nodes.iter().skip(1) {
        let span_text = doc.text[doc.edus[node.span.first as usize].start as usize
            ..doc.edus[node.span.last as usize].end as usize]
            .to_lowercase();
        for word in node
            .title
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            assert!(
                edudb::ingest::tree::llm::FUNCTION_WORDS.contains(&word.as_str())
                    || span_text.contains(&word),
                "title {:?} has {word:?}, not in its text",
                node.title
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Against the real chat server

#[test]
fn real_server_answers_in_the_requested_schema_and_counts_tokens() {
    let Some(url) = chat_server() else { return };
    let chat = HttpChat::new(&ChatConfig::new(url, "smollm2")).unwrap();
    let requests = vec![
        outline_request("Rust has ownership. Python has a lock."),
        outline_request("Go has goroutines."),
    ];
    let (replies, cost) = chat.chat(&requests).unwrap();
    assert_eq!(replies.len(), 2);
    for reply in &replies {
        let value: Value = serde_json::from_str(&reply.content).unwrap();
        assert!(value["topics"].is_array(), "{}", reply.content);
        assert!(reply.prompt_tokens > 0 && reply.completion_tokens > 0);
    }
    assert_eq!(cost.calls, 2);
    assert_eq!(
        cost.prompt_tokens,
        replies.iter().map(|r| r.prompt_tokens).sum::<u64>()
    );
    assert!(cost.millis > 0);
}

#[test]
fn real_server_structures_a_document_exactly_or_falls_back() {
    let Some(url) = chat_server() else { return };
    let chat = Arc::new(HttpChat::new(&ChatConfig::new(url, "smollm2")).unwrap());
    let (_dir, db) = store_asking(chat);
    let report = db
        .ingest(
            &[edudb::Source {
                id: "langs".into(),
                origin: edudb::ingest::sources::Origin::Bytes(THREE_TOPICS.as_bytes().to_vec()),
            }],
            llm_ingest(),
            &edudb::NoProgress,
            &edudb::CancelToken::new(),
        )
        .unwrap();
    assert_eq!(report.documents.len(), 1);
    let llm = report.llm;
    // One request, plus at most two re-asks; a fallback only after all three.
    assert!((1..=3).contains(&llm.calls), "{llm:?}");
    assert!(
        llm.fallbacks <= 1 && (llm.fallbacks == 0 || llm.calls == 3),
        "{llm:?}"
    );
    assert!(llm.prompt_tokens > 0 && llm.completion_tokens > 0);
    // Whatever the model said, the stored tree is exact: from the model it
    // covers the document with extractive titles; from the fallback it is
    // the layout tree.
    if llm.fallbacks == 0 {
        assert_exact_tree(&db, "langs");
    } else {
        let layout =
            edudb::ingest::analyze("langs", THREE_TOPICS.into(), edudb::Format::Text).unwrap();
        assert_eq!(db.tree("langs").unwrap(), layout.tree);
    }
    assert_eq!(db.document("langs").unwrap().text, THREE_TOPICS);
}

#[test]
fn real_server_writes_information_points_with_exact_coordinates() {
    let Some(url) = chat_server() else { return };
    let chat = Arc::new(HttpChat::new(&ChatConfig::new(url, "smollm2")).unwrap());
    let (_dir, db) = store_asking(chat);
    // Six chunks of facts: one window of information points.
    let text: String = (0..60)
        .map(|i| format!("Town {i} lies beside the river Aro{i}. Its mayor Mira{i} opened a library in {}.\n\n", 1900 + i))
        .collect();
    let report = db
        .ingest(
            &[edudb::Source {
                id: "towns".into(),
                origin: edudb::ingest::sources::Origin::Bytes(text.clone().into_bytes()),
            }],
            IngestOptions {
                ip_maker: edudb::IpMakerKind::Llm,
                ..Default::default()
            },
            &edudb::NoProgress,
            &edudb::CancelToken::new(),
        )
        .unwrap();
    let llm = report.llm;
    assert!(llm.calls >= 1 && llm.prompt_tokens > 0, "{llm:?}");
    assert_eq!(db.build_costs().unwrap(), vec![("towns".to_owned(), llm)]);
    // Whatever the model wrote, the document and its coordinates are the
    // model-free ingest's, and the DAG keeps its invariants.
    let doc = db.document("towns").unwrap();
    assert_eq!(
        doc,
        edudb::ingest::analyze("towns", text, edudb::Format::Text).unwrap()
    );
    let dag = db.dag("towns").unwrap();
    dag.validate(doc.edus.len() as u32).unwrap();
    let written = dag.nodes.iter().filter(|n| n.text.is_some()).count();
    assert!(written > 0 || llm.fallbacks > 0, "{llm:?}");
    for node in dag.nodes.iter().filter(|n| n.text.is_some()) {
        assert!(!node.points.is_empty());
        assert!(
            node.points
                .iter()
                .all(|&e| node.span.first <= e && e <= node.span.last)
        );
    }
}

#[test]
fn real_server_through_the_cli_reports_the_cost() {
    let Some(url) = chat_server() else { return };
    let llm = ["--llm-url", url.as_str(), "--llm-model", "smollm2"];
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("langs.txt");
    std::fs::write(&file, THREE_TOPICS).unwrap();
    let out = edudb(
        &db,
        &[
            &[
                "--json",
                "ingest",
                file.to_str().unwrap(),
                "--structurer",
                "llm",
            ][..],
            &llm[..],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&text(&out)).unwrap();
    assert_eq!(report["documents"], 1);
    let calls = report["llm"]["calls"].as_u64().unwrap();
    assert!((1..=3).contains(&calls), "{report}");
    assert!(report["llm"]["prompt_tokens"].as_u64().unwrap() > 0);
    let out = edudb(&db, &["tree", "langs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Turns placed with the model's help when the similarities are in doubt.
    for turn in [
        "Rust checks ownership at compile time.",
        "Python has a global interpreter lock.",
        "Does the borrow checker slow compilation?",
    ] {
        let out = edudb(
            &db,
            &[
                &[
                    "--json",
                    "session",
                    "add",
                    "chat",
                    turn,
                    "--placement",
                    "llm",
                ][..],
                &llm[..],
            ]
            .concat(),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let receipt: Value = serde_json::from_str(&text(&out)).unwrap();
        let decision = &receipt["decision"];
        assert_eq!(decision["requested"], "llm");
        let by = decision["decided_by"].as_str().unwrap();
        assert!(["rule", "model", "fallback"].contains(&by), "{decision}");
        assert_eq!(by == "rule", decision["llm"]["calls"] == 0, "{decision}");
    }
}

// ---------------------------------------------------------------------------
// Without a chat model

#[test]
fn the_llm_structurer_without_a_chat_model_is_a_user_error() {
    let (dir, db) = crate::support::store();
    let err = db
        .ingest_bytes("d", THREE_TOPICS.as_bytes().to_vec(), llm_ingest())
        .unwrap_err();
    assert!(matches!(err, Error::NoChatModel { .. }), "{err:?}");
    assert!(err.is_user_error());
    assert!(db.documents().unwrap().is_empty());

    let file = dir.path().join("d.txt");
    std::fs::write(&file, THREE_TOPICS).unwrap();
    let store = dir.path().join("cli");
    let out = edudb(
        &store,
        &["ingest", file.to_str().unwrap(), "--structurer", "llm"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("needs a chat model"),
        "{}",
        stderr(&out)
    );
    let out = edudb(
        &store,
        &[
            "ingest",
            file.to_str().unwrap(),
            "--llm-url",
            "http://127.0.0.1:9/v1",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("both --llm-url and --llm-model"),
        "{}",
        stderr(&out)
    );
    let out = edudb(
        &store,
        &["ingest", file.to_str().unwrap(), "--structurer", "oracle"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("layout or llm"), "{}", stderr(&out));
    // A server's request timeout (for slow models' asks) must be positive.
    for bad in ["0", "-3", "soon"] {
        let flag = format!("--request-timeout={bad}");
        let out = edudb(&store, &["serve", &flag]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(
            stderr(&out).contains("positive number of seconds"),
            "{}",
            stderr(&out)
        );
    }
}

// ---------------------------------------------------------------------------
// Against scripted loopback servers

/// A config for `server` with fast retries.
fn config(server: &ScriptedServer) -> ChatConfig {
    let mut config = ChatConfig::new(server.base_url.as_str(), "fake-chat");
    config.backoff_ms = 10;
    config
}

/// A completion whose content is `content`.
fn completion(content: &str, finish: &str) -> Reply {
    answer(
        200,
        json!({
            "choices": [{"index": 0, "finish_reason": finish,
                "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}
        })
        .to_string(),
    )
}

/// Echoes the user message back as the content.
fn echo(request: &Received) -> Reply {
    let user = request.body["messages"][1]["content"]
        .as_str()
        .unwrap_or("");
    completion(&json!({"echo": user}).to_string(), "stop")
}

#[test]
fn requests_carry_the_messages_schema_and_limits() {
    let server = ScriptedServer::start(|_, request| echo(request));
    let chat = HttpChat::new(&config(&server)).unwrap();
    let request = outline_request("three topics");
    let (replies, cost) = chat.chat(std::slice::from_ref(&request)).unwrap();
    assert_eq!(replies[0].content, r#"{"echo":"three topics"}"#);
    assert!(!replies[0].truncated);
    assert_eq!(
        (replies[0].prompt_tokens, replies[0].completion_tokens),
        (7, 3)
    );
    assert_eq!(
        (cost.calls, cost.prompt_tokens, cost.completion_tokens),
        (1, 7, 3)
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = &sent.body;
    assert_eq!(body["model"], "fake-chat");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": request.system})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "three topics"})
    );
    assert_eq!(body["max_tokens"], 120);
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "topics");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        request.schema
    );
}

#[test]
fn many_requests_come_back_in_order() {
    let server = ScriptedServer::start(|number, request| {
        // Later requests answer sooner, so order must come from the client.
        std::thread::sleep(std::time::Duration::from_millis(
            40u64.saturating_sub(number as u64 * 5),
        ));
        echo(request)
    });
    let chat = HttpChat::new(&config(&server)).unwrap();
    let requests: Vec<ChatRequest> = (0..6).map(|i| outline_request(&format!("n{i}"))).collect();
    let (replies, cost) = chat.chat(&requests).unwrap();
    let got: Vec<String> = replies.iter().map(|r| r.content.clone()).collect();
    let want: Vec<String> = (0..6).map(|i| format!(r#"{{"echo":"n{i}"}}"#)).collect();
    assert_eq!(got, want);
    assert_eq!(cost.calls, 6);
}

#[test]
fn server_errors_are_retried_and_client_errors_are_not() {
    let server = ScriptedServer::start(|number, request| {
        if number < 2 {
            answer(503, r#"{"error":"loading model"}"#)
        } else {
            echo(request)
        }
    });
    let chat = HttpChat::new(&config(&server)).unwrap();
    let (replies, _) = chat.chat(&[outline_request("x")]).unwrap();
    assert_eq!(replies[0].content, r#"{"echo":"x"}"#);
    assert_eq!(server.count(), 3);

    let server = ScriptedServer::start(|_, _| answer(400, r#"{"error":"bad schema"}"#));
    let err = HttpChat::new(&config(&server))
        .unwrap()
        .chat(&[outline_request("x")])
        .unwrap_err();
    assert!(
        matches!(&err, ChatError::Status { status: 400, body, .. } if body.contains("bad schema")),
        "{err:?}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn malformed_replies_are_errors_and_empty_or_cut_replies_are_marked() {
    let server = ScriptedServer::start(|_, _| answer(200, "not json"));
    let err = HttpChat::new(&config(&server))
        .unwrap()
        .chat(&[outline_request("x")])
        .unwrap_err();
    assert!(
        matches!(&err, ChatError::Malformed { message, .. } if message.contains("not a chat completion")),
        "{err:?}"
    );
    // No choice, or no content (a refusal): an empty reply the caller's
    // check refuses and asks again.
    for body in [
        r#"{"choices": []}"#,
        r#"{"choices": [{"message": {"role": "assistant", "content": null}}]}"#,
    ] {
        let server = ScriptedServer::start(move |_, _| answer(200, body));
        let (replies, _) = HttpChat::new(&config(&server))
            .unwrap()
            .chat(&[outline_request("x")])
            .unwrap();
        assert_eq!(replies[0].content, "", "{body}");
    }
    let server = ScriptedServer::start(|_, _| completion("{\"topics\": [\"a", "length"));
    let (replies, _) = HttpChat::new(&config(&server))
        .unwrap()
        .chat(&[outline_request("x")])
        .unwrap();
    assert!(replies[0].truncated);
}

#[test]
fn bad_settings_are_config_errors() {
    let mut no_model = ChatConfig::new("http://127.0.0.1:9/v1", " ");
    no_model.backoff_ms = 1;
    let mut no_key = ChatConfig::new("http://127.0.0.1:9/v1", "m");
    no_key.api_key_env = Some("EDUDB_TEST_CHAT_KEY_THAT_IS_NEVER_SET".into());
    let mut no_concurrency = ChatConfig::new("http://127.0.0.1:9/v1", "m");
    no_concurrency.max_concurrency = 0;
    for (config, needle) in [
        (no_model, "model name"),
        (no_key, "EDUDB_TEST_CHAT_KEY_THAT_IS_NEVER_SET is not set"),
        (no_concurrency, "max_concurrency"),
        (
            ChatConfig::new("ftp://example.com", "m"),
            "http:// or https://",
        ),
    ] {
        match HttpChat::new(&config) {
            Err(ChatError::Config(message)) => {
                assert!(message.contains(needle), "{needle:?}: {message}")
            }
            other => panic!("{needle}: expected a config error, got {other:?}"),
        }
    }
}

#[test]
fn an_ingest_through_a_scripted_server_stores_the_model_tree() {
    // The server answers with a fixed outline over the 12 sentences.
    let server = ScriptedServer::start(|_, _| {
        let outline = json!({"sections": [
            {"level": 1, "first": 1, "last": 4, "title": "Rust systems programming"},
            {"level": 1, "first": 5, "last": 8, "title": "Python scripting"},
            {"level": 2, "first": 7, "last": 8, "title": "Interpreter lock"},
            {"level": 1, "first": 9, "last": 12, "title": "Go concurrency"}
        ]});
        completion(&outline.to_string(), "stop")
    });
    let chat = Arc::new(HttpChat::new(&config(&server)).unwrap());
    let (_dir, db) = store_asking(chat);
    let meta = db
        .ingest_bytes("langs", THREE_TOPICS.as_bytes().to_vec(), llm_ingest())
        .unwrap();
    assert_eq!(meta.edus, 12);
    assert_exact_tree(&db, "langs");
    let tree = db.tree("langs").unwrap();
    let titles: Vec<(&str, u16)> = tree
        .nodes
        .iter()
        .filter(|n| n.kind == edudb::NodeKind::Section)
        .map(|n| (n.title.as_str(), n.level))
        .collect();
    assert_eq!(
        titles,
        vec![
            ("Rust systems programming", 1),
            ("Python scripting", 1),
            // "Interpreter lock": both words are in sentences 7-8.
            ("Interpreter lock", 2),
            // "concurrency" is in sentence 10: kept.
            ("Go concurrency", 1),
        ]
    );
    // Inside the model's sections, the layout's paragraphs: the part of
    // the Python paragraph before "Interpreter lock" is one.
    let python = &tree.nodes[tree.nodes[0].children[1] as usize];
    let first = &tree.nodes[python.children[0] as usize];
    assert_eq!(
        (first.kind, first.span),
        (edudb::NodeKind::Paragraph, edudb::Span::new(4, 5))
    );
    // The model's tree is what queries walk: a search lands in its sections.
    let hits = db.search("goroutines", 3).unwrap();
    assert_eq!(hits[0].doc, "langs");
    // What the model cost is kept with the document.
    let costs = db.build_costs().unwrap();
    assert_eq!(costs.len(), 1);
    assert_eq!((costs[0].0.as_str(), costs[0].1.calls), ("langs", 1));
    assert_eq!(
        (costs[0].1.prompt_tokens, costs[0].1.completion_tokens),
        (7, 3)
    );
    assert_eq!(db.stats().unwrap().llm, costs[0].1);
}

#[test]
fn build_costs_show_in_docs_and_stats_and_go_with_the_document() {
    let server = ScriptedServer::start(|_, _| {
        let outline = json!({"sections": [{"level": 1, "first": 1, "last": 12, "title": "Go"}]});
        completion(&outline.to_string(), "stop")
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let file = dir.path().join("langs.txt");
    std::fs::write(&file, THREE_TOPICS).unwrap();
    let llm = [
        "--llm-url",
        server.base_url.as_str(),
        "--llm-model",
        "fake-chat",
    ];
    let path = file.to_str().unwrap();
    for args in [
        vec!["ingest", path, "--structurer", "llm"],
        vec!["ingest", path, "--id", "plain"],
    ] {
        let out = edudb(&db, &[args, llm.to_vec()].concat());
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = edudb(&db, &["--json", "docs"]);
    let docs: Value = serde_json::from_str(&text(&out)).unwrap();
    let llm_of = |id: &str| {
        docs.as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id)
            .unwrap()["llm"]
            .clone()
    };
    assert_eq!(
        llm_of("langs"),
        json!({"calls": 1, "prompt_tokens": 7, "completion_tokens": 3,
               "millis": llm_of("langs")["millis"], "fallbacks": 0, "dropped_points": 0})
    );
    assert_eq!(llm_of("plain"), Value::Null);
    let stats = |db: &std::path::Path| -> Value {
        serde_json::from_str(&text(&edudb(db, &["--json", "stats"]))).unwrap()
    };
    assert_eq!(stats(&db)["llm"]["calls"], 1);
    let out = edudb(&db, &["stats"]);
    assert!(
        text(&out).contains("1 calls, 7 prompt and 3 completion tokens"),
        "{}",
        text(&out)
    );
    assert!(edudb(&db, &["rm", "langs"]).status.success());
    assert_eq!(stats(&db)["llm"]["calls"], 0);
}

#[test]
fn a_server_that_stops_answering_mid_ingest_leaves_whole_documents_only() {
    // The first request is answered; then the server hangs, as a killed
    // or wedged server does, and every later request times out.
    let server = ScriptedServer::start(|n, _| match n {
        0 => {
            let outline =
                json!({"sections": [{"level": 1, "first": 1, "last": 12, "title": "Go"}]});
            completion(&outline.to_string(), "stop")
        }
        _ => Reply::Silence,
    });
    let mut config = config(&server);
    config.timeout_secs = 1;
    config.max_retries = 1;
    let (_dir, db) = store_asking(Arc::new(HttpChat::new(&config).unwrap()));
    let sources: Vec<edudb::Source> = ["a", "b", "c"]
        .iter()
        .map(|id| edudb::Source {
            id: (*id).into(),
            origin: edudb::ingest::sources::Origin::Bytes(THREE_TOPICS.as_bytes().to_vec()),
        })
        .collect();
    let err = db
        .ingest(
            &sources,
            llm_ingest(),
            &edudb::NoProgress,
            &edudb::CancelToken::new(),
        )
        .unwrap_err();
    // At most the one answered document was written, and it is whole;
    // when one was, the error says which, and which were not.
    let said_stored = match &err {
        Error::Chat(_) => Vec::new(),
        Error::PartlyIngested {
            cause,
            stored,
            not_stored,
        } if matches!(**cause, Error::Chat(_)) => {
            assert_eq!(stored.len() + not_stored.len(), 3, "{err:?}");
            stored.clone()
        }
        other => panic!("{other:?}"),
    };
    let stored = db.documents().unwrap();
    assert!(stored.len() <= 1, "{stored:?}");
    let ids: Vec<String> = stored.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids, said_stored);
    assert_eq!(db.check().unwrap().documents, stored.len());
    for meta in &stored {
        assert_eq!(db.document(&meta.id).unwrap().text, THREE_TOPICS);
        assert_exact_tree(&db, &meta.id);
    }
}
