//! The vector index end to end with the built-in hashed embedder: NEAR and
//! HYBRID seeds, document scopes, replacement and removal, persistence and
//! recovery, embedder identity, and ingest that never half-writes when
//! embedding fails.

use edudb::{Db, EmbedderConfig, Error, HttpConfig, Item, OpenOptions, Params};
use tempfile::TempDir;

use crate::support::{self, ingest_markdown, markdown, selection, selection_with};

const TOPICS: [(&str, &str); 4] = [
    (
        "garden",
        "# Garden\n\n## Watering\n\nWater tomatoes every morning before the heat. Drip lines deliver water slowly to the roots.\n\n## Pruning\n\nPrune roses in late winter while they are dormant.\n",
    ),
    (
        "kitchen",
        "# Kitchen\n\n## Bread\n\nKnead the dough for ten minutes, then let it rise until doubled. Bake the loaf in a hot oven.\n\n## Soup\n\nSimmer the vegetables slowly in stock.\n",
    ),
    (
        "network",
        "# Networking\n\n## Retries\n\nClients should receive an error and retry with exponential backoff. Servers answer 429 when overloaded.\n\n## Timeouts\n\nEvery request needs a deadline.\n",
    ),
    (
        "astronomy",
        "# Astronomy\n\n## Planets\n\nJupiter is the largest planet, a gas giant with dozens of moons.\n\n## Stars\n\nStars fuse hydrogen into helium in their cores.\n",
    ),
];

/// A store holding the `TOPICS`.
fn store() -> (TempDir, Db) {
    let (dir, db) = support::store();
    ingest_topics(&db);
    (dir, db)
}

/// Ingests the `TOPICS` into `db`.
fn ingest_topics(db: &Db) {
    for (id, text) in TOPICS {
        ingest_markdown(db, id, text);
    }
}

fn docs_of(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.doc.as_str()).collect()
}

#[test]
fn near_ranks_the_matching_document_first() {
    let (_dir, db) = store();
    let items = selection_with(
        &db,
        "SELECT FROM * SEED NEAR($q) ORDER BY SCORE LIMIT 3",
        &Params::new().text("q", "watering tomatoes in the morning"),
    )
    .items;
    assert_eq!(items[0].doc, "garden", "{items:#?}");
    assert!(items[0].text.contains("tomatoes"));
    assert!(items.iter().all(|i| i.score <= items[0].score));
}

#[test]
fn a_typo_that_bm25_misses_is_found_by_hybrid() {
    let (_dir, db) = store();
    // "recieve" and "exponentail" are misspelt: no BM25 term matches, but
    // they share most character n-grams with "receive" and "exponential".
    let params = Params::new().text("q", "recieve exponentail bakoff");
    let bm25 = selection_with(&db, "SELECT FROM * SEED BM25($q) LIMIT 3", &params).items;
    assert!(bm25.is_empty(), "{bm25:#?}");
    let hybrid = selection_with(
        &db,
        "SELECT FROM * SEED HYBRID($q, 0.5) ORDER BY SCORE LIMIT 3",
        &params,
    )
    .items;
    assert_eq!(hybrid[0].doc, "network", "{hybrid:#?}");
    assert!(hybrid[0].text.contains("exponential backoff"));
}

#[test]
fn near_inside_a_document_scope_returns_only_that_document() {
    let (_dir, db) = support::store();
    // Many documents about the same thing, and one small target: a graph
    // search filtered to it would struggle; the exact path must not.
    for i in 0..60 {
        let text = format!(
            "# Note {i}\n\nThe gas giant Jupiter has many moons. Planet number {i} orbits the sun.\n"
        );
        ingest_markdown(&db, &format!("planets-{i:02}"), &text);
    }
    ingest_markdown(&db, "tiny", TOPICS[0].1);
    let params = Params::new().text("q", "Jupiter moons planet");
    let scoped = selection_with(
        &db,
        "SELECT FROM doc('tiny') SEED NEAR($q) ORDER BY SCORE LIMIT 5",
        &params,
    )
    .items;
    assert!(!scoped.is_empty());
    assert!(docs_of(&scoped).iter().all(|&d| d == "tiny"), "{scoped:#?}");
    let globbed = selection_with(
        &db,
        "SELECT FROM docs('planets-0*') SEED NEAR($q) ORDER BY SCORE LIMIT 50",
        &params,
    )
    .items;
    assert!(!globbed.is_empty());
    assert!(docs_of(&globbed).iter().all(|d| d.starts_with("planets-0")));
}

#[test]
fn replaced_and_removed_documents_leave_no_vectors_in_results() {
    let (_dir, db) = store();
    let query = "SELECT FROM * SEED NEAR($q) ORDER BY SCORE LIMIT 20";
    let jupiter = Params::new().text("q", "Jupiter gas giant moons");
    assert!(docs_of(&selection_with(&db, query, &jupiter).items).contains(&"astronomy"));
    db.remove("astronomy").unwrap();
    let after_remove = selection_with(&db, query, &jupiter).items;
    assert!(!docs_of(&after_remove).contains(&"astronomy"));

    let bread = Params::new().text("q", "knead the dough and bake bread");
    assert!(docs_of(&selection_with(&db, query, &bread).items).contains(&"kitchen"));
    ingest_markdown(
        &db,
        "kitchen",
        "# Kitchen\n\nWash the dishes after dinner.\n",
    );
    let replaced = selection_with(&db, query, &bread).items;
    assert!(
        replaced.iter().all(|i| !i.text.contains("dough")),
        "{replaced:#?}"
    );
}

#[test]
fn the_index_persists_and_rebuilds_when_damaged() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    let query = "SELECT FROM * SEED NEAR('bake the loaf in the oven') ORDER BY SCORE LIMIT 5";
    let first = {
        let db = Db::create(&path).unwrap();
        ingest_topics(&db);
        selection(&db, query).items
    };
    assert_eq!(first[0].doc, "kitchen");
    let counts = Db::open(&path).unwrap().vector_counts().unwrap();
    assert!(counts.nodes > 0 && counts.edus > 0, "{counts:?}");
    // Reopened from the dump: same answers.
    assert_eq!(selection(&Db::open(&path).unwrap(), query).items, first);
    // A damaged dump is detected by its checksum and rebuilt from the
    // store, never handed to hnsw_rs.
    let data = path.join("vectors/edus.hnsw.data");
    let mut bytes = std::fs::read(&data).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
    assert_eq!(selection(&Db::open(&path).unwrap(), query).items, first);
    // Lost entirely: rebuilt too.
    std::fs::remove_dir_all(path.join("vectors")).unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(selection(&db, query).items, first);
    assert_eq!(db.vector_counts().unwrap(), counts);
}

#[test]
fn ingest_defers_the_graph_until_a_vector_search_needs_it() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::create(&path).unwrap();
        ingest_topics(&db);
        let report = db.check().unwrap();
        assert_eq!(report.vector_graph_change, 0, "ingest built the graph");
        assert_eq!(report.last_change, TOPICS.len() as u64);
        assert!(report.vectors.nodes > 0 && report.vectors.edus > 0);
        assert!(!path.join("vectors").exists());
    }
    let db = Db::open(&path).unwrap();
    let items = selection(
        &db,
        "SELECT FROM * SEED NEAR('Jupiter moons') ORDER BY SCORE LIMIT 1",
    )
    .items;
    assert_eq!(docs_of(&items), ["astronomy"]);
    // Answered exactly from the stored vectors: no graph is built for it.
    assert_eq!(db.check().unwrap().vector_graph_change, 0);
    assert!(!path.join("vectors").exists());
    // What reads the graph itself builds it. Every node is in it; heading
    // EDUs are not (their section's vector carries the title).
    let graph = db.vector_counts().unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
    assert_eq!(graph.nodes, report.vectors.nodes);
    assert!(
        graph.edus > 0 && graph.edus < report.vectors.edus,
        "{graph:?}"
    );
    // Once loaded, the graph follows later writes.
    db.remove("astronomy").unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
    let items = selection(
        &db,
        "SELECT FROM * SEED NEAR('Jupiter moons') ORDER BY SCORE LIMIT 4",
    )
    .items;
    assert!(!docs_of(&items).contains(&"astronomy"), "{items:#?}");
}

#[test]
fn a_search_effort_beyond_the_store_size_matches_exact_search() {
    let (_dir, db) = support::store();
    let words = [
        "river", "stone", "lamp", "violin", "harbour", "copper", "meadow", "signal", "pepper",
        "glacier", "lantern", "orchid", "thunder", "velvet", "canyon", "ember",
    ];
    // 40 documents of 30 sentences: 1,200 EDUs of shuffled word triples.
    for d in 0..40usize {
        let mut text = format!("# Doc {d}\n\n");
        for s in 0..30usize {
            let n = d * 31 + s * 7;
            let pick = |i: usize| words[(n * (i + 3) + i * i) % words.len()];
            text.push_str(&format!(
                "The {} near the {} and {}. ",
                pick(0),
                pick(1),
                pick(2)
            ));
        }
        ingest_markdown(&db, &format!("d{d}"), &text);
    }
    db.set_vector_search_effort(5_000).unwrap();
    for query in ["lamp near the violin", "copper canyon", "thunder and ember"] {
        let graph = db.nearest(query, edudb::Target::Edus, 10, false).unwrap();
        let exact = db.nearest(query, edudb::Target::Edus, 10, true).unwrap();
        // The graph walks in 8 bits but scores what it found as the exact
        // search does: the same scores, to the bit.
        let scores = |hits: &[edudb::RankedHit]| -> Vec<u32> {
            hits.iter().map(|h| h.score.to_bits()).collect()
        };
        // Ties may come in another order: compare the score lists.
        assert_eq!(graph.len(), 10, "{query}");
        assert_eq!(scores(&graph), scores(&exact), "{query}");
    }
}

#[test]
fn concurrent_writers_leave_every_document_in_the_loaded_graph() {
    let (_dir, db) = store();
    // Load the graph, so writes update it as they land.
    db.vector_counts().unwrap();
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let db = &db;
            scope.spawn(move || {
                for n in 0..6 {
                    let text = format!(
                        "# Note {writer} {n}\n\nWriter {writer} wrote note {n} about item{writer}x{n}.\n"
                    );
                    ingest_markdown(db, &format!("w{writer}n{n}"), &text);
                    if n % 2 == 1 {
                        db.remove(&format!("w{writer}n{}", n - 1)).unwrap();
                    }
                }
            });
        }
    });
    let report = db.check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
    assert_eq!(db.vector_counts().unwrap().nodes, report.vectors.nodes);
    for writer in 0..4 {
        let hits = db
            .nearest(&format!("item{writer}x5"), edudb::Target::Edus, 1, false)
            .unwrap();
        assert_eq!(hits[0].doc, format!("w{writer}n5"));
    }
}

#[test]
fn a_store_refuses_a_different_embedder() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    drop(Db::create(&path).unwrap());
    let other = OpenOptions {
        create: false,
        embedder: Some(EmbedderConfig::Hashed { dimension: 64 }),
        ..Default::default()
    };
    let err = Db::open_with(&path, &other).unwrap_err();
    assert!(matches!(err, Error::EmbedderMismatch { .. }), "{err}");
    assert!(err.to_string().contains("hashed-ngram-v1:256"), "{err}");
    // The recorded one is used when none is given.
    assert_eq!(
        Db::open(&path).unwrap().embedder().identity(),
        "hashed-ngram-v1:256"
    );
}

#[test]
fn a_document_whose_embedding_fails_is_not_written() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    // Nothing listens on port 9 of loopback (discard is not run here).
    let mut config = HttpConfig::new("http://127.0.0.1:9/v1", "none");
    config.dimension = Some(8);
    config.max_retries = 0;
    config.timeout_secs = 2;
    let options = OpenOptions {
        create: true,
        embedder: Some(EmbedderConfig::Http(config)),
        ..Default::default()
    };
    let db = Db::open_with(&path, &options).unwrap();
    let err = db
        .ingest_bytes(
            "doc",
            b"# Title\n\nSome text to embed.".to_vec(),
            markdown(),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Embedding(_)), "{err}");
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
    assert!(db.documents().unwrap().is_empty());
    assert_eq!(db.check().unwrap().documents, 0);
}

/// An application's own embedder: hashed features under its own name,
/// scaled by `scale` (not unit length unless 1).
#[derive(Debug)]
struct AppEmbedder {
    name: &'static str,
    dimension: usize,
    scale: f32,
}

impl AppEmbedder {
    fn shared(name: &'static str) -> std::sync::Arc<dyn edudb::Embedder> {
        Self::scaled(name, 48, 1.0)
    }

    fn scaled(
        name: &'static str,
        dimension: usize,
        scale: f32,
    ) -> std::sync::Arc<dyn edudb::Embedder> {
        std::sync::Arc::new(AppEmbedder {
            name,
            dimension,
            scale,
        })
    }
}

impl edudb::Embedder for AppEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, edudb::EmbedError> {
        let inner = edudb::compute::embed::hashed::HashedEmbedder::new(self.dimension).unwrap();
        let vectors = inner.embed(texts)?;
        Ok(vectors
            .into_iter()
            .map(|v| v.into_iter().map(|x| x * self.scale).collect())
            .collect())
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn identity(&self) -> String {
        self.name.to_owned()
    }
}

fn with_custom(create: bool, embedder: std::sync::Arc<dyn edudb::Embedder>) -> OpenOptions {
    OpenOptions {
        create,
        custom_embedder: Some(embedder),
        ..Default::default()
    }
}

#[test]
fn a_store_on_the_applications_own_embedder_records_it_and_needs_it_for_new_vectors() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open_with(&path, &with_custom(true, AppEmbedder::shared("app:v1"))).unwrap();
        ingest_topics(&db);
        assert_eq!(
            db.embedder_config(),
            &EmbedderConfig::Custom {
                identity: "app:v1".into(),
                dimension: 48
            }
        );
        let hits = db
            .nearest("tomatoes watering roots", edudb::Target::Edus, 1, true)
            .unwrap();
        assert_eq!(hits[0].doc, "garden");
    }
    // Opened again with it: its vectors answer as before.
    {
        let db = Db::open_with(&path, &with_custom(false, AppEmbedder::shared("app:v1"))).unwrap();
        let hits = db
            .nearest("tomatoes watering roots", edudb::Target::Edus, 1, false)
            .unwrap();
        assert_eq!(hits[0].doc, "garden");
    }
    // Another embedder of the application's is refused by name, and one
    // of the same name with another dimension too.
    let err = Db::open_with(&path, &with_custom(false, AppEmbedder::shared("app:v2"))).unwrap_err();
    assert!(matches!(err, Error::EmbedderMismatch { .. }), "{err}");
    assert!(err.to_string().contains("app:v1"), "{err}");
    let resized = AppEmbedder::scaled("app:v1", 64, 1.0);
    let err = Db::open_with(&path, &with_custom(false, resized)).unwrap_err();
    assert!(err.to_string().contains("dimension 48"), "{err}");
    // Without it, reads that need no new vector work and embedding fails
    // saying what to supply; nothing is written by a refused ingest.
    let db = Db::open(&path).unwrap();
    assert_eq!(db.documents().unwrap().len(), TOPICS.len());
    assert_eq!(db.search("dough", 5).unwrap()[0].doc, "kitchen");
    let err = db
        .nearest("tomatoes", edudb::Target::Edus, 1, false)
        .unwrap_err();
    assert!(
        err.to_string().contains("app:v1") && err.to_string().contains("custom_embedder"),
        "{err}"
    );
    let refused = db.ingest_bytes(
        "late",
        b"# Late\n\nA document that needs vectors.\n".to_vec(),
        support::markdown(),
    );
    assert!(refused.is_err());
    assert_eq!(db.documents().unwrap().len(), TOPICS.len());
}

#[test]
fn an_embedder_configuration_and_a_custom_embedder_together_are_refused() {
    let dir = TempDir::new().unwrap();
    let options = OpenOptions {
        embedder: Some(EmbedderConfig::default()),
        ..with_custom(true, AppEmbedder::shared("app:v1"))
    };
    let err = Db::open_with(dir.path().join("db"), &options).unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err}");
    assert!(!dir.path().join("db").join("store").exists());
    // Nor is a custom embedder's record given as a configuration.
    let options = OpenOptions {
        create: true,
        embedder: Some(EmbedderConfig::Custom {
            identity: "app:v1".into(),
            dimension: 48,
        }),
        ..Default::default()
    };
    let err = Db::open_with(dir.path().join("db2"), &options).unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err}");
}

#[test]
fn an_application_embedders_vectors_are_stored_unit_length_and_must_be_finite() {
    let dir = TempDir::new().unwrap();
    let db = Db::open_with(
        dir.path().join("db"),
        &with_custom(true, AppEmbedder::scaled("app:long", 48, 7.0)),
    )
    .unwrap();
    ingest_markdown(&db, "garden", TOPICS[0].1);
    // An EDU's own text finds it at cosine 1 (within the rounding of the
    // store's 8-bit rows), not at the vectors' length² (49).
    let text = "Prune roses in late winter while they are dormant.";
    let hits = db.nearest(text, edudb::Target::Edus, 1, true).unwrap();
    assert!((hits[0].score - 1.0).abs() < 0.01, "{}", hits[0].score);
    drop(db);
    let dir = TempDir::new().unwrap();
    let db = Db::open_with(
        dir.path().join("db"),
        &with_custom(true, AppEmbedder::scaled("app:nan", 48, f32::NAN)),
    )
    .unwrap();
    let err = db
        .ingest_bytes(
            "garden",
            TOPICS[0].1.as_bytes().to_vec(),
            support::markdown(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("not a finite number"), "{err}");
    assert!(db.documents().unwrap().is_empty());
}

#[test]
fn nearest_to_a_vector_matches_nearest_to_its_text_and_checks_the_vector() {
    let (_dir, db) = store();
    let text = "clients retry with exponential backoff";
    let vector = db.embedder().embed(&[text]).unwrap().pop().unwrap();
    for exact in [true, false] {
        let by_text = db.nearest(text, edudb::Target::Edus, 3, exact).unwrap();
        // Scaling does not change the ranking: the vector is normalised.
        let scaled: Vec<f32> = vector.iter().map(|x| x * 7.5).collect();
        let by_vector = db
            .nearest_vector(&scaled, edudb::Target::Edus, 3, exact)
            .unwrap();
        let keys = |hits: &[edudb::RankedHit]| -> Vec<(String, u32)> {
            hits.iter().map(|h| (h.doc.clone(), h.span.first)).collect()
        };
        assert_eq!(keys(&by_text), keys(&by_vector));
        assert_eq!(by_vector[0].doc, "network");
    }
    let short = db.nearest_vector(&[1.0, 0.0], edudb::Target::Edus, 3, false);
    let err = short.unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err}");
    assert!(
        err.to_string().contains("dimension 2") && err.to_string().contains("256"),
        "{err}"
    );
    let mut nan = vector.clone();
    nan[3] = f32::NAN;
    for bad in [nan, vec![0.0; vector.len()]] {
        let err = db
            .nearest_vector(&bad, edudb::Target::Edus, 3, true)
            .unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err}");
    }
}

#[test]
fn a_small_scope_is_searched_from_the_store_without_building_the_graph() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    let db = Db::create(&path).unwrap();
    ingest_topics(&db);
    let text = "clients retry with exponential backoff";
    let scoped = selection(
        &db,
        &format!(
            "SELECT SPANS FROM doc('network') WHERE kind = edu SEED NEAR('{text}') ORDER BY SCORE LIMIT 3"
        ),
    );
    drop(db);
    // Nothing built or persisted a graph.
    assert!(!path.join("vectors").exists());
    // The same EDUs as an exact search over the whole store, kept to that
    // document, in the same order.
    let db = Db::open(&path).unwrap();
    let exact: Vec<(String, u32)> = db
        .nearest(text, edudb::Target::Edus, 100, true)
        .unwrap()
        .into_iter()
        .filter(|h| h.doc == "network")
        .map(|h| (h.doc, h.span.first))
        .take(3)
        .collect();
    let got: Vec<(String, u32)> = scoped
        .items
        .iter()
        .map(|i| (i.doc.clone(), i.edus[0]))
        .collect();
    assert_eq!(got, exact);
}

/// Progress reported while the graph is built.
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<(String, u64)>>);

impl edudb::Progress for Recorded {
    fn start(&self, stage: &str, total: u64) {
        self.0.lock().unwrap().push((stage.to_owned(), total));
    }
}

#[test]
fn the_graph_can_be_built_when_the_caller_chooses_with_progress() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::create(&path).unwrap();
        ingest_topics(&db);
        let progress = Recorded::default();
        db.build_vectors(&progress, &edudb::CancelToken::new())
            .unwrap();
        assert_eq!(
            progress.0.lock().unwrap()[..],
            [("vectors".to_owned(), TOPICS.len() as u64)]
        );
        let report = db.check().unwrap();
        assert_eq!(report.vector_graph_change, report.last_change);
        // Built again with nothing new: nothing to do.
        let again = Recorded::default();
        db.build_vectors(&again, &edudb::CancelToken::new())
            .unwrap();
        assert!(again.0.lock().unwrap().is_empty());
    }
    // It was saved: a new process finds it caught up without building.
    let report = Db::open(&path).unwrap().check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
    // Through the CLI: `ingest --vectors` leaves the graph caught up.
    let cli_store = dir.path().join("cli");
    let file = dir.path().join("notes.md");
    std::fs::write(&file, TOPICS[0].1).unwrap();
    let out = support::edudb(
        &cli_store,
        &["ingest", "-q", "--vectors", file.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", support::stderr(&out));
    let report = Db::open(&cli_store).unwrap().check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
}

/// A query's answer as (document, EDUs, score to 4 places).
fn answer(db: &Db, text: &str) -> Vec<(String, [u32; 2], i64)> {
    let query = format!("SELECT FROM * SEED NEAR('{text}') ORDER BY SCORE LIMIT 6");
    selection(db, &query)
        .items
        .into_iter()
        .map(|i| (i.doc, i.edus, (i.score * 1e4).round() as i64))
        .collect()
}

/// The graph's dump files in the store's vector directory (none while it
/// is absent: never saved, or between the renames of a save).
fn graph_dumps(path: &std::path::Path) -> Vec<std::path::PathBuf> {
    let entries = match std::fs::read_dir(path.join("vectors")) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("{e}"),
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".hnsw."))
        .collect()
}

/// Waits (a minute at most) until a background build has saved the graph
/// of `db`, at `path`, caught up with its last change.
fn wait_for_the_graph(db: &Db, path: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let report = db.check().unwrap();
        if !graph_dumps(path).is_empty() && report.vector_graph_change == report.last_change {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the graph was not built in the background: {report:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn no_vector_search_waits_for_a_graph_that_was_never_built() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    let texts = ["water the tomatoes", "retry with backoff", "bake the loaf"];
    let db = Db::create(&path).unwrap();
    ingest_topics(&db);
    // Scored exactly from the stored vectors: the same answers as the
    // caught-up graph searched exhaustively, with no graph built for them.
    // (Each answer searches twice: two answers stay below the searches a
    // process makes before it starts a build.)
    let got: Vec<_> = texts[..2].iter().map(|t| answer(&db, t)).collect();
    assert_eq!(got[0][0].0, "garden", "{:?}", got[0]);
    assert_eq!(got[1][0].0, "network", "{:?}", got[1]);
    assert!(!path.join("vectors").exists(), "a graph was built");
    assert_eq!(db.check().unwrap().vector_graph_change, 0);
    // Searching on starts the build in the background; a document written
    // while it runs is in the graph it leaves.
    for text in texts {
        answer(&db, text);
    }
    ingest_markdown(
        &db,
        "ocean",
        "# Ocean\n\n## Tides\n\nThe moon pulls the tides twice a day over the harbour.\n",
    );
    wait_for_the_graph(&db, &path);
    assert_eq!(answer(&db, "the moon pulls the tides")[0].0, "ocean");
    db.remove("ocean").unwrap();
    drop(db);
    let graph_answers: Vec<_> = {
        let db = Db::open(&path).unwrap();
        db.set_vector_search_effort(5_000).unwrap();
        texts[..2].iter().map(|t| answer(&db, t)).collect()
    };
    assert_eq!(got, graph_answers);
    // A store closed while its build runs stops it and opens whole; the
    // graph it had saved stays usable.
    for _ in 0..2 {
        let db = Db::open(&path).unwrap();
        ingest_markdown(&db, "later", "# Later\n\nHerons wade in the shallows.\n");
        for text in texts {
            answer(&db, text);
        }
        drop(db);
        assert!(Db::open(&path).unwrap().check().unwrap().damaged.is_empty());
    }
}

#[test]
fn a_process_answers_its_first_vector_searches_exactly_from_the_flat_tables() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::create(&path).unwrap();
        ingest_topics(&db);
        // A session turn, which only a search scoped to its session finds.
        db.append_turn(
            "chat",
            edudb::Role::User,
            "Feed the sourdough starter tonight.",
            edudb::Placement::Continue,
        )
        .unwrap();
        db.build_vectors(&edudb::NoProgress, &edudb::CancelToken::new())
            .unwrap();
    }
    // Changed after the graph and its tables were saved, by a process that
    // never loads the graph: one document replaced, one removed, one added.
    {
        let db = Db::open(&path).unwrap();
        ingest_markdown(
            &db,
            "kitchen",
            "# Kitchen\n\n## Sourdough\n\nFeed the sourdough starter, then bake the bread at dawn.\n",
        );
        db.remove("astronomy").unwrap();
        ingest_markdown(
            &db,
            "ocean",
            "# Ocean\n\n## Tides\n\nThe moon pulls the tides twice a day over the harbour.\n",
        );
    }
    let texts = ["feed the sourdough starter", "the moon pulls the tides"];
    let got: Vec<_> = {
        let db = Db::open(&path).unwrap();
        // Were the graph loaded, its missing dumps would be rebuilt and saved.
        for dump in graph_dumps(&path) {
            std::fs::remove_file(dump).unwrap();
        }
        let got: Vec<_> = texts.iter().map(|t| answer(&db, t)).collect();
        assert!(graph_dumps(&path).is_empty(), "the graph was loaded");
        // Past its first searches a process loads the graph (rebuilding
        // the dumps here) in the background and keeps it.
        answer(&db, "retry with backoff");
        wait_for_the_graph(&db, &path);
        got
    };
    assert_eq!(got[0][0].0, "kitchen", "{:?}", got[0]);
    assert!(
        got[0].iter().all(|(doc, _, _)| !doc.starts_with('@')),
        "{:?}",
        got[0]
    );
    assert!(
        got[1].iter().all(|(doc, _, _)| doc != "astronomy"),
        "{:?}",
        got[1]
    );
    assert_eq!(got[1][0].0, "ocean", "{:?}", got[1]);
    // The same answers as the graph caught up with the store and searched
    // exhaustively.
    let graph_answers = |path: &std::path::Path| -> Vec<_> {
        let db = Db::open(path).unwrap();
        db.set_vector_search_effort(5_000).unwrap();
        db.vector_counts().unwrap();
        texts.iter().map(|t| answer(&db, t)).collect()
    };
    assert_eq!(got, graph_answers(&path));
    // A damaged table is not used: the graph answers, the same.
    let table = path.join("vectors/edus.flat");
    let mut bytes = std::fs::read(&table).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&table, bytes).unwrap();
    let db = Db::open(&path).unwrap();
    let after: Vec<_> = texts.iter().map(|t| answer(&db, t)).collect();
    assert_eq!(after, got);
}

/// The hashed embedder, failing (after a pause, so the documents before it
/// are written first) on any text that holds `POISON`.
#[derive(Debug)]
struct FailingEmbedder;

impl edudb::Embedder for FailingEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, edudb::EmbedError> {
        if texts.iter().any(|t| t.contains("POISON")) {
            std::thread::sleep(std::time::Duration::from_millis(300));
            return Err(edudb::EmbedError::Model {
                dir: "failing".into(),
                message: "the model refused".into(),
            });
        }
        edudb::compute::embed::hashed::HashedEmbedder::new(16)
            .unwrap()
            .embed(texts)
    }
    fn dimension(&self) -> usize {
        16
    }
    fn identity(&self) -> String {
        "failing".into()
    }
}

#[test]
fn an_ingest_that_fails_part_way_names_what_it_stored_and_what_it_did_not() {
    let dir = TempDir::new().unwrap();
    let db = Db::open_with(
        dir.path().join("db"),
        &with_custom(true, std::sync::Arc::new(FailingEmbedder)),
    )
    .unwrap();
    let source = |id: &str, text: &str| edudb::ingest::sources::Source {
        id: id.into(),
        origin: edudb::ingest::sources::Origin::Bytes(text.as_bytes().to_vec()),
    };
    let sources = [
        source("first", "# First\n\nHerons wade in the shallows."),
        source("second", "# Second\n\nOtters float on their backs."),
        source("poisoned", "# Poisoned\n\nThis one holds POISON."),
        source("empty", ""),
        source("last", "# Last\n\nZebras gallop at dawn."),
    ];
    let err = db
        .ingest(
            &sources,
            markdown(),
            &edudb::NoProgress,
            &edudb::CancelToken::new(),
        )
        .unwrap_err();
    let Error::PartlyIngested {
        cause,
        stored,
        not_stored,
    } = &err
    else {
        panic!("{err}")
    };
    assert!(matches!(**cause, Error::Embedding(_)), "{cause}");
    assert!(!err.is_user_error(), "classed as its cause");
    assert!(err.to_string().contains("the model refused"), "{err}");
    // Each document is stored or not, and the store holds exactly those
    // said stored; the empty one was refused for its content, in neither.
    for id in ["first", "second"] {
        assert!(stored.contains(&id.to_owned()), "{err}");
    }
    assert!(not_stored.contains(&"poisoned".to_owned()), "{err}");
    let mut said: Vec<&String> = stored.iter().chain(not_stored).collect();
    said.sort();
    assert_eq!(said, ["first", "last", "poisoned", "second"]);
    let mut held: Vec<String> = db.documents().unwrap().into_iter().map(|d| d.id).collect();
    held.sort();
    let mut stored = stored.clone();
    stored.sort();
    assert_eq!(held, stored);
    assert!(db.check().unwrap().damaged.is_empty());
}
