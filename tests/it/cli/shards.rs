//! A shard set through the command line: made by `init --shards`, filled
//! by `ingest`, listed, queried, asked, shown, checked, reindexed, backed
//! up, vacuumed and removed from as one store, and refused by the commands
//! that read one store's own files.

use serde_json::Value;

use crate::support::{edudb, rfc_sources, spawn_server, stderr, stop_server, text};

/// The first `count` RFCs' paths.
fn rfc_files(count: usize) -> Vec<String> {
    (rfc_sources(count).iter())
        .map(|s| match &s.origin {
            edudb::ingest::sources::Origin::File(path) => path.to_string_lossy().into_owned(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// `ingest -q` of `files`.
fn quiet_ingest(files: &[String]) -> Vec<&str> {
    (["ingest", "-q"].into_iter())
        .chain(files.iter().map(String::as_str))
        .collect()
}

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_shard_set_is_made_filled_queried_and_emptied_like_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let (set, one) = (dir.path().join("set"), dir.path().join("one"));
    let made = json(&edudb(&set, &["--json", "init", "--shards", "3"]));
    assert_eq!(made["shards"], 3);
    let files = rfc_files(10);
    let ingest = quiet_ingest(&files);
    for db in [&set, &one] {
        let out = edudb(db, &ingest);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let listed = |db| {
        let docs = json(&edudb(db, &["--json", "docs"]));
        (docs.as_array().unwrap().iter())
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(&set), listed(&one));
    assert_eq!(listed(&set).len(), 10);
    // Each document sits in the store its id places it in.
    for id in listed(&set) {
        let shard = edudb::shard_of(&id, 3);
        let store = set.join(format!("shard-{shard:03}"));
        let held = json(&edudb(&store, &["--json", "docs"]));
        assert!(
            held.as_array()
                .unwrap()
                .iter()
                .any(|d| d["id"] == id.as_str())
        );
    }
    let statement = "SELECT SPANS FROM * SEED BM25($q) TRAVERSE BUDGET 400 TOKENS";
    for question in ["lifetime elision in impls", "drawbacks of the new syntax"] {
        let param = format!("q={question}");
        let answer = |db| {
            let mut answer = json(&edudb(
                db,
                &["query", statement, "-p", &param, "--format", "json"],
            ));
            answer.as_object_mut().unwrap().remove("elapsed_ms");
            answer
        };
        let sharded = answer(&set);
        assert!(!sharded["results"].as_array().unwrap().is_empty());
        assert_eq!(sharded, answer(&one), "{question}");
    }
    let id = listed(&set)[4].clone();
    for command in [vec!["tree", id.as_str()], vec!["show", id.as_str(), "0..3"]] {
        let out = edudb(&set, &command);
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        assert_eq!(text(&out), text(&edudb(&one, &command)), "{command:?}");
    }
    for db in [&set, &one] {
        let out = edudb(db, &["rm", &id]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(listed(&set).len(), 9);
    assert!(!listed(&set).contains(&id));
    // Counts, searches, checks and rebuilt indexes over every store, as
    // one store holding the same documents gives them.
    let stats = json(&edudb(&set, &["--json", "stats"]));
    assert_eq!(stats["documents"], 9);
    let search = ["--json", "search", "trait AND objects", "--limit", "5"];
    let hits = json(&edudb(&set, &search));
    assert!(!hits.as_array().unwrap().is_empty());
    assert_eq!(hits, json(&edudb(&one, &search)));
    let counts = |report: &Value| {
        (
            report["documents"].clone(),
            report["fulltext_entries"].clone(),
            report["vectors"].clone(),
        )
    };
    let checked = json(&edudb(&set, &["--json", "check"]));
    assert_eq!(checked["damaged"], serde_json::json!([]));
    assert_eq!(
        counts(&checked),
        counts(&json(&edudb(&one, &["--json", "check"])))
    );
    let rebuilt = json(&edudb(&set, &["--json", "reindex"]));
    let rebuilt_one = json(&edudb(&one, &["--json", "reindex"]));
    assert_eq!(rebuilt["fulltext_entries"], rebuilt_one["fulltext_entries"]);
    assert_eq!(rebuilt["vectors"], rebuilt_one["vectors"]);
    assert_eq!(rebuilt["skipped"], serde_json::json!([]));
    // A backup of a set is a set of the same documents; a vacuumed set
    // answers as before.
    let copy = dir.path().join("copy");
    let backed_up = json(&edudb(&set, &["--json", "backup", copy.to_str().unwrap()]));
    assert_eq!(backed_up["documents"], 9);
    assert_eq!(listed(&copy), listed(&set));
    let question = "q=lifetime elision in impls";
    let answer = |db| {
        let mut answer = json(&edudb(
            db,
            &["query", statement, "-p", question, "--format", "json"],
        ));
        answer.as_object_mut().unwrap().remove("elapsed_ms");
        answer
    };
    let before = answer(&set);
    assert_eq!(answer(&copy), before);
    let vacuumed = json(&edudb(&set, &["--json", "vacuum"]));
    assert_eq!(vacuumed["documents"], 9);
    assert_eq!(answer(&set), before);
    // What reads one store's own files says what the directory is.
    let out = edudb(
        &set,
        &["salvage", dir.path().join("saved").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is a shard set"), "{}", stderr(&out));
}

/// `ask` over a shard set reads the evidence one store of the same
/// documents gives (the real chat server judges it).
#[test]
fn a_shard_set_is_asked_as_one_store() {
    let Some(url) = crate::support::chat_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (set, one) = (dir.path().join("set"), dir.path().join("one"));
    json(&edudb(&set, &["--json", "init", "--shards", "2"]));
    let files = rfc_files(6);
    let ingest = quiet_ingest(&files);
    let llm = ["--llm-url", url.as_str(), "--llm-model", "smollm2"];
    let evidence = |db| {
        let ask = [
            "--json",
            "ask",
            "How are lifetimes elided?",
            "--budget",
            "80",
            "--group",
            "8",
            "--no-answer",
        ];
        json(&edudb(db, &[&ask[..], &llm[..]].concat()))["evidence"].clone()
    };
    for db in [&set, &one] {
        assert!(edudb(db, &ingest).status.success());
    }
    let asked = evidence(&set);
    assert!(!asked.as_array().unwrap().is_empty());
    assert_eq!(asked, evidence(&one));
}

#[test]
fn a_served_shard_set_answers_forwarded_commands_and_http_as_one_store() {
    use edudb::serve::{Api, Client};
    let dir = tempfile::tempdir().unwrap();
    let (set, one) = (dir.path().join("set"), dir.path().join("one"));
    json(&edudb(&set, &["--json", "init", "--shards", "3"]));
    let files = rfc_files(8);
    let ingest = quiet_ingest(&files);
    assert!(edudb(&one, &ingest).status.success());
    let (server, address, socket) = spawn_server(&set);
    assert_eq!(socket, set.join(edudb::serve::SOCKET_FILE));
    // Through the server's socket, as every command on a served store goes.
    let out = edudb(&set, &ingest);
    assert!(out.status.success(), "{}", stderr(&out));
    let statement = "SELECT SPANS FROM * SEED BM25('trait objects') PROPAGATE BUDGET 300 TOKENS";
    let forwarded = |db| {
        let mut answer = json(&edudb(db, &["query", statement, "--format", "json"]));
        answer.as_object_mut().unwrap().remove("elapsed_ms");
        answer
    };
    assert_eq!(forwarded(&set), forwarded(&one));
    let first = files[0].rsplit('/').next().unwrap().trim_end_matches(".md");
    for command in [vec!["--json", "docs"], vec!["tree", first]] {
        let out = edudb(&set, &command);
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        assert_eq!(text(&out), text(&edudb(&one, &command)), "{command:?}");
    }
    assert_eq!(json(&edudb(&set, &["--json", "check"]))["documents"], 8);
    let saved = dir.path().join("saved");
    let out = edudb(&set, &["salvage", saved.to_str().unwrap()]);
    assert!(stderr(&out).contains("is a shard set"), "{}", stderr(&out));
    // Over HTTP, as a client of the served API.
    let client = Client::connect(&address, None).unwrap();
    let local = edudb::Db::open(&one).unwrap();
    assert_eq!(
        client.documents(None).unwrap(),
        Api::documents(&local, None).unwrap()
    );
    let answer = |api: &dyn Api| {
        let mut answer = api.query(statement, &edudb::Params::new(), false).unwrap();
        answer.as_object_mut().unwrap().remove("elapsed_ms");
        answer
    };
    assert_eq!(answer(&client), answer(&local));
    assert_eq!(client.stats().unwrap()["shards"], 3);
    let refused = client.session("trip").unwrap_err();
    assert!(refused.to_string().contains("shard set"), "{refused}");
    client.remove(first).unwrap();
    assert_eq!(client.documents(None).unwrap().as_array().unwrap().len(), 7);
    drop(local);
    stop_server(server, &socket);
}
