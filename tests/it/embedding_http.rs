//! The OpenAI-compatible HTTP embedder.
//!
//! The first tests use a real model server (all-MiniLM-L6-v2 from
//! `.ci/embedding-server`, its base URL in `EDUDB_EMBEDDING_URL`); they skip
//! with a notice when it is not set, and fail instead when
//! `EDUDB_REQUIRE_EMBEDDING_SERVER=1`. The rest run against scripted
//! loopback HTTP/1.1 servers that play the failure modes: error statuses,
//! malformed replies, silence.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use edudb::compute::embed::http::{HttpConfig, HttpEmbedder};
use edudb::compute::embed::{EmbedError, Embedder, EmbedderConfig, dot};
use serde_json::{Value, json};

use crate::scripted::{Received, Reply, ScriptedServer, answer};

/// How long a call may take before a test calls it hung: generous, since
/// timed tests must not fail on a slow or loaded machine.
const HANG: Duration = Duration::from_secs(120);
use crate::support::{ingest_markdown, model_server, selection};

// ---------------------------------------------------------------------------
// Against the real model server

fn minilm(url: &str) -> HttpEmbedder {
    HttpEmbedder::new(HttpConfig::new(url, "all-MiniLM-L6-v2")).unwrap()
}

fn embed_one(embedder: &HttpEmbedder, text: &str) -> Vec<f32> {
    embedder.embed(&[text]).unwrap().remove(0)
}

fn assert_unit(v: &[f32]) {
    let norm = dot(v, v).sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
}

/// 150 different sentences.
fn sentences() -> Vec<String> {
    let subjects = [
        "The cat",
        "A chemist",
        "My neighbour",
        "The committee",
        "A pilot",
    ];
    let verbs = ["studies", "ignores", "paints", "describes", "sells"];
    let objects = [
        "the harbour",
        "old maps",
        "a violin",
        "quantum dots",
        "tax law",
        "ripe figs",
    ];
    let mut out = Vec::new();
    for s in subjects {
        for v in verbs {
            for o in objects {
                out.push(format!("{s} {v} {o}."));
            }
        }
    }
    out
}

#[test]
fn real_server_dimension_is_learned_and_named_in_the_identity() {
    let Some(url) = model_server() else { return };
    let embedder = minilm(&url);
    assert_eq!(embedder.dimension(), 384);
    assert_eq!(embedder.identity(), "openai:all-MiniLM-L6-v2:384");
    let vectors = embedder
        .embed(&["hello world", "edudb stores documents"])
        .unwrap();
    assert_eq!(vectors.len(), 2);
    for v in &vectors {
        assert_eq!(v.len(), 384);
        assert_unit(v);
    }
    // A configured dimension is used as is (no probe), and a built store
    // config gives the same embedder.
    let mut config = HttpConfig::new(url.as_str(), "all-MiniLM-L6-v2");
    config.dimension = Some(384);
    let built = EmbedderConfig::Http(config).build().unwrap();
    assert_eq!(built.identity(), embedder.identity());
    let again = built.embed(&["hello world"]).unwrap();
    assert!(dot(&again[0], &vectors[0]) > 0.999);
}

#[test]
fn real_server_close_meanings_score_closer() {
    let Some(url) = model_server() else { return };
    let embedder = minilm(&url);
    let food = embed_one(&embedder, "A man is eating food.");
    let bread = embed_one(&embedder, "A man is eating a piece of bread.");
    let drums = embed_one(&embedder, "A monkey is playing drums.");
    let (near, far) = (dot(&food, &bread), dot(&food, &drums));
    assert!(
        near > far + 0.3,
        "eating food~bread {near}, food~drums {far}"
    );

    // A paraphrase sharing no content word.
    let reset = embed_one(&embedder, "How do I reset my password?");
    let forgot = embed_one(
        &embedder,
        "I forgot my login credentials and need new ones.",
    );
    let weather = embed_one(&embedder, "The weather in Lisbon is sunny today.");
    let (near, far) = (dot(&reset, &forgot), dot(&reset, &weather));
    assert!(
        near > far + 0.3,
        "password paraphrase {near}, unrelated {far}"
    );
}

/// The first document a query's selection returns, if any.
fn top_doc(db: &edudb::Db, statement: &str) -> Option<String> {
    let found = selection(db, statement);
    found.items.first().map(|i| i.doc.clone())
}

#[test]
fn real_server_hybrid_finds_a_paraphrase_that_bm25_misses() {
    let Some(url) = model_server() else { return };
    let dir = tempfile::TempDir::new().unwrap();
    let options = edudb::OpenOptions {
        create: true,
        embedder: Some(EmbedderConfig::Http(HttpConfig::new(
            url.as_str(),
            "all-MiniLM-L6-v2",
        ))),
        ..Default::default()
    };
    let db = edudb::Db::open_with(dir.path().join("db"), &options).unwrap();
    let docs = [
        (
            "account",
            "# Account\n\n## Recovery\n\nIf you forgot your login credentials, the help desk issues new ones.\n",
        ),
        (
            "garden",
            "# Garden\n\n## Watering\n\nHow often do I water tomatoes? Every morning, before the heat.\n",
        ),
        (
            "kitchen",
            "# Kitchen\n\n## Bread\n\nKnead the dough, let it rise, then bake my loaf in a hot oven.\n",
        ),
    ];
    for (id, text) in docs {
        ingest_markdown(&db, id, text);
    }
    assert!(db.embedder().identity().contains("all-MiniLM-L6-v2"));
    let question = "How do I reset my password?";
    let bm25 = top_doc(
        &db,
        &format!("SELECT FROM * SEED BM25('{question}') ORDER BY SCORE LIMIT 1"),
    );
    assert_ne!(bm25.as_deref(), Some("account"), "BM25 should not match");
    for seed in [
        format!("NEAR('{question}')"),
        format!("HYBRID('{question}', 0.5)"),
    ] {
        let top = top_doc(
            &db,
            &format!("SELECT FROM * SEED {seed} ORDER BY SCORE LIMIT 1"),
        );
        assert_eq!(top.as_deref(), Some("account"), "{seed}");
    }
}

#[test]
fn real_server_large_input_comes_back_in_order() {
    let Some(url) = model_server() else { return };
    let mut config = HttpConfig::new(url.as_str(), "all-MiniLM-L6-v2");
    config.batch_size = 16;
    let embedder = HttpEmbedder::new(config).unwrap();
    let texts = sentences();
    assert_eq!(texts.len(), 150);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batched = embedder.embed(&refs).unwrap();
    assert_eq!(batched.len(), texts.len());
    for (i, (text, vector)) in texts.iter().zip(&batched).enumerate() {
        assert_unit(vector);
        let single = embed_one(&embedder, text);
        let cosine = dot(vector, &single);
        assert!(
            cosine > 0.999,
            "text {i} {text:?}: batched vs single cosine {cosine}"
        );
    }
    // The order check means something: neighbours differ.
    assert!(dot(&batched[0], &batched[1]) < 0.99);
}

#[test]
fn real_server_serves_concurrent_callers() {
    let Some(url) = model_server() else { return };
    let mut config = HttpConfig::new(url.as_str(), "all-MiniLM-L6-v2");
    config.batch_size = 8;
    let embedder = HttpEmbedder::new(config).unwrap();
    let texts = sentences();
    let expected: Vec<Vec<f32>> = texts.iter().map(|t| embed_one(&embedder, t)).collect();
    thread::scope(|scope| {
        for part in 0..4 {
            let (embedder, texts, expected) = (&embedder, &texts, &expected);
            scope.spawn(move || {
                for round in 0..3 {
                    let range = (part * 30 + round * 5)..(part * 30 + round * 5 + 30);
                    let refs: Vec<&str> = texts[range.clone()].iter().map(String::as_str).collect();
                    let got = embedder.embed(&refs).unwrap();
                    for (vector, want) in got.iter().zip(&expected[range]) {
                        assert!(dot(vector, want) > 0.999);
                    }
                }
            });
        }
    });
}

// ---------------------------------------------------------------------------
// Against scripted loopback servers

/// A config for `server` with fast retries.
fn config(server: &ScriptedServer) -> HttpConfig {
    let mut config = HttpConfig::new(server.base_url.as_str(), "fake-model");
    config.dimension = Some(3);
    config.backoff_ms = 10;
    config
}

/// The texts a request asked to embed.
fn inputs(request: &Received) -> Vec<String> {
    request.body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The double's model: three numbers that differ between texts.
fn fake_vector(text: &str) -> Vec<f32> {
    let bytes = text.as_bytes();
    let sum: u32 = bytes.iter().map(|&b| u32::from(b)).sum();
    let weighted: u32 = bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| (i as u32 + 1) * u32::from(b))
        .sum();
    vec![bytes.len() as f32, sum as f32, weighted as f32]
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    edudb::compute::embed::normalise(&mut v);
    v
}

/// An embeddings reply for `request`, its items in reverse order (so the
/// embedder must place them by `index`).
/// A reply embedding every input of `request` (as [`fake_vector`]s, in
/// reverse order of their indexes).
pub fn embeddings_reply(request: &Received) -> Reply {
    let data: Vec<Value> = inputs(request)
        .iter()
        .enumerate()
        .rev()
        .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": fake_vector(text)}))
        .collect();
    answer(
        200,
        json!({"object": "list", "data": data, "model": "fake-model"}).to_string(),
    )
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{got:?} != {want:?}");
    }
}

fn texts(n: usize, prefix: &str) -> Vec<String> {
    (0..n).map(|i| format!("{prefix} text {i}")).collect()
}

fn refs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

#[test]
fn batches_are_split_and_reassembled_by_index() {
    let server = ScriptedServer::start(|_, request| embeddings_reply(request));
    let mut config = config(&server);
    config.batch_size = 16;
    config.base_url.push('/'); // a trailing slash is tolerated
    let embedder = HttpEmbedder::new(config).unwrap();
    let texts = texts(150, "ordered");
    let vectors = embedder.embed(&refs(&texts)).unwrap();
    assert_eq!(vectors.len(), 150);
    for (text, vector) in texts.iter().zip(&vectors) {
        assert_close(vector, &normalised(fake_vector(text)));
    }
    // The double's vectors tell the texts apart, so the order check holds.
    let distinct: HashSet<String> = vectors.iter().map(|v| format!("{v:?}")).collect();
    assert_eq!(distinct.len(), texts.len());
    let requests = server.requests();
    assert_eq!(requests.len(), 10); // ceil(150 / 16)
    let mut seen = Vec::new();
    for request in &requests {
        assert_eq!(request.path, "/v1/embeddings");
        assert_eq!(request.body["model"], "fake-model");
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("authorization"), None);
        let inputs = inputs(request);
        assert!(!inputs.is_empty() && inputs.len() <= 16);
        seen.extend(inputs);
    }
    seen.sort();
    let mut all = texts.clone();
    all.sort();
    assert_eq!(seen, all);
}

#[test]
fn empty_input_sends_nothing() {
    let server = ScriptedServer::start(|_, request| embeddings_reply(request));
    let embedder = HttpEmbedder::new(config(&server)).unwrap();
    assert!(embedder.embed(&[]).unwrap().is_empty());
    assert_eq!(server.count(), 0);
}

#[test]
fn the_dimension_is_probed_only_when_not_configured() {
    let server = ScriptedServer::start(|_, request| embeddings_reply(request));
    let configured = HttpEmbedder::new(config(&server)).unwrap();
    assert_eq!(server.count(), 0);
    assert_eq!(configured.dimension(), 3);
    assert_eq!(configured.identity(), "openai:fake-model:3");

    let mut config = config(&server);
    config.dimension = None;
    let learned = HttpEmbedder::new(config).unwrap();
    assert_eq!(server.count(), 1);
    assert_eq!(learned.dimension(), 3);
    assert_eq!(learned.identity(), "openai:fake-model:3");
}

#[test]
fn concurrent_callers_get_their_own_vectors() {
    let server = ScriptedServer::start(|_, request| {
        thread::sleep(Duration::from_millis(5));
        embeddings_reply(request)
    });
    let mut config = config(&server);
    config.batch_size = 4;
    let embedder = HttpEmbedder::new(config).unwrap();
    thread::scope(|scope| {
        for caller in 0..4 {
            let embedder = &embedder;
            scope.spawn(move || {
                for round in 0..10 {
                    let texts = texts(
                        1 + (caller + round) % 9,
                        &format!("caller {caller} round {round}"),
                    );
                    let vectors = embedder.embed(&refs(&texts)).unwrap();
                    assert_eq!(vectors.len(), texts.len());
                    for (text, vector) in texts.iter().zip(&vectors) {
                        assert_close(vector, &normalised(fake_vector(text)));
                    }
                }
            });
        }
    });
}

#[test]
fn requests_in_flight_never_exceed_max_concurrency() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (now, top) = (Arc::clone(&in_flight), Arc::clone(&peak));
    let server = ScriptedServer::start(move |_, request| {
        let current = now.fetch_add(1, Ordering::SeqCst) + 1;
        top.fetch_max(current, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(40));
        now.fetch_sub(1, Ordering::SeqCst);
        embeddings_reply(request)
    });
    let mut config = config(&server);
    config.batch_size = 4;
    config.max_concurrency = 3;
    let embedder = HttpEmbedder::new(config).unwrap();
    thread::scope(|scope| {
        for caller in 0..2 {
            let embedder = &embedder;
            scope.spawn(move || {
                let texts = texts(40, &format!("caller {caller}"));
                assert_eq!(embedder.embed(&refs(&texts)).unwrap().len(), 40);
            });
        }
    });
    assert_eq!(server.count(), 20);
    let peak = peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak of {peak} requests in flight");
}

#[test]
fn a_429_is_retried_after_retry_after() {
    let server = ScriptedServer::start(|number, request| match number {
        0 => Reply::Answer {
            status: 429,
            headers: vec![("Retry-After", "1".into())],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        },
        _ => embeddings_reply(request),
    });
    let embedder = HttpEmbedder::new(config(&server)).unwrap();
    let start = Instant::now();
    let vectors = embedder.embed(&["alpha", "beta"]).unwrap();
    let elapsed = start.elapsed();
    assert_close(&vectors[1], &normalised(fake_vector("beta")));
    assert_eq!(server.count(), 2);
    assert!(
        elapsed >= Duration::from_millis(950),
        "retried after {elapsed:?}, not Retry-After's 1 s"
    );
    // Only a hang is bounded: a loaded machine may take its time.
    assert!(elapsed < HANG, "{elapsed:?}");
}

#[test]
fn server_errors_are_retried_max_retries_times_then_reported() {
    let long_body = format!("model exploded {}", "x".repeat(1000));
    let body = long_body.clone();
    let server = ScriptedServer::start(move |_, _| answer(500, body.clone()));
    let mut config = config(&server);
    config.max_retries = 2;
    let embedder = HttpEmbedder::new(config).unwrap();
    let err = embedder.embed(&["anything"]).unwrap_err();
    assert_eq!(server.count(), 3);
    let message = err.to_string();
    match err {
        EmbedError::Status { url, status, body } => {
            assert_eq!(status, 500);
            assert_eq!(url, format!("{}/embeddings", server.base_url));
            assert!(body.starts_with("model exploded xxx"), "{body}");
            assert!(
                body.chars().count() <= 201,
                "body of {} chars kept",
                body.chars().count()
            );
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    assert!(
        message.contains("500") && message.contains(&server.base_url),
        "{message}"
    );
}

#[test]
fn a_400_is_not_retried() {
    let server =
        ScriptedServer::start(|_, _| answer(400, r#"{"error":{"message":"input too long"}}"#));
    let embedder = HttpEmbedder::new(config(&server)).unwrap();
    let err = embedder.embed(&["anything"]).unwrap_err();
    assert!(
        matches!(&err, EmbedError::Status { status: 400, body, .. } if body.contains("input too long")),
        "{err:?}"
    );
    assert_eq!(server.count(), 1);
}

/// The error the embedder gives for a 200 reply with this body to a
/// request of three texts, and how many requests it made.
fn error_for_reply(body: &'static str) -> (EmbedError, usize) {
    let server = ScriptedServer::start(move |_, _| answer(200, body));
    let embedder = HttpEmbedder::new(config(&server)).unwrap();
    let err = embedder.embed(&["one", "two", "three"]).unwrap_err();
    (err, server.count())
}

fn assert_malformed(body: &'static str, needle: &str) {
    let (err, requests) = error_for_reply(body);
    assert_eq!(requests, 1, "a malformed reply is not retried");
    match &err {
        EmbedError::Malformed { url, message } => {
            assert!(
                url.starts_with("http://127.0.0.1:") && url.ends_with("/v1/embeddings"),
                "{url}"
            );
            assert!(message.contains(needle), "{needle:?} not in {message:?}");
        }
        other => panic!("expected Malformed for {body}, got {other:?}"),
    }
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
}

#[test]
fn malformed_replies_are_rejected() {
    assert_malformed("this is not json", "not an embeddings response");
    assert_malformed(r#"{"object":"list"}"#, "data");
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]}]}"#,
        "2 embeddings for 3 inputs",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]},{"index":1,"embedding":[0,0,1]}]}"#,
        "index 1 appears more than once",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]},{"index":3,"embedding":[0,0,1]}]}"#,
        "index 3 is out of range for 3 inputs",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]},{"embedding":[0,0,1]}]}"#,
        "index",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":"AACAPwAAAAAAAAAA"},{"index":1,"embedding":[0,1,0]},{"index":2,"embedding":[0,0,1]}]}"#,
        "invalid type",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]},{"index":2,"embedding":[0,"x",1]}]}"#,
        "invalid type",
    );
    assert_malformed(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1,0]},{"index":2,"embedding":[0,1e300,1]}]}"#,
        "outside the f32 range",
    );
}

#[test]
fn a_wrong_dimension_is_a_dimension_error() {
    let (err, requests) = error_for_reply(
        r#"{"data":[{"index":0,"embedding":[1,0,0]},{"index":1,"embedding":[0,1]},{"index":2,"embedding":[0,0,1]}]}"#,
    );
    assert_eq!(requests, 1);
    match err {
        EmbedError::Dimension {
            identity,
            expected,
            found,
        } => {
            assert_eq!(
                (identity.as_str(), expected, found),
                ("openai:fake-model:3", 3, 2)
            );
        }
        other => panic!("expected a dimension error, got {other:?}"),
    }
}

#[test]
fn a_probe_reply_must_be_usable() {
    let server =
        ScriptedServer::start(|_, _| answer(200, r#"{"data":[{"index":0,"embedding":[]}]}"#));
    let mut config = config(&server);
    config.dimension = None;
    let err = HttpEmbedder::new(config).unwrap_err();
    assert!(
        matches!(&err, EmbedError::Malformed { message, .. } if message.contains("empty")),
        "{err:?}"
    );
}

#[test]
fn a_silent_server_times_out() {
    let server = ScriptedServer::start(|_, _| Reply::Silence);
    let mut config = config(&server);
    config.timeout_secs = 1;
    config.max_retries = 0;
    let embedder = HttpEmbedder::new(config).unwrap();
    let start = Instant::now();
    let err = embedder.embed(&["hello?"]).unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(&err, EmbedError::Request { message, .. } if message.contains("no answer within 1 s")),
        "{err:?}"
    );
    assert!(err.to_string().contains(&server.base_url), "{err}");
    // It waited for the timeout (the error says so); only a hang is
    // bounded, since a loaded machine may take its time.
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < HANG,
        "{elapsed:?}"
    );
    assert_eq!(server.count(), 1);
}

#[test]
fn timeouts_are_retried() {
    let server = ScriptedServer::start(|number, request| match number {
        0 => Reply::Silence,
        _ => embeddings_reply(request),
    });
    let mut config = config(&server);
    config.timeout_secs = 1;
    let embedder = HttpEmbedder::new(config).unwrap();
    let vectors = embedder.embed(&["patience"]).unwrap();
    assert_close(&vectors[0], &normalised(fake_vector("patience")));
    assert_eq!(server.count(), 2);
}

#[test]
fn refused_connections_are_retried_then_reported() {
    // A port that was just free: nothing listens there now.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = HttpConfig::new(format!("http://127.0.0.1:{port}/v1"), "fake-model");
    config.dimension = Some(3);
    config.max_retries = 2;
    config.backoff_ms = 10;
    let embedder = HttpEmbedder::new(config).unwrap();
    let err = embedder.embed(&["anyone there?"]).unwrap_err();
    match &err {
        EmbedError::Request { url, message } => {
            assert_eq!(url, &format!("http://127.0.0.1:{port}/v1/embeddings"));
            assert!(message.contains("could not connect"), "{message}");
            assert!(message.contains("after 3 attempts"), "{message}");
        }
        other => panic!("expected a request error, got {other:?}"),
    }
}

#[test]
fn a_missing_key_variable_is_a_config_error() {
    let server = ScriptedServer::start(|_, request| embeddings_reply(request));
    let mut config = config(&server);
    config.api_key_env = Some("EDUDB_TEST_KEY_THAT_IS_NEVER_SET".into());
    let err = HttpEmbedder::new(config).unwrap_err();
    assert!(
        matches!(&err, EmbedError::Config(message)
            if message.contains("EDUDB_TEST_KEY_THAT_IS_NEVER_SET") && message.contains("not set")),
        "{err:?}"
    );
    assert_eq!(server.count(), 0);
}

#[test]
fn the_bearer_key_is_sent() {
    // Setting a variable is unsafe while other tests' threads read the
    // environment, so borrow one that is already set, header-safe, and long
    // enough not to turn up by chance in the debug output checked below.
    let (name, key) = std::env::vars()
        .find(|(_, value)| value.len() >= 12 && value.bytes().all(|b| b.is_ascii_graphic()))
        .expect("some environment variable with a plain value of 12+ characters");
    let want = format!("Bearer {key}");
    let expected = want.clone();
    let server = ScriptedServer::start(move |_, request| {
        if request.header("authorization") == Some(expected.as_str()) {
            embeddings_reply(request)
        } else {
            answer(401, r#"{"error":{"message":"bad key"}}"#)
        }
    });
    let mut config = config(&server);
    config.api_key_env = Some(name.clone());
    let embedder = HttpEmbedder::new(config).unwrap();
    assert_eq!(embedder.embed(&["secret"]).unwrap().len(), 1);
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(want.as_str())
    );
    // The key never shows in the embedder's debug output.
    assert!(!format!("{embedder:?}").contains(&key));
}

/// A change that makes a config unusable.
type Spoil = fn(&mut HttpConfig);

#[test]
fn bad_settings_are_config_errors() {
    let cases: [(&str, Spoil); 7] = [
        ("base URL", |c| c.base_url = "not a url".into()),
        ("http:// or https://", |c| {
            c.base_url = "ftp://example.com/v1".into()
        }),
        ("batch_size", |c| c.batch_size = 0),
        ("max_concurrency", |c| c.max_concurrency = 0),
        ("timeout_secs", |c| c.timeout_secs = 0),
        ("dimension", |c| c.dimension = Some(0)),
        ("model", |c| c.model = " ".into()),
    ];
    for (needle, spoil) in cases {
        let mut config = HttpConfig::new("http://127.0.0.1:9/v1", "m");
        config.dimension = Some(3);
        spoil(&mut config);
        match HttpEmbedder::new(config) {
            Err(EmbedError::Config(message)) => {
                assert!(message.contains(needle), "{needle:?}: {message}")
            }
            other => panic!("{needle}: expected a config error, got {other:?}"),
        }
    }
}

#[test]
fn stored_configs_fill_in_defaults() {
    let stored = r#"{"kind":"http","base_url":"http://127.0.0.1:8080/v1","model":"m"}"#;
    let config: EmbedderConfig = serde_json::from_str(stored).unwrap();
    let defaults = HttpConfig::new("http://127.0.0.1:8080/v1", "m");
    assert_eq!(config, EmbedderConfig::Http(defaults.clone()));
    assert_eq!(
        (
            defaults.api_key_env,
            defaults.dimension,
            defaults.batch_size,
            defaults.max_concurrency,
            defaults.timeout_secs,
            defaults.max_retries,
            defaults.backoff_ms,
        ),
        (None, None, 64, 4, 30, 4, 200)
    );
    let mut learned = HttpConfig::new("http://127.0.0.1:8080/v1", "m");
    learned.dimension = Some(384);
    learned.api_key_env = Some("OPENAI_API_KEY".into());
    let config = EmbedderConfig::Http(learned);
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(
        serde_json::from_str::<EmbedderConfig>(&json).unwrap(),
        config
    );
    assert!(json.contains(r#""api_key_env":"OPENAI_API_KEY""#), "{json}");
}

#[test]
fn usable_from_inside_an_async_runtime() {
    let server = ScriptedServer::start(|_, request| embeddings_reply(request));
    let config = config(&server);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let vectors = runtime.block_on(async move {
        let embedder = HttpEmbedder::new(config).unwrap();
        let vectors = embedder.embed(&["from async"]).unwrap();
        drop(embedder); // must not panic inside the runtime
        vectors
    });
    assert_close(&vectors[0], &normalised(fake_vector("from async")));
}
