//! A shard set (`ShardSet`): documents placed in stores by a stable hash
//! of their ids, and statements over the stores answering exactly what
//! one store holding every document answers.

use edudb::ingest::sources::{Origin, Source};
use edudb::{
    CancelToken, Db, EmbedderConfig, Error, IngestOptions, NoProgress, OpenOptions, Params,
    Preparer, ShardSet, shard_of,
};

use crate::support::{ingest_all, rfc_sources, shared_data, untimed};

/// HotpotQA's shared corpus (994 Wikipedia passages, each a document with
/// its title as heading) and 30 sectioned RFCs: short and long documents.
fn corpus() -> Vec<Source> {
    let path = shared_data().join("hotpotqa/hipporag_hotpotqa_train100_corpus.json");
    let passages: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut sources: Vec<Source> = (passages.iter().enumerate())
        .map(|(i, (title, sentences))| {
            let text: String = (sentences.as_array().unwrap().iter())
                .map(|s| s.as_str().unwrap())
                .collect();
            Source {
                id: format!("passage-{i:04}"),
                origin: Origin::Bytes(format!("# {title}\n\n{text}\n").into_bytes()),
            }
        })
        .collect();
    sources.extend(rfc_sources(30));
    sources
}

/// The dev questions, and some RFC-flavoured ones that name sections.
fn questions() -> Vec<String> {
    let path = shared_data().join("hotpotqa/hipporag_hotpotqa_train100.json");
    let raw: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut questions: Vec<String> = (raw.iter())
        .map(|q| q["question"].as_str().unwrap().to_owned())
        .collect();
    questions.extend(
        [
            "What are the drawbacks of the proposed syntax?",
            "Unresolved questions about lifetime elision in impl headers",
            "How does the motivation section justify a new lint?",
        ]
        .map(str::to_owned),
    );
    questions
}

/// The statements compared, each with the question as `$q`: seeded by
/// BM25, so exactly comparable.
const STATEMENTS: [&str; 4] = [
    "SELECT SPANS FROM * SEED BM25($q) BUDGET 512 TOKENS",
    "SELECT SPANS FROM * SEED BM25($q) TRAVERSE BUDGET 1024 TOKENS",
    "SELECT SPANS FROM * SEED BM25($q) PROPAGATE BUDGET 512 TOKENS",
    "SELECT NODES FROM * SEED BM25($q) LIMIT 5",
];

/// Statements seeded by vectors: a store's vector graph is approximate,
/// and each store of a set has a graph of its own, so these agree with one
/// store's answer as far as the graphs' recall lets them.
const VECTOR_STATEMENTS: [&str; 2] = [
    "SELECT SPANS FROM * SEED HYBRID($q, 0.5) BUDGET 256 TOKENS",
    "SELECT SPANS FROM * SEED NEAR($q) LIMIT 10",
];

/// Most of a vector statement's spans (over every question) that a shard
/// set may miss of one store's.
const VECTOR_MISSES: f64 = 0.1;

/// The share of `one`'s spans that `other` holds too.
fn overlap(one: &serde_json::Value, other: &serde_json::Value) -> (usize, usize) {
    let spans = |v: &serde_json::Value| -> Vec<String> {
        (v["results"].as_array().unwrap().iter())
            .map(|item| format!("{} {}", item["doc"], item["edus"]))
            .collect()
    };
    let theirs = spans(other);
    let mine = spans(one);
    (
        mine.iter().filter(|s| theirs.contains(s)).count(),
        mine.len(),
    )
}

#[test]
fn a_shard_set_answers_every_statement_as_one_store_holding_its_documents() {
    let sources = corpus();
    let dir = tempfile::tempdir().unwrap();
    let single = Db::create(dir.path().join("one")).unwrap();
    ingest_all(&single, &sources);
    let options = OpenOptions::default();
    let sets: Vec<ShardSet> = [2, 4]
        .into_iter()
        .map(|count| {
            let set =
                ShardSet::create(dir.path().join(format!("set{count}")), count, &options).unwrap();
            let report = set
                .ingest(
                    &sources,
                    IngestOptions::default(),
                    &NoProgress,
                    &CancelToken::new(),
                )
                .unwrap();
            assert_eq!(report.documents.len(), sources.len());
            // Every store holds a share, and each document is where its
            // id places it.
            for (at, shard) in set.shards().iter().enumerate() {
                let held = shard.documents().unwrap();
                assert!(held.len() > sources.len() / (2 * count), "{}", held.len());
                assert!(held.iter().all(|m| shard_of(&m.id, count) == at));
            }
            set
        })
        .collect();
    let ids = |metas: Vec<edudb::DocMeta>| metas.into_iter().map(|m| m.id).collect::<Vec<_>>();
    let every = ids(single.documents().unwrap());
    let mut compared = 0;
    let mut found = [(0, 0); VECTOR_STATEMENTS.len()];
    for set in sets {
        assert_eq!(ids(set.documents().unwrap()), every);
        // Opened again from its manifest.
        let path = set.path().to_owned();
        drop(set);
        let set = ShardSet::open(&path, &options).unwrap();
        for question in questions() {
            let params = Params::new().text("q", &question);
            for statement in STATEMENTS {
                let one = untimed(single.query(statement, &params).unwrap());
                let sharded = untimed(set.query(statement, &params).unwrap());
                assert_eq!(
                    sharded,
                    one,
                    "{} shards, {statement}, {question:?}",
                    set.shards().len()
                );
                compared += usize::from(!one["results"].as_array().unwrap().is_empty());
            }
            for (statement, tally) in VECTOR_STATEMENTS.iter().zip(&mut found) {
                let one = untimed(single.query(statement, &params).unwrap());
                let sharded = untimed(set.query(statement, &params).unwrap());
                let (held, of) = overlap(&one, &sharded);
                tally.0 += held;
                tally.1 += of;
            }
        }
        for (statement, (held, of)) in VECTOR_STATEMENTS.iter().zip(&mut found) {
            let missed = 1.0 - *held as f64 / *of as f64;
            assert!(
                missed <= VECTOR_MISSES,
                "{} shards, {statement}: {missed:.3} of one store's spans missed",
                set.shards().len()
            );
            *held = 0;
            *of = 0;
        }
    }
    // Most statements found something: the comparison was of real results.
    assert!(
        compared > 2 * questions().len() * STATEMENTS.len() * 9 / 10,
        "{compared}"
    );
}

#[test]
fn prepared_documents_go_to_their_stores_and_removals_follow_them() {
    let sources: Vec<Source> = rfc_sources(12);
    let dir = tempfile::tempdir().unwrap();
    let set = ShardSet::create(dir.path().join("set"), 3, &OpenOptions::default()).unwrap();
    let preparer = Preparer::new(&EmbedderConfig::default()).unwrap();
    let prepared = (sources.iter())
        .map(|s| {
            preparer
                .prepare(
                    s,
                    IngestOptions::default(),
                    &|_, _, _| {},
                    &CancelToken::new(),
                )
                .unwrap()
        })
        .collect();
    let metas = set.write_prepared(prepared).unwrap();
    let written: Vec<&str> = metas.iter().map(|m| m.id.as_str()).collect();
    let given: Vec<&str> = sources.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(written, given, "metadata in the order given");
    for source in &sources {
        let holder = set.shard_for(&source.id);
        assert!(holder.document(&source.id).is_ok());
        for other in set.shards() {
            if !std::ptr::eq(other, holder) {
                assert!(matches!(
                    other.document(&source.id),
                    Err(Error::NoSuchDocument(_))
                ));
            }
        }
    }
    set.remove(&sources[0].id).unwrap();
    assert!(matches!(
        set.document(&sources[0].id),
        Err(Error::NoSuchDocument(_))
    ));
    assert_eq!(set.documents().unwrap().len(), sources.len() - 1);
}

#[test]
fn placement_is_crc32_of_the_id_and_never_changes() {
    // CRC-32 (IEEE) check values: "123456789" is 0xCBF43926.
    assert_eq!(shard_of("123456789", 1 << 16), 0xCBF43926 % (1 << 16));
    assert_eq!(shard_of("", 7), 0);
    assert_eq!(shard_of("anything", 1), 0);
}

#[test]
fn bad_manifests_and_directories_in_use_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions::default();
    let used = dir.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("notes.txt"), b"mine").unwrap();
    let refused = ShardSet::create(&used, 2, &options)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("in use"), "{refused}");
    assert!(ShardSet::create(dir.path().join("none"), 0, &options).is_err());

    let set = dir.path().join("set");
    ShardSet::create(&set, 2, &options).unwrap();
    let manifest = set.join(edudb::MANIFEST_FILE);
    let good = std::fs::read_to_string(&manifest).unwrap();
    for (damage, says) in [
        ("{ not json", "does not read"),
        (
            &good.replace("\"format\": 1", "\"format\": 9") as &str,
            "format 9",
        ),
        (&good.replace("shard-001", "shard-000"), "twice"),
        (&good.replace("shard-001", "shard-404"), "shard-404"),
    ] {
        std::fs::write(&manifest, damage).unwrap();
        let err = ShardSet::open(&set, &options).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
    std::fs::write(&manifest, &good).unwrap();
    assert!(ShardSet::open(&set, &options).is_ok());
    // A shard set is not a store, and says what it is.
    let err = Db::open(&set).unwrap_err().to_string();
    assert!(err.contains("shard set"), "{err}");
}

/// `value` without what differs between two runs or two layouts of the
/// same documents: timings, sizes on disk, change numbers.
fn settled(mut value: serde_json::Value) -> serde_json::Value {
    if let Some(object) = value.as_object_mut() {
        for key in ["elapsed_ms", "store_bytes", "last_change", "shards"] {
            object.remove(key);
        }
    }
    value
}

#[test]
fn the_api_answers_over_a_shard_set_as_over_one_store() {
    use edudb::serve::Api;
    let sources = rfc_sources(12);
    let dir = tempfile::tempdir().unwrap();
    let set = ShardSet::create(dir.path().join("set"), 3, &OpenOptions::default()).unwrap();
    let one = Db::create(dir.path().join("one")).unwrap();
    ingest_all(&one, &sources);
    let cancel = CancelToken::new();
    let ingested = Api::ingest(
        &set,
        &sources,
        IngestOptions::default(),
        &NoProgress,
        &cancel,
    )
    .unwrap();
    assert_eq!(ingested["documents"].as_array().unwrap().len(), 12);
    let (set_api, one_api): (&dyn Api, &dyn Api) = (&set, &one);
    let id = &sources[4].id;
    // A document's calls go to its store.
    for api in [set_api, one_api] {
        for doc in [id, &sources[7].id] {
            api.update_metadata(doc, &serde_json::json!({"team": "lang"}), &[])
                .unwrap();
        }
    }
    let holder = set.shard_for(id);
    assert_eq!(holder.metadata(id).unwrap().to_json()["team"], "lang");
    for ask in [
        |api: &dyn Api, _: &str| api.documents(None),
        |api: &dyn Api, _: &str| api.documents(Some("meta.team = 'lang'")),
        |api: &dyn Api, id: &str| api.tree(id),
        |api: &dyn Api, id: &str| api.edus(id, Some((2, 6))),
        |api: &dyn Api, id: &str| api.dag_listing(id, None),
        |api: &dyn Api, id: &str| api.metadata(id),
        |api: &dyn Api, _: &str| api.search("lifetime AND elision", 8),
        |api: &dyn Api, _: &str| api.search("trait objects", 20),
        |api: &dyn Api, _: &str| {
            api.query(
                "SELECT SPANS FROM * SEED BM25('error handling') PROPAGATE BUDGET 300 TOKENS",
                &Params::new(),
                false,
            )
            .map(settled)
        },
    ] {
        assert_eq!(ask(set_api, id).unwrap(), ask(one_api, id).unwrap());
    }
    // Counts summed over the stores are one store's counts.
    let stats = set_api.stats().unwrap();
    assert_eq!(stats["shards"], 3);
    assert_eq!(settled(stats), settled(one_api.stats().unwrap()));
    let checked = set_api.check().unwrap();
    assert_eq!(checked["documents"], 12);
    assert_eq!(checked["damaged"], serde_json::json!([]));
    assert_eq!(checked["vectors"], one_api.check().unwrap()["vectors"]);
    // Sessions live in one store: none listed, each call refused by name.
    assert_eq!(set_api.sessions().unwrap(), serde_json::json!([]));
    let refused = set_api.session_context("s", 100, None).unwrap_err();
    assert!(refused.is_user_error() && refused.to_string().contains("shard set"));
}

/// What an operation reported.
#[derive(Default)]
struct Reports {
    /// Each start: what, and its total.
    starts: Vec<(String, u64)>,
    /// Units advanced.
    advanced: u64,
    /// Finishes.
    finishes: usize,
}

#[derive(Default)]
struct Reported(std::sync::Mutex<Reports>);

impl edudb::Progress for Reported {
    fn start(&self, what: &str, total: u64) {
        self.0.lock().unwrap().starts.push((what.to_owned(), total));
    }

    fn advance(&self, units: u64, _item: &str) {
        self.0.lock().unwrap().advanced += units;
    }

    fn finish(&self) {
        self.0.lock().unwrap().finishes += 1;
    }
}

impl Reported {
    /// Asserts the work reported as one operation `what` of `total`
    /// units, all of them done.
    fn assert_one(&self, what: &str, total: u64) {
        let reports = self.0.lock().unwrap();
        assert_eq!(reports.starts[..], [(what.to_owned(), total)]);
        assert_eq!((reports.advanced, reports.finishes), (total, 1), "{what}");
    }
}

#[test]
fn a_shard_set_is_backed_up_reindexed_and_vacuumed_store_by_store() {
    let sources = rfc_sources(9);
    let dir = tempfile::tempdir().unwrap();
    let set = ShardSet::create(dir.path().join("set"), 2, &OpenOptions::default()).unwrap();
    // Work spread over the stores reports as one operation.
    let ingested = Reported::default();
    set.ingest(
        &sources,
        IngestOptions::default(),
        &ingested,
        &CancelToken::new(),
    )
    .unwrap();
    ingested.assert_one("ingest", sources.iter().map(Source::len_hint).sum());
    let question = "SELECT SPANS FROM * SEED BM25('stability guarantees') BUDGET 256 TOKENS";
    let answer = |set: &ShardSet| untimed(set.query(question, &Params::new()).unwrap());
    let before = answer(&set);
    set.remove(&sources[0].id).unwrap();
    // Rebuilt indexes no longer count the removed document's entries in
    // their statistics, as a backup's or a vacuum's do not.
    assert_eq!(
        set.reindex(&NoProgress, &CancelToken::new()).unwrap(),
        vec![]
    );
    let after_removal = answer(&set);

    let copy_dir = dir.path().join("copy");
    let backed_up = Reported::default();
    let report = set
        .backup(&copy_dir, &backed_up, &CancelToken::new())
        .unwrap();
    assert_eq!(report.documents, 8);
    backed_up.assert_one("backup", 8);
    assert!(ShardSet::is_shard_set(&copy_dir));
    let copy = ShardSet::open(&copy_dir, &OpenOptions::default()).unwrap();
    assert_eq!(answer(&copy), after_removal);
    assert_eq!(copy.documents().unwrap(), set.documents().unwrap());
    // A second backup into the same place is refused, the first kept.
    let again = set.backup(&copy_dir, &NoProgress, &CancelToken::new());
    assert!(again.unwrap_err().to_string().contains("in use"));

    let (vacuumed, reopened) = set.vacuum_reopened(&NoProgress, &CancelToken::new());
    let (vacuumed, set) = (vacuumed.unwrap(), reopened.unwrap());
    assert_eq!(vacuumed.documents, 8);
    assert!(vacuumed.bytes_after <= vacuumed.bytes_before);
    assert_eq!(answer(&set), after_removal);
    assert_ne!(
        before, after_removal,
        "the removed document was in the answer"
    );
    assert!(set.check().unwrap().damaged.is_empty());
}
