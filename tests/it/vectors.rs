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
    for (id, text) in TOPICS {
        ingest_markdown(&db, id, text);
    }
    (dir, db)
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
        for (id, text) in TOPICS {
            ingest_markdown(&db, id, text);
        }
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
        for (id, text) in TOPICS {
            ingest_markdown(&db, id, text);
        }
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
    let report = db.check().unwrap();
    assert_eq!(report.vector_graph_change, report.last_change);
    // Every node is in the graph; heading EDUs are not (their section's
    // vector carries the title).
    let graph = db.vector_counts().unwrap();
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
        let scores = |hits: &[edudb::RankedHit]| -> Vec<i64> {
            hits.iter()
                .map(|h| (h.score * 1e4).round() as i64)
                .collect()
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
    db.nearest("oven", edudb::Target::Nodes, 1, false).unwrap();
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
