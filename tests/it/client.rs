//! `edudb::serve::Client`: a served store used like an embedded one, over
//! TCP and over the store's socket, against the library's own answers.

use edudb::serve::{Api, Client, ServeOptions};
use edudb::{CancelToken, Db, Error, Params, Role, TurnInput};
use serde_json::Value;

use super::serve::{fixture, start};

/// A query answer without its timing, which differs between runs.
fn untimed(mut answer: Value) -> Value {
    answer.as_object_mut().unwrap().remove("elapsed_ms");
    answer
}

#[test]
fn a_client_reads_what_the_library_reads_over_tcp_and_the_socket() {
    let (_dir, path) = fixture();
    let statement = "SELECT SPANS FROM * SEED BM25($q) BUDGET 64 TOKENS";
    let params = Params::new().text("q", "snow festival");
    // What the store answers in-process, through the same `Api` the
    // server's handlers call: the library's own values as JSON.
    let expected = {
        let db = Db::open(&path).unwrap();
        let answers = vec![
            Api::documents(&db, None).unwrap(),
            Api::tree(&db, "trips").unwrap(),
            Api::edus(&db, "trips", Some((0, 1))).unwrap(),
            Api::dag_listing(&db, "trips", None).unwrap(),
            Api::search(&db, "ramen", 5).unwrap(),
            untimed(Api::query(&db, statement, &params, false).unwrap()),
            Api::check(&db).unwrap(),
        ];
        // Listed with their metadata (none here).
        let documents: Vec<Value> = db
            .documents()
            .unwrap()
            .iter()
            .map(|d| {
                let mut row = d.to_json();
                row["metadata"] = serde_json::json!({});
                row
            })
            .collect();
        let hits: Vec<Value> = db
            .search("ramen", 5)
            .unwrap()
            .iter()
            .map(|h| h.to_json())
            .collect();
        assert_eq!(answers[0], Value::from(documents));
        assert_eq!(answers[1], db.tree("trips").unwrap().to_json(None));
        assert_eq!(answers[4], Value::from(hits));
        assert_eq!(
            answers[5],
            untimed(db.query(statement, &params).unwrap().to_json())
        );
        assert!(answers[5].get("plan").is_none());
        // `explain` leaves error positions those of the statement given.
        let bad = "SELECT SPANS FROM * WERE level = 1";
        let position = |explain| match Api::query(&db, bad, &params, explain) {
            Err(Error::Query(e)) => (e.line, e.column),
            other => panic!("{other:?}"),
        };
        assert_eq!(position(true), (1, 21));
        assert_eq!(position(false), (1, 21));
        answers
    };
    let running = start(&path, ServeOptions::default());
    let tcp = format!("http://{}", running.bound.address);
    for target in [tcp.as_str(), path.to_str().unwrap()] {
        let client = Client::connect(target, None).unwrap();
        assert_eq!(
            client.health().unwrap()["store"],
            path.display().to_string()
        );
        let served = vec![
            client.documents(None).unwrap(),
            client.tree("trips").unwrap(),
            client.edus("trips", Some((0, 1))).unwrap(),
            client.dag_listing("trips", None).unwrap(),
            client.search("ramen", 5).unwrap(),
            untimed(client.query(statement, &params, false).unwrap()),
            client.check().unwrap(),
        ];
        assert_eq!(served, expected, "{target}");
        assert_eq!(served[2].as_array().map(Vec::len), Some(2));
        // `explain` gives the plan of the statement with EXPLAIN written.
        let operators = |answer: Value| -> Vec<Value> {
            let plan = answer["plan"].as_array().cloned().unwrap_or_default();
            plan.iter().map(|stage| stage["operator"].clone()).collect()
        };
        let explained = operators(client.query(statement, &params, true).unwrap());
        let written = format!("EXPLAIN {statement}");
        assert!(!explained.is_empty());
        assert_eq!(
            explained,
            operators(client.query(&written, &params, false).unwrap())
        );
        assert!(client.stats().unwrap()["documents"].as_u64() >= Some(2));
    }
    running.stop().unwrap();
}

#[test]
fn a_client_writes_and_its_refusals_keep_their_class() {
    let (_dir, path) = fixture();
    let running = start(&path, ServeOptions::default());
    let client = Client::connect(path.to_str().unwrap(), None).unwrap();

    let receipt = client
        .ingest_bytes(
            "notes/a b",
            b"# Notes\n\nTea is grown in Uji.".to_vec(),
            edudb::IngestOptions::default(),
        )
        .unwrap();
    assert_eq!(receipt["id"], "notes/a b", "{receipt}");
    let ids: Vec<Value> = client
        .documents(None)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert!(ids.contains(&Value::from("notes/a b")), "{ids:?}");

    let mut turn = TurnInput::new(Role::User, "We land in Sapporo on Monday.");
    turn.at = Some(1_700_000_000);
    let added = client.append_turn("trip", &turn).unwrap();
    assert_eq!(
        (added["session"].clone(), added["turn"].clone()),
        ("trip".into(), 0.into())
    );
    assert_eq!(added["at"], "2023-11-14T22:13:20Z", "{added}");
    assert_eq!(client.sessions().unwrap()[0]["id"], "trip");
    assert_eq!(client.session("trip").unwrap()["id"], "trip");
    let context = client
        .session_context("trip", 256, Some("when do we land"))
        .unwrap();
    assert!(context.to_string().contains("Sapporo"), "{context}");

    // Refusals are typed by the server's class, as a local store's are.
    let bad = client
        .query("SELECT SPANS FROM * WERE level = 1", &Params::new(), false)
        .unwrap_err();
    assert!(bad.is_user_error() && !bad.is_busy(), "{bad}");
    let Error::Served { status, query, .. } = &bad else {
        panic!("{bad:?}")
    };
    assert_eq!(*status, 400);
    assert_eq!(
        query.as_ref().map(|q| q["line"].clone()),
        Some(1.into()),
        "{bad:?}"
    );
    let mut to_no_topic = TurnInput::new(Role::User, "Back to a topic never opened.");
    to_no_topic.placement = edudb::Placement::Topic(99);
    let mut at_no_turn = TurnInput::new(Role::User, "A fork at a turn never said.");
    at_no_turn.placement = edudb::Placement::Fork(99);
    for missing in [
        client.tree("nowhere").unwrap_err(),
        client.append_turn("trip", &to_no_topic).unwrap_err(),
        client.append_turn("trip", &at_no_turn).unwrap_err(),
    ] {
        assert!(
            matches!(missing, Error::Served { status: 404, .. }) && missing.is_user_error(),
            "{missing}"
        );
    }

    assert_eq!(
        client.forget_turn("trip", 0).unwrap(),
        serde_json::json!({"session": "trip", "forgotten": 0})
    );
    let missing = client.forget_turn("trip", 99).unwrap_err();
    assert!(
        matches!(missing, Error::Served { status: 404, .. }),
        "{missing}"
    );
    client.remove_session("trip").unwrap();
    client.remove("notes/a b").unwrap();
    assert!(client.session("trip").unwrap_err().is_user_error());
    assert_eq!(
        client.documents(None).unwrap().as_array().map(Vec::len),
        Some(2)
    );
    running.stop().unwrap();
}

#[test]
fn a_client_presents_its_token_and_names_a_missing_server() {
    let (_dir, path) = fixture();
    let options = ServeOptions {
        token: Some("s3cret".into()),
        ..ServeOptions::default()
    };
    let running = start(&path, options);
    let tcp = format!("http://{}", running.bound.address);
    let refused = Client::connect(&tcp, Some("wrong")).unwrap_err();
    assert!(
        matches!(refused, Error::Served { status: 401, .. }),
        "{refused:?}"
    );
    let client = Client::connect(&tcp, Some("s3cret")).unwrap();
    assert_eq!(
        client.documents(None).unwrap().as_array().map(Vec::len),
        Some(2)
    );
    // HOST:PORT without a scheme is an address.
    let bare = running.bound.address.to_string();
    assert!(Client::connect(&bare, Some("s3cret")).is_ok());
    running.stop().unwrap();
    // Once stopped, nothing runs on the store: a user error saying so.
    let gone = Client::connect(path.to_str().unwrap(), None).unwrap_err();
    assert!(
        matches!(gone, Error::Usage(_)) && gone.to_string().contains("no server runs on the store"),
        "{gone}"
    );
    // An address nothing answers at, and a target that names nothing:
    // what was tried, and why it failed.
    let silent = Client::connect(&bare, None).unwrap_err();
    assert!(
        silent.is_user_error()
            && silent
                .to_string()
                .contains(&format!("no edudb server answers at http://{bare}")),
        "{silent}"
    );
    let nowhere = Client::connect("/no/such/store", None).unwrap_err();
    assert!(
        nowhere.is_user_error()
            && nowhere
                .to_string()
                .contains("/no/such/store: no such store"),
        "{nowhere}"
    );
}

/// Counts what an ingest reports.
#[derive(Default)]
struct Counted {
    total: std::sync::atomic::AtomicU64,
    advanced: std::sync::atomic::AtomicU64,
}

impl edudb::Progress for Counted {
    fn start(&self, _what: &str, total: u64) {
        self.total
            .store(total, std::sync::atomic::Ordering::Relaxed);
    }

    fn advance(&self, units: u64, _item: &str) {
        self.advanced
            .fetch_add(units, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn a_client_ingests_files_as_jobs_like_a_local_ingest() {
    let (dir, path) = fixture();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let notes =
        "# Notes\n\nTea is grown in Uji. It is picked in May.\n\n## Kinds\n\nMatcha is ground.";
    std::fs::write(files.join("notes.md"), notes).unwrap();
    std::fs::write(
        files.join("plain.txt"),
        "# not a heading here\n\nJust text.",
    )
    .unwrap();
    std::fs::write(files.join("broken.md"), b"caf\xe9 au lait").unwrap();
    let sources = edudb::ingest::sources::expand(std::slice::from_ref(&files), None).unwrap();
    let running = start(&path, ServeOptions::default());
    let client = Client::connect(path.to_str().unwrap(), None).unwrap();
    let progress = Counted::default();
    let answer = client
        .ingest(
            &sources,
            edudb::IngestOptions::default(),
            &progress,
            &CancelToken::new(),
        )
        .unwrap();
    let ids: Vec<&str> = answer["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["notes", "plain"], "{answer}");
    let failures = answer["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{answer}");
    assert_eq!(failures[0]["class"], "user");
    assert!(
        failures[0]["message"]
            .as_str()
            .unwrap()
            .contains("invalid UTF-8")
    );
    let total = progress.total.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(total, (notes.len() + 32) as u64);
    assert_eq!(
        progress.advanced.load(std::sync::atomic::Ordering::Relaxed),
        total
    );
    let served = (client.tree("notes").unwrap(), client.tree("plain").unwrap());
    running.stop().unwrap();

    // The same files ingested locally: the same documents, formats
    // detected from their names alike.
    let (_other, local) = crate::support::store();
    let report = local
        .ingest(
            &sources,
            edudb::IngestOptions::default(),
            &edudb::NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(report.documents.len(), 2);
    let trees = (
        local.tree("notes").unwrap().to_json(None),
        local.tree("plain").unwrap().to_json(None),
    );
    assert_eq!(served, trees);
}

#[test]
fn an_ingest_job_reports_progress_and_can_be_cancelled() {
    let (_dir, path) = fixture();
    let running = start(&path, ServeOptions::default());
    let http = super::serve::client().build().unwrap();
    let url = |route: &str| format!("http://{}/v1{route}", running.bound.address);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let send = |request: reqwest::RequestBuilder| {
        runtime.block_on(async {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        })
    };
    let paragraph = "The committee met on Tuesday and agreed on the budget. ".repeat(40);
    let documents: Vec<Value> = (0..200)
        .map(|i| serde_json::json!({"id": format!("d{i:03}"), "text": format!("# Part {i}\n\n{paragraph}")}))
        .collect();
    let (status, submitted) = send(
        http.post(url("/ingest"))
            .json(&serde_json::json!({"documents": documents})),
    );
    assert_eq!(status, 202, "{submitted}");
    assert_eq!(submitted["sources"], 200);
    let job = submitted["job"].to_string();
    let (status, cancelling) = send(http.delete(url(&format!("/jobs/{job}"))));
    assert_eq!(status, 200, "{cancelling}");
    let ended = loop {
        let (status, polled) = send(http.get(url(&format!("/jobs/{job}"))));
        assert_eq!(status, 200, "{polled}");
        assert!(
            polled["done"].as_u64() <= polled["total"].as_u64(),
            "{polled}"
        );
        if polled["state"] != "running" {
            break polled;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(ended["state"], "cancelled", "{ended}");
    assert_eq!(ended["error"]["class"], "user", "{ended}");
    // What was written before the cancellation is whole.
    let (_, check) = send(http.get(url("/check")));
    assert!(
        check["damaged"].as_array().is_some_and(Vec::is_empty),
        "{check}"
    );
    let (_, docs) = send(http.get(url("/docs")));
    assert!(docs.as_array().unwrap().len() < 202, "{docs}");

    // A job that ran to its end lists what it wrote.
    let two = serde_json::json!({"documents": [
        {"id": "x", "text": "# X\n\nOne line.", "format": "markdown"},
        {"id": "y", "text": "Plain words."},
    ]});
    let (_, submitted) = send(http.post(url("/ingest")).json(&two));
    let job = submitted["job"].to_string();
    let ended = loop {
        let (_, polled) = send(http.get(url(&format!("/jobs/{job}"))));
        if polled["state"] != "running" {
            break polled;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(ended["state"], "done", "{ended}");
    assert_eq!(
        ended["documents"].as_array().map(Vec::len),
        Some(2),
        "{ended}"
    );
    assert_eq!(ended["done"], ended["total"], "{ended}");
    assert_eq!(ended["processed"], 2, "{ended}");

    // Unknown jobs and malformed bodies are the caller's errors.
    let (status, body) = send(http.get(url("/jobs/999999")));
    assert_eq!(
        (status, body["error"]["class"].clone()),
        (404, "user".into()),
        "{body}"
    );
    let (status, body) = send(
        http.post(url("/ingest"))
            .json(&serde_json::json!({"documents": [{"id": "z"}]})),
    );
    assert_eq!(
        (status, body["error"]["class"].clone()),
        (422, "user".into()),
        "{body}"
    );
    let (status, body) = send(
        http.post(url("/ingest"))
            .json(&serde_json::json!({"documents": [{"id": "z", "text": "t", "format": "yaml"}]})),
    );
    assert_eq!(
        (status, body["error"]["class"].clone()),
        (400, "user".into()),
        "{body}"
    );
    running.stop().unwrap();
}

#[test]
fn readers_answer_during_a_long_ingest_and_concurrent_appends_lose_no_turn() {
    let (_dir, path) = fixture();
    let running = start(&path, ServeOptions::default());
    let target = path.to_str().unwrap().to_owned();
    let paragraph = "The working group reviewed the draft and agreed on the schedule. ".repeat(30);
    let sources: Vec<edudb::Source> = (0..150)
        .map(|i| edudb::Source {
            id: format!("long{i:03}"),
            origin: edudb::ingest::sources::Origin::Bytes(
                format!("# Part {i}\n\n{paragraph}").into_bytes(),
            ),
        })
        .collect();
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let (ingesting, read_meanwhile) = (AtomicBool::new(true), AtomicUsize::new(0));
    let ingested = std::thread::scope(|scope| {
        let ingest = scope.spawn(|| {
            let client = Client::connect(&target, None).unwrap();
            let answer = client
                .ingest(
                    &sources,
                    edudb::IngestOptions::default(),
                    &edudb::NoProgress,
                    &CancelToken::new(),
                )
                .unwrap();
            ingesting.store(false, Ordering::SeqCst);
            answer
        });
        let readers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let client = Client::connect(&target, None).unwrap();
                    for _ in 0..25 {
                        client.search("snow festival", 5).unwrap();
                        client.documents(None).unwrap();
                        if ingesting.load(Ordering::SeqCst) {
                            read_meanwhile.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let appenders: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|own| {
                let target = &target;
                scope.spawn(move || {
                    let client = Client::connect(target, None).unwrap();
                    for i in 0..8 {
                        for session in ["shared", own] {
                            let text = format!("Writer {own} says {i} in {session}.");
                            client
                                .append_turn(session, &TurnInput::new(Role::User, text))
                                .unwrap();
                        }
                    }
                })
            })
            .collect();
        for thread in readers.into_iter().chain(appenders) {
            thread.join().unwrap();
        }
        ingest.join().unwrap()
    });
    assert_eq!(ingested["documents"].as_array().map(Vec::len), Some(150));
    // Readers were answered while the ingest job held the writer.
    assert!(read_meanwhile.load(Ordering::SeqCst) > 0);
    let client = Client::connect(&target, None).unwrap();
    let sessions = client.sessions().unwrap();
    let turns = |id: &str| {
        let listed = sessions.as_array().unwrap().iter().find(|s| s["id"] == id);
        listed.and_then(|s| s["turns"].as_u64())
    };
    assert_eq!(
        (turns("shared"), turns("a"), turns("b")),
        (Some(16), Some(8), Some(8))
    );
    assert!(
        client.check().unwrap()["damaged"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
    running.stop().unwrap();
}

#[test]
fn a_document_over_the_servers_body_limit_fails_alone_and_the_rest_go_as_several_jobs() {
    let (dir, path) = fixture();
    let limit = 4096;
    let running = start(
        &path,
        ServeOptions {
            max_body_bytes: limit,
            ..ServeOptions::default()
        },
    );
    let client = Client::connect(path.to_str().unwrap(), None).unwrap();
    assert_eq!(client.health().unwrap()["max_body_bytes"], limit);
    // Ten documents of about 1 KiB each (several per job, never one job),
    // and one whose JSON is over the limit: quotes and newlines escape to
    // two bytes each, so its 2,600 bytes of text take over 4 KiB encoded.
    let mut sources: Vec<edudb::Source> = (0..10)
        .map(|i| edudb::Source {
            id: format!("small-{i}"),
            origin: edudb::ingest::sources::Origin::Bytes(
                format!("# Note {i}\n\n{}", "Tea is grown in Uji. ".repeat(50)).into_bytes(),
            ),
        })
        .collect();
    let quoted = "\"q\"\n".repeat(650);
    sources.insert(
        4,
        edudb::Source {
            id: "quoted".into(),
            origin: edudb::ingest::sources::Origin::Bytes(quoted.clone().into_bytes()),
        },
    );
    assert!(quoted.len() < limit, "the text alone would fit");
    let answer = client
        .ingest(
            &sources,
            edudb::IngestOptions::default(),
            &edudb::NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    let written = answer["documents"].as_array().unwrap();
    assert_eq!(written.len(), 10, "{answer}");
    let failures = answer["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{answer}");
    assert_eq!(failures[0]["source"], "quoted");
    assert_eq!(failures[0]["class"], "user");
    let message = failures[0]["message"].as_str().unwrap();
    assert!(message.contains("at most 4096 bytes"), "{message}");
    // The single-document upload is refused before it is sent, as a user
    // error, and the server keeps serving.
    let refused = client
        .ingest_bytes(
            "big",
            vec![b'a'; limit + 1],
            edudb::IngestOptions::default(),
        )
        .unwrap_err();
    assert!(refused.is_user_error(), "{refused}");
    assert_eq!(
        client.documents(None).unwrap().as_array().map(Vec::len),
        Some(12)
    );
    running.stop().unwrap();
    drop(dir);
}

#[test]
fn a_client_asks_the_servers_chat_model_to_build_and_to_answer() {
    use crate::written_points::{faithful_but_for_one, towns};
    let (_dir, path) = fixture();
    // The server's model outlines every document as one section, writes
    // information points, and reads and answers questions.
    let chat = faithful_but_for_one()
        .on("outline", |request, _| {
            let numbers: Vec<u64> = (request.user.lines())
                .filter_map(|l| l.strip_prefix('[')?.split_once(']')?.0.parse().ok())
                .collect();
            let (first, last) = (numbers[0], numbers[numbers.len() - 1]);
            serde_json::json!({"sections": [{"level": 1, "first": first, "last": last, "title": "Town"}]})
                .to_string()
        })
        .on("judgement", |_, _| {
            serde_json::json!({"relevant": [1], "enough": true}).to_string()
        })
        .on("answer", |_, _| {
            serde_json::json!({"answer": "Mira7 did.", "citations": [1]}).to_string()
        });
    let chat = std::sync::Arc::new(chat);
    let running = super::serve::start_asking(&path, ServeOptions::default(), Some(chat.clone()));
    let client = Client::connect(path.to_str().unwrap(), None).unwrap();
    let sources = [edudb::Source {
        id: "towns".into(),
        origin: edudb::ingest::sources::Origin::Bytes(towns().into_bytes()),
    }];
    let options = edudb::IngestOptions {
        structurer: edudb::Structurer::Llm,
        ip_maker: edudb::IpMakerKind::Llm,
        ..Default::default()
    };
    let answer = client
        .ingest(&sources, options, &edudb::NoProgress, &CancelToken::new())
        .unwrap();
    // Both steps ran on the server: the outline's windows, then one window
    // of points (with its invented point dropped).
    assert!(chat.asked("outline") >= 1);
    assert_eq!(chat.asked("information_points"), 1);
    assert_eq!(
        answer["llm"]["calls"],
        chat.seen.lock().unwrap().len(),
        "{answer}"
    );
    assert_eq!(answer["llm"]["dropped_points"], 1, "{answer}");
    let tree = client.tree("towns").unwrap();
    assert_eq!(tree["children"][0]["title"], "Town", "{tree}");
    let dag = client.dag_listing("towns", Some(2)).unwrap();
    assert!(
        dag["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["written"] == true),
        "{dag}"
    );
    let options = edudb::AskOptions {
        budget: 64,
        ..Default::default()
    };
    let asked = client.ask("Who opened a library?", &options).unwrap();
    assert_eq!(asked["answer"], "Mira7 did.");
    assert_eq!(asked["stopped"], "enough");
    assert_eq!(asked["cited"], serde_json::json!([asked["evidence"][0]]));
    // One document's bytes with the model's tree go as a job of one; its
    // refusal keeps its class.
    let outlined = edudb::IngestOptions {
        structurer: edudb::Structurer::Llm,
        ..Default::default()
    };
    let receipt = client
        .ingest_bytes(
            "town",
            b"Town 2 lies beside a river.".to_vec(),
            outlined.clone(),
        )
        .unwrap();
    assert_eq!(receipt["id"], "town", "{receipt}");
    assert_eq!(client.tree("town").unwrap()["children"][0]["title"], "Town");
    match client.ingest_bytes("empty", Vec::new(), outlined) {
        Err(Error::Served { class, .. }) => assert_eq!(class, "user"),
        other => panic!("{other:?}"),
    }
    running.stop().unwrap();
}
