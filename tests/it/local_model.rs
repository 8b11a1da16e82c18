//! The in-process transformer (candle): all-MiniLM-L6-v2's vectors against
//! the reference numpy server, its cross attention, a store built on it
//! (vectors and DAG attention from the model) and the CLI's `--embedder
//! local`. Tests needing the model skip unless `EDUDB_LOCAL_MODEL` names
//! its directory (`.ci/embedding-server model-dir`; CI sets it and
//! `EDUDB_REQUIRE_LOCAL_MODEL=1`).

use std::path::Path;
use std::sync::Arc;

use edudb::compute::device::Device;
use edudb::compute::embed::http::{HttpConfig, HttpEmbedder};
use edudb::compute::embed::local::LocalEmbedder;
use edudb::compute::embed::{EmbedError, Embedder, EmbedderConfig, dot};
use edudb::compute::transformer::LocalModel;
use edudb::ingest::dag::attention::ComputedAttention;
use edudb::ingest::dag::ip::EduVectors;
use edudb::ingest::dag::model_attention::ModelAttention;
use edudb::ingest::pipeline::{analyze, build_dag, embed_document};
use edudb::{Db, Error, Format, OpenOptions};

use crate::support::{edudb, ingest_markdown, local_model, model_server, rfcs, selection, stderr};

fn load(dir: &Path) -> LocalEmbedder {
    LocalEmbedder::load(dir).unwrap()
}

/// Texts of every shape the embedder meets: short, punctuated, non-ASCII,
/// and one far past the 256-token truncation.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "Tokenisation: naïve café owners' résumés (1998–2003)!",
        "x",
        "How do I reset my password?",
    ]
    .iter()
    .map(|t| t.to_string())
    .collect();
    texts.push("The committee reviewed the harbour accounts again. ".repeat(60));
    texts
}

#[test]
fn vectors_match_the_reference_implementation_within_1e4_cosine() {
    let (Some(dir), Some(url)) = (local_model(), model_server()) else {
        return;
    };
    let local = load(&dir);
    let reference = HttpEmbedder::new(HttpConfig::new(url, "all-MiniLM-L6-v2")).unwrap();
    assert_eq!(local.dimension(), 384);
    assert!(
        local.identity().starts_with("local:model:"),
        "{}",
        local.identity()
    );
    let texts = texts();
    let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = local.embed(&inputs).unwrap();
    let theirs = reference.embed(&inputs).unwrap();
    for ((text, a), b) in texts.iter().zip(&ours).zip(&theirs) {
        assert!(
            (dot(a, a).sqrt() - 1.0).abs() < 1e-5,
            "not unit: {text:.40}"
        );
        let cosine = dot(a, b);
        assert!(cosine > 1.0 - 1e-4, "cosine {cosine} for {text:.40}");
    }
}

#[test]
fn close_meanings_score_closer_and_a_batch_equals_its_singles() {
    let Some(dir) = local_model() else { return };
    let local = load(&dir);
    let texts = texts();
    let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batch = local.embed(&inputs).unwrap();
    // The figures sentence-transformers gives for this model.
    assert!((dot(&batch[0], &batch[1]) - 0.7553).abs() < 0.002);
    assert!((dot(&batch[0], &batch[2]) + 0.105).abs() < 0.002);
    for (text, batched) in inputs.iter().zip(&batch) {
        let single = local.embed(&[text]).unwrap().remove(0);
        let cosine = dot(&single, batched);
        assert!(cosine > 1.0 - 1e-5, "{cosine} for {text:.40}");
    }
    assert!(local.embed(&[]).unwrap().is_empty());
}

#[test]
fn cross_attention_is_a_share_of_each_query_tokens_attention() {
    let Some(dir) = local_model() else { return };
    let model = LocalModel::load(&dir).unwrap();
    let queries = model.tokens("The oven bakes bread.").unwrap();
    let keys = model
        .tokens("Knead the dough, let it rise, then bake the loaf in a hot oven.")
        .unwrap();
    let cross = model.cross_attention(&queries, &keys).unwrap();
    assert_eq!(
        (cross.query_tokens, cross.key_tokens),
        (queries.len(), keys.len())
    );
    assert_eq!(cross.weights.len(), queries.len() * keys.len());
    for row in cross.weights.chunks(keys.len()) {
        let mass: f32 = row.iter().sum();
        assert!(row.iter().all(|w| (0.0..=1.0).contains(w)), "{row:?}");
        assert!(mass > 0.0 && mass <= 1.0 + 1e-5, "row mass {mass}");
    }
    let too_long = vec![queries[0]; model.max_positions()];
    let err = model.cross_attention(&queries, &too_long).unwrap_err();
    assert!(
        err.to_string().contains("longer than the model's 512"),
        "{err}"
    );
}

#[test]
fn batched_cross_attention_equals_each_pair_read_alone() {
    let Some(dir) = local_model() else { return };
    let model = LocalModel::load(&dir).unwrap();
    let tokens = |t: &str| model.tokens(t).unwrap();
    let texts = [
        tokens("The oven bakes bread."),
        tokens("Knead the dough, let it rise, then bake the loaf in a hot oven."),
        tokens("x"),
        tokens(&"The committee reviewed the harbour accounts again. ".repeat(12)),
    ];
    let pairs: Vec<(&[u32], &[u32])> = (0..texts.len())
        .flat_map(|q| (0..texts.len()).map(move |k| (q, k)))
        .map(|(q, k)| (&texts[q][..], &texts[k][..]))
        .collect();
    let batched = model.cross_attentions(&pairs).unwrap();
    assert_eq!(batched.len(), pairs.len());
    for ((queries, keys), together) in pairs.iter().zip(&batched) {
        let alone = model.cross_attention(queries, keys).unwrap();
        assert_eq!(
            (together.query_tokens, together.key_tokens),
            (alone.query_tokens, alone.key_tokens)
        );
        let difference = (together.weights.iter().zip(&alone.weights))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(difference < 1e-5, "largest difference {difference}");
    }
    assert!(model.cross_attentions(&[]).unwrap().is_empty());
}

#[test]
fn a_missing_or_broken_model_directory_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = LocalModel::load(dir.path()).unwrap_err();
    assert!(matches!(err, EmbedError::Model { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot read config.json"), "{err}");
    std::fs::write(dir.path().join("config.json"), "{\"hidden_size\": 4}").unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
    std::fs::write(dir.path().join("model.safetensors"), b"").unwrap();
    let err = LocalModel::load(dir.path()).unwrap_err();
    assert!(err.to_string().contains("not a BERT config"), "{err}");
    // A store cannot be opened on it either.
    let options = OpenOptions {
        create: true,
        embedder: Some(EmbedderConfig::Local {
            model: dir.path().to_owned(),
        }),
        ..Default::default()
    };
    let err = Db::open_with(dir.path().join("db"), &options).unwrap_err();
    assert!(matches!(err, Error::Embedding(_)), "{err:?}");
}

#[test]
fn a_store_on_a_local_model_embeds_with_it_and_weights_its_dag_with_its_attention() {
    let Some(dir) = local_model() else { return };
    let store = tempfile::tempdir().unwrap();
    let config = EmbedderConfig::Local { model: dir.clone() };
    let options = OpenOptions {
        create: true,
        embedder: Some(config.clone()),
        ..Default::default()
    };
    let path = rfcs().join("0201-error-chaining.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let identity;
    {
        let db = Db::open_with(store.path().join("db"), &options).unwrap();
        identity = db.embedder().identity();
        assert!(identity.starts_with("local:"), "{identity}");
        ingest_markdown(&db, "rfc", &text);
        let stored = db.dag("rfc").unwrap();
        let doc = db.document("rfc").unwrap();
        stored.validate(doc.edus.len() as u32).unwrap();
        assert!(stored.weights.len() > 4, "the DAG has edges");
        for i in 0..stored.nodes.len() {
            let out: Vec<f32> = stored.edges_of(i).map(|(_, w)| w).collect();
            if !out.is_empty() {
                let sum: f32 = out.iter().sum();
                assert!((sum - 1.0).abs() < 1e-4, "node {i} out-weights sum {sum}");
            }
        }

        // The same document, vectors and points: the stored DAG is the one
        // the model's attention gives, not the hashed stand-in's.
        let embedder = load(&dir);
        let analysed = analyze("rfc", text.clone(), Format::Markdown).unwrap();
        let vectors = embed_document(&analysed, &embedder).unwrap();
        let dimension = vectors.dimension as usize;
        let model = embedder.transformer().unwrap();
        let by_model = build_dag(
            &analysed,
            EduVectors::packed(&vectors.edus, dimension),
            &ModelAttention::new(Arc::clone(&model), Device::Cpu),
        )
        .unwrap();
        let by_hash = build_dag(
            &analysed,
            EduVectors::packed(&vectors.edus, dimension),
            &ComputedAttention::new(Device::Cpu),
        )
        .unwrap();
        assert_eq!(stored, by_model);
        assert_eq!(by_model.nodes, by_hash.nodes);
        assert_ne!(by_model.weights, by_hash.weights);

        // A paraphrase sharing no content word is found by its meaning.
        ingest_markdown(
            &db,
            "account",
            "# Account\n\nIf you forgot your login credentials, the help desk issues new ones.\n",
        );
        let found = selection(
            &db,
            "SELECT FROM * SEED NEAR('How do I reset my password?') ORDER BY SCORE LIMIT 1",
        );
        assert_eq!(found.items[0].doc, "account");
    }
    // Reopened, the store uses the recorded model; another embedder is refused.
    let db = Db::open(store.path().join("db")).unwrap();
    assert_eq!(db.embedder().identity(), identity);
    drop(db);
    let hashed = OpenOptions {
        create: false,
        embedder: Some(EmbedderConfig::default()),
        ..Default::default()
    };
    let err = Db::open_with(store.path().join("db"), &hashed).unwrap_err();
    assert!(matches!(err, Error::EmbedderMismatch { .. }), "{err}");
}

#[test]
fn the_cli_runs_a_local_model_from_model_dir() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let doc = dir.path().join("account.md");
    std::fs::write(
        &doc,
        "# Account\n\nIf you forgot your login credentials, the help desk issues new ones.\n",
    )
    .unwrap();
    let out = edudb(
        &db,
        &["--embedder", "local", "ingest", doc.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--embedder local needs --model DIR"),
        "{}",
        stderr(&out)
    );
    let nowhere = dir.path().join("nowhere");
    let out = edudb(
        &db,
        &[
            "--embedder",
            "local",
            "--model",
            nowhere.to_str().unwrap(),
            "ingest",
            doc.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--model"), "{}", stderr(&out));

    let Some(model) = local_model() else { return };
    let out = edudb(
        &db,
        &[
            "--embedder",
            "local",
            "--model",
            model.to_str().unwrap(),
            "ingest",
            doc.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The recorded model serves later commands without the flags.
    let out = edudb(
        &db,
        &[
            "query",
            "SELECT FROM * SEED NEAR('How do I reset my password?') BUDGET 40 TOKENS",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("help desk"));
}

/// Records what an ingest says it is working on, and cancels its token
/// once a line containing `cancel_at` comes.
struct Steps {
    lines: std::sync::Mutex<Vec<String>>,
    cancel_at: Option<&'static str>,
    token: edudb::CancelToken,
}

impl edudb::Progress for Steps {
    fn working_on(&self, what: &str) {
        self.lines.lock().unwrap().push(what.to_owned());
        if self.cancel_at.is_some_and(|at| what.contains(at)) {
            self.token.cancel();
        }
    }
}

#[test]
fn a_long_documents_vectors_and_attention_are_told_as_they_go_and_can_be_cancelled() {
    let Some(dir) = local_model() else { return };
    let store = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        create: true,
        embedder: Some(EmbedderConfig::Local { model: dir }),
        ..Default::default()
    };
    let db = Db::open_with(store.path().join("db"), &options).unwrap();
    let sources =
        edudb::ingest::sources::expand(&[rfcs().join("0201-error-chaining.md")], None).unwrap();
    let id = sources[0].id.clone();
    let run = |cancel_at| {
        let steps = Steps {
            lines: Default::default(),
            cancel_at,
            token: edudb::CancelToken::new(),
        };
        let result = db.ingest(
            &sources,
            edudb::IngestOptions::default(),
            &steps,
            &steps.token,
        );
        (result, steps.lines.into_inner().unwrap())
    };
    // Cancelled at the first attention step: an error, and nothing written.
    let (result, lines) = run(Some("attention windows"));
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{id} vectors "))),
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("attention")).count(),
        1,
        "{lines:?}"
    );
    assert!(db.document(&id).is_err());
    // Run through: every stage's last step is its whole.
    let (result, lines) = run(None);
    result.unwrap();
    for stage in ["vectors", "attention windows"] {
        let last = (lines.iter())
            .rfind(|l| l.starts_with(&format!("{id} {stage} ")))
            .unwrap_or_else(|| panic!("no {stage} step in {lines:?}"));
        let (done, total) = last.rsplit_once(' ').unwrap().1.split_once('/').unwrap();
        assert_eq!(done, total, "{lines:?}");
    }
    assert!(db.document(&id).is_ok());
}

#[test]
fn written_points_are_linked_by_the_local_models_attention() {
    let Some(dir) = local_model() else { return };
    use crate::written_points::{faithful_but_for_one, towns, written};
    let store = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        store.path().join("db"),
        &OpenOptions {
            create: true,
            embedder: Some(EmbedderConfig::Local { model: dir }),
            chat: Some(Arc::new(faithful_but_for_one())),
            ..Default::default()
        },
    )
    .unwrap();
    db.ingest_bytes("towns", towns().into_bytes(), written())
        .unwrap();
    let doc = db.document("towns").unwrap();
    let dag = db.dag("towns").unwrap();
    dag.validate(doc.edus.len() as u32).unwrap();
    // The model reads each written point beside each lower node (teacher
    // forcing): every point gets edges and coordinates in its span, and
    // they are the model's, not what the hashed stand-in gives.
    let written_nodes: Vec<usize> = (0..dag.nodes.len())
        .filter(|&i| dag.nodes[i].text.is_some())
        .collect();
    assert!(!written_nodes.is_empty());
    for &i in &written_nodes {
        let node = &dag.nodes[i];
        assert!(dag.edges_of(i).next().is_some(), "{node:?}");
        assert!((1..=3).contains(&node.points.len()));
        assert!(
            node.points
                .iter()
                .all(|&e| node.span.first <= e && e <= node.span.last)
        );
    }
    let hashed = Db::open_with(
        store.path().join("hashed"),
        &OpenOptions {
            create: true,
            chat: Some(Arc::new(faithful_but_for_one())),
            ..Default::default()
        },
    )
    .unwrap();
    hashed
        .ingest_bytes("towns", towns().into_bytes(), written())
        .unwrap();
    assert_ne!(hashed.dag("towns").unwrap().weights, dag.weights);
}
