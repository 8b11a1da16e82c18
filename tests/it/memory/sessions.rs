//! Sessions as stored: turns as documents with coordinates kept out of
//! listings, concurrent writers, bad input, reopening and removal, the
//! `session('id')` scope with time filters, batch appends, salvage.

use edudb::memory::{BranchChoice, Placement, Role, is_turn_id, turn_doc_id};
use edudb::{CancelToken, Db, Error, IngestOptions, Metadata, NoProgress, Params, Rows, TurnInput};
use tempfile::TempDir;

use super::fixtures::*;
use crate::support::{selection, selection_with, store};

#[test]
fn turns_get_coordinates_and_stay_out_of_document_listings() {
    let (_dir, db) = store();
    db.ingest_bytes(
        "guide",
        b"# Guide\n\nA guide about winter trips to Japan and hot springs.\n".to_vec(),
        IngestOptions::default(),
    )
    .unwrap();
    for (n, (role, text)) in TRAVEL.into_iter().enumerate() {
        let receipt = db.append_turn("trip", role, text, Placement::Auto).unwrap();
        assert_eq!(receipt.turn, n as u32);
        assert_eq!(receipt.doc, turn_doc_id("trip", n as u32));
        assert_eq!(receipt.doc, format!("@session/trip/{n:06}"));
        // The turn is an ordinary document: plain text stored unchanged,
        // EDUs that slice it exactly, covering all its words.
        let stored = db.document(&receipt.doc).unwrap();
        assert_eq!(stored.text, text);
        let edus = db.edus(&receipt.doc, None).unwrap();
        assert_eq!(edus.len() as u32, receipt.edus);
        for edu in &edus {
            assert_eq!(edu.text, text[edu.bytes[0] as usize..edu.bytes[1] as usize]);
        }
        let joined: Vec<&str> = edus.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            joined.join(" ").split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        // Its summary is one of its own EDUs.
        let [a, b] = receipt.summary;
        assert!(a <= b && b < receipt.edus);
    }
    // Hidden from documents(), SHOW DOCS, `*` and docs('glob').
    let ids: Vec<String> = db.documents().unwrap().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["guide"]);
    let shown = db.query("SHOW DOCS", &Params::new()).unwrap();
    let Rows::Docs(docs) = shown.rows else {
        panic!("SHOW DOCS gave {:?}", shown.rows)
    };
    assert_eq!(docs.len(), 1);
    for statement in [
        "SELECT FROM * SEED BM25('winter Japan hot springs') BUDGET 2000 TOKENS",
        "SELECT FROM * SEED NEAR('winter Japan hot springs') LIMIT 50",
        "SELECT FROM * BUDGET 5000 TOKENS",
        "SELECT FROM docs('*') SEED BM25('Japan') LIMIT 50",
        "SELECT FROM * SEED HYBRID('winter Japan hot springs', 0.5) LIMIT 50",
    ] {
        let selection = selection(&db, statement);
        assert!(!selection.items.is_empty(), "{statement}");
        assert!(
            selection.items.iter().all(|i| i.doc == "guide"),
            "{statement}: {:?}",
            selection.items
        );
    }
    // Nor does the store-wide search or nearest-vector lookup find them.
    let hits = db.search("Japan", 50).unwrap();
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.doc == "guide"), "{hits:?}");
    // Not even when the query names the turns' own field.
    assert!(db.search("turn_text:Japan", 50).unwrap().is_empty());
    assert!(hits.iter().all(|h| h.doc == "guide"), "{hits:?}");
    for exact in [false, true] {
        let near = db
            .nearest("winter Japan hot springs", edudb::Target::Edus, 50, exact)
            .unwrap();
        assert!(!near.is_empty());
        assert!(near.iter().all(|h| h.doc == "guide"), "{near:?}");
    }
    // But a turn is readable by its id, and the whole store still checks.
    let tree = db
        .query("SHOW TREE doc('@session/trip/000000')", &Params::new())
        .unwrap();
    assert!(matches!(tree.rows, Rows::Tree(..)));
    let report = db.check().unwrap();
    assert_eq!((report.documents, report.sessions), (5, 1));
    // Turn documents cannot be removed or written directly.
    let before = last_change(&db);
    assert!(matches!(
        db.remove("@session/trip/000001"),
        Err(Error::TurnDocument { .. })
    ));
    let err = db
        .ingest_bytes(
            "@session/trip/000009",
            b"sneaky".to_vec(),
            IngestOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(&err, Error::InvalidId { .. }), "{err}");
    assert!(err.to_string().contains("reserved"), "{err}");
    assert_eq!(last_change(&db), before);
}

#[test]
fn two_writers_on_one_session_lose_nothing() {
    let (_dir, db) = store();
    std::thread::scope(|scope| {
        for writer in ["alpha", "beta"] {
            let db = &db;
            scope.spawn(move || {
                for n in 0..10 {
                    let text = format!("Writer {writer} says line {n} about the winter trip.");
                    db.append_turn("shared", Role::User, &text, Placement::Auto)
                        .unwrap();
                }
            });
        }
    });
    let dialogue = db.dialogue("shared").unwrap();
    let numbers: Vec<u32> = dialogue.turns.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..20).collect::<Vec<_>>());
    assert_eq!(dialogue.current, 19);
    let mut texts: Vec<String> = dialogue
        .turns
        .iter()
        .map(|t| db.document(&t.doc).unwrap().text)
        .collect();
    texts.sort();
    let mut expected: Vec<String> = ["alpha", "beta"]
        .iter()
        .flat_map(|w| {
            (0..10).map(move |n| format!("Writer {w} says line {n} about the winter trip."))
        })
        .collect();
    expected.sort();
    assert_eq!(texts, expected);
    dialogue.check_tree().unwrap();
    let report = db.check().unwrap();
    assert_eq!((report.documents, report.sessions), (20, 1));
}

#[test]
fn session_scope_queries_only_that_sessions_turns_in_order() {
    let (_dir, db) = store();
    travel(&db, "trip");
    db.append_turn(
        "other",
        Role::User,
        "Japan winter trips: hot springs for a family.",
        Placement::Auto,
    )
    .unwrap();
    db.ingest_bytes(
        "guide",
        b"Japan in winter: hot springs and snow festivals.".to_vec(),
        IngestOptions::default(),
    )
    .unwrap();
    let trip: Vec<String> = (0..4).map(|n| turn_doc_id("trip", n)).collect();
    let run = |statement: &str| selection(&db, statement).items;
    // Without a seed: every turn, chronological (turn ids sort in order).
    let all = run("SELECT FROM session('trip') ORDER BY POSITION BUDGET 100000 TOKENS");
    let docs: Vec<&str> = all.iter().map(|i| i.doc.as_str()).collect();
    let mut deduped = docs.clone();
    deduped.dedup();
    assert_eq!(deduped, trip);
    for statement in [
        "SELECT FROM session('trip') SEED BM25('Japan winter hot springs family') BUDGET 500 TOKENS",
        "SELECT FROM session('trip') SEED NEAR('Japan winter hot springs') LIMIT 20",
        "SELECT FROM session('trip') SEED HYBRID('Japan hot springs', 0.5) TRAVERSE EXPAND CONTEXT 1 BUDGET 300 TOKENS",
    ] {
        let items = run(statement);
        assert!(!items.is_empty(), "{statement}");
        assert!(
            items.iter().all(|i| trip.contains(&i.doc)),
            "{statement}: {items:?}"
        );
        // Position order (the default with a budget) reads the session as
        // one document: turns in the order spoken, positions inside each.
        if !statement.contains("BUDGET") {
            continue;
        }
        for pair in items.windows(2) {
            assert!(
                (&pair[0].doc, pair[0].edus[0]) < (&pair[1].doc, pair[1].edus[0]),
                "{statement}: {items:?}"
            );
        }
    }
    // An unknown session: a semantic error pointing at the id.
    let err = db
        .query("SELECT FROM session('trp') LIMIT 3", &Params::new())
        .unwrap_err();
    let Error::Query(q) = &err else {
        panic!("{err}")
    };
    assert_eq!((q.line, q.column), (1, 21));
    assert!(q.message.contains("no session 'trp'"), "{err}");
    assert_eq!(q.hint.as_deref(), Some("did you mean 'trip'?"));
    // SHOW SESSIONS and SHOW SESSION.
    let Rows::Sessions(list) = db.query("SHOW SESSIONS", &Params::new()).unwrap().rows else {
        panic!()
    };
    assert_eq!(
        list.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["other", "trip"]
    );
    let shown = db.query("SHOW SESSION 'trip'", &Params::new()).unwrap();
    let json = shown.to_json();
    assert_eq!(json["session"]["id"], "trip");
    assert_eq!(json["session"]["turns"], 4);
    let Rows::Session(view) = shown.rows else {
        panic!()
    };
    assert_eq!(*view, db.session("trip").unwrap());
}

#[test]
fn bad_input_writes_nothing() {
    let (_dir, db) = store();
    travel(&db, "trip");
    let before = (
        last_change(&db),
        db.dialogue("trip").unwrap(),
        db.stats().unwrap().turns,
    );
    let attempts: Vec<(&str, &str, Placement)> = vec![
        ("trip", "   \n\t ", Placement::Auto),
        ("trip", "", Placement::Continue),
        ("a/b", "Some text.", Placement::Auto),
        ("", "Some text.", Placement::Auto),
        ("trip", "Some text.", Placement::Topic(7)),
        ("trip", "Some text.", Placement::Fork(99)),
        ("new-session", "Some text.", Placement::Fork(0)),
        ("new-session", "Some text.", Placement::Topic(0)),
    ];
    for (session, text, placement) in attempts {
        let err = db
            .append_turn(session, Role::User, text, placement)
            .unwrap_err();
        assert!(err.is_user_error(), "{err}");
        let expected = match (session, text.trim().is_empty(), placement) {
            (_, true, _) => matches!(err, Error::EmptyTurn { .. }),
            ("a/b" | "", ..) => matches!(err, Error::InvalidSession { .. }),
            ("new-session", ..) => matches!(err, Error::NoSuchSession(_)),
            (_, _, Placement::Topic(7)) => {
                matches!(
                    err,
                    Error::NoSuchTopic {
                        topic: 7,
                        count: 1,
                        ..
                    }
                )
            }
            _ => matches!(
                err,
                Error::NoSuchTurn {
                    turn: 99,
                    count: 4,
                    ..
                }
            ),
        };
        assert!(expected, "{session:?} {text:?} {placement:?}: {err}");
    }
    // Input checked as ingest checks it: binary text (a NUL byte) is
    // refused, naming the session rather than the internal turn id.
    let err = db
        .append_turn("trip", Role::User, "abc\0def", Placement::Auto)
        .unwrap_err();
    assert!(matches!(err, Error::Binary { offset: 3, .. }), "{err}");
    assert!(err.to_string().starts_with("session trip:"), "{err}");
    // Text that is blank by Unicode's measure (a line separator, a form
    // feed, a next-line) is an empty turn, not an empty document.
    let err = db
        .append_turn("trip", Role::User, "\u{2028}\u{c} \u{85}", Placement::Auto)
        .unwrap_err();
    assert!(matches!(err, Error::EmptyTurn { .. }), "{err}");
    assert!(!err.to_string().contains("@session/"), "{err}");
    let after = (
        last_change(&db),
        db.dialogue("trip").unwrap(),
        db.stats().unwrap().turns,
    );
    assert_eq!(after, before);
    // Punctuation alone is text the analysis keeps (one EDU), not an error.
    let receipt = db
        .append_turn("trip", Role::User, "!!! ???", Placement::Continue)
        .unwrap();
    assert_eq!(receipt.edus, 1);
    assert!(db.sessions().unwrap().iter().all(|s| s.id == "trip"));
    assert!(matches!(
        db.remove_session("nobody"),
        Err(Error::NoSuchSession(_))
    ));
    for id in ["a/b", ".", ".."] {
        assert!(
            matches!(db.session(id), Err(Error::InvalidSession { .. })),
            "{id:?}"
        );
    }
    db.check().unwrap();
}

#[test]
fn sessions_survive_reopen_and_remove_session_removes_everything() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("db");
    let (view, context) = {
        let db = Db::create(&path).unwrap();
        db.ingest_bytes(
            "guide",
            b"A guide to winter in Japan.".to_vec(),
            IngestOptions::default(),
        )
        .unwrap();
        branched(&db);
        travel(&db, "second");
        (
            db.session("trip").unwrap(),
            db.session_context("trip", 200, None).unwrap(),
        )
    };
    let db = Db::open(&path).unwrap();
    assert_eq!(db.session("trip").unwrap(), view);
    assert_eq!(db.session_context("trip", 200, None).unwrap(), context);
    assert_eq!(db.check().unwrap().sessions, 2);
    let stats = db.stats().unwrap();
    assert_eq!(
        (stats.documents, stats.sessions, stats.turns),
        (1, 2, 8 + 4)
    );

    let entries_before = stats.fulltext_entries;
    let vectors_before = db.vector_counts().unwrap();
    let trip_entries = {
        let mut n = 0;
        for t in 0..8 {
            let stored = db.document(&turn_doc_id("trip", t)).unwrap();
            n += stored.tree.nodes.len() as u64
                + stored
                    .edus
                    .iter()
                    .filter(|e| e.kind != edudb::EduKind::Heading)
                    .count() as u64;
        }
        n
    };
    db.remove_session("trip").unwrap();
    assert!(matches!(db.session("trip"), Err(Error::NoSuchSession(_))));
    let stats = db.stats().unwrap();
    assert_eq!((stats.documents, stats.sessions, stats.turns), (1, 1, 4));
    // Every full-text entry of its turns is gone, and its vectors are
    // tombstoned.
    assert_eq!(stats.fulltext_entries, entries_before - trip_entries);
    let vectors_after = db.vector_counts().unwrap();
    assert!(
        vectors_after.edus < vectors_before.edus,
        "{vectors_after:?}"
    );
    assert!(
        vectors_after.dead > vectors_before.dead,
        "{vectors_after:?}"
    );
    assert!(matches!(
        db.document(&turn_doc_id("trip", 0)),
        Err(Error::NoSuchDocument(_))
    ));
    // Gone from the indexes too: a search finds only what is left.
    for hit in db.search("Phuket Chiang Mai Hokkaido Python", 50).unwrap() {
        assert!(!hit.doc.starts_with("@session/trip/"), "{hit:?}");
    }
    let near = db
        .nearest("Phuket Chiang Mai", edudb::Target::Edus, 50, true)
        .unwrap();
    assert!(near.iter().all(|h| !h.doc.starts_with("@session/trip/")));
    assert!(matches!(
        db.query("SELECT FROM session('trip')", &Params::new()),
        Err(Error::Query(_))
    ));
    assert_eq!(
        db.sessions()
            .unwrap()
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["second"]
    );
    db.check().unwrap();
    drop(db);
    let db = Db::open(&path).unwrap();
    assert_eq!(db.sessions().unwrap().len(), 1);
    assert!(db.documents().unwrap().iter().all(|m| !is_turn_id(&m.id)));
    db.check().unwrap();
}

#[test]
fn a_store_of_mostly_turns_answers_vector_searches_over_documents_exactly() {
    let (_dir, db) = store();
    db.ingest_bytes(
        "guide",
        b"Winter trips to Japan: hot springs, snow festivals and ski lessons.\n\nThailand is warm in winter and its beaches suit a family.\n".to_vec(),
        IngestOptions::default(),
    )
    .unwrap();
    // Far more turn vectors than document vectors, all on the same words.
    for n in 0..40 {
        let text =
            format!("Turn {n}: winter in Japan with hot springs, or warm beaches in Thailand?");
        db.append_turn("trip", Role::User, &text, Placement::Continue)
            .unwrap();
    }
    let query = "hot springs in Japan in winter";
    for target in [edudb::Target::Edus, edudb::Target::Nodes] {
        let graph = db.nearest(query, target, 5, false).unwrap();
        let exact = db.nearest(query, target, 5, true).unwrap();
        assert!(!graph.is_empty());
        assert!(graph.iter().all(|h| h.doc == "guide"), "{graph:?}");
        let key = |h: &edudb::RankedHit| (h.doc.clone(), h.node, h.span);
        assert_eq!(
            graph.iter().map(key).collect::<Vec<_>>(),
            exact.iter().map(key).collect::<Vec<_>>()
        );
    }
    // The session's own vectors are found through its scope.
    let found = selection_with(
        &db,
        "SELECT FROM session('trip') SEED NEAR($q) ORDER BY SCORE LIMIT 5",
        &Params::new().text("q", query),
    );
    assert_eq!(found.items.len(), 5);
    assert!(
        found
            .items
            .iter()
            .all(|i| i.doc.starts_with("@session/trip/"))
    );
}

#[test]
fn append_turns_is_one_write_that_places_turns_as_one_by_one_appends_do() {
    let (_dir, db) = store();
    let inputs: Vec<TurnInput> = TRAVEL
        .iter()
        .map(|&(role, text)| TurnInput::new(role, text))
        .chain([
            TurnInput::new(Role::User, PYTHON),
            TurnInput::new(Role::User, BACK_TO_TRAVEL),
        ])
        .enumerate()
        .map(|(i, input)| TurnInput {
            at: Some(1_684_417_620 + 60 * i as i64),
            ..input
        })
        .collect();
    let before = last_change(&db);
    let receipts = db
        .append_turns("bulk", &inputs, &NoProgress, &CancelToken::new())
        .unwrap();
    // One atomic batch: one change per turn document, written together.
    assert_eq!(last_change(&db), before + inputs.len() as u64);
    for input in &inputs {
        db.append_turns(
            "single",
            std::slice::from_ref(input),
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    }
    let (bulk, single) = (db.dialogue("bulk").unwrap(), db.dialogue("single").unwrap());
    for (a, b) in bulk.turns.iter().zip(&single.turns) {
        assert_eq!(
            (a.parent, a.topic, a.branch, a.summary, a.at),
            (b.parent, b.topic, b.branch, b.summary, b.at)
        );
    }
    assert_eq!(bulk.topics.len(), single.topics.len());
    // The same summaries: a branch's centroid, summed from its turns'
    // vectors as it grows, is the same whether they were analysed in this
    // batch or read back from the store.
    let branches = |d: &edudb::Dialogue| {
        (d.branches.iter())
            .map(|b| (b.turns.clone(), b.summary.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(branches(&bulk), branches(&single));
    let topics = |d: &edudb::Dialogue| {
        (d.topics.iter())
            .map(|t| (t.summary.clone(), t.vector_sum.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(topics(&bulk), topics(&single));
    assert_eq!(receipts[4].at, Some(1_684_417_860));
    assert_eq!(bulk.turns[4].at, Some(1_684_417_860));
    // All or nothing: a turn with no words, or a cancelled token, writes
    // none of the batch.
    let written = last_change(&db);
    let bad = [
        TurnInput::new(Role::User, "Fine."),
        TurnInput::new(Role::User, "\u{2028}\u{c} \u{85}"),
        TurnInput::new(Role::User, "Good."),
    ];
    let err = db
        .append_turns("bulk", &bad, &NoProgress, &CancelToken::new())
        .unwrap_err();
    assert!(matches!(err, Error::EmptyTurn { .. }), "{err}");
    let cancel = CancelToken::new();
    cancel.cancel();
    let err = db
        .append_turns("bulk", &bad[..1], &NoProgress, &cancel)
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
    let err = db
        .append_turns(
            "bulk",
            &[TurnInput {
                placement: Placement::Fork(99),
                ..bad[0].clone()
            }],
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(matches!(err, Error::NoSuchTurn { turn: 99, .. }), "{err}");
    // A later turn may fork at a turn of its own batch, not at one after it.
    let next = db.dialogue("bulk").unwrap().turns.len() as u32;
    let fork_at = |turn: u32| TurnInput {
        placement: Placement::Fork(turn),
        ..bad[0].clone()
    };
    let err = db
        .append_turns(
            "bulk",
            &[bad[0].clone(), fork_at(next + 2), bad[2].clone()],
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::NoSuchTurn { turn, .. } if turn == next + 2),
        "{err}"
    );
    assert_eq!(last_change(&db), written);
    assert_eq!(db.dialogue("bulk").unwrap().turns.len(), inputs.len());
    let receipts = db
        .append_turns(
            "bulk",
            &[bad[0].clone(), fork_at(next)],
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        (receipts[1].parent, receipts[1].decision.branch),
        (Some(next), BranchChoice::Fork)
    );
    db.check().unwrap();
}

#[test]
fn turns_filter_and_order_by_time_in_the_session_scope() {
    use edudb::{CancelToken, NoProgress, TurnInput};
    let (_dir, db) = store();
    // Times out of turn order, and one turn without a time.
    let times = [
        Some("2023-05-03"),
        Some("2023-05-01T09:00:00Z"),
        None,
        Some("2023-06-10"),
    ];
    let inputs: Vec<TurnInput> = times
        .iter()
        .enumerate()
        .map(|(n, at)| TurnInput {
            at: at.map(|t| edudb::model::time::parse(t).unwrap()),
            ..TurnInput::new(
                Role::User,
                format!("Turn {n} about the garden and its roses."),
            )
        })
        .collect();
    db.append_turns("t", &inputs, &NoProgress, &CancelToken::new())
        .unwrap();
    let turns = |statement: &str| -> Vec<u32> {
        let items = selection(&db, statement).items;
        let mut turns: Vec<u32> = items
            .iter()
            .map(|i| edudb::memory::turn_number(&i.doc).unwrap())
            .collect();
        turns.dedup();
        turns
    };
    assert_eq!(
        turns(
            "SELECT FROM session('t') WHERE time >= '2023-05-02' ORDER BY TIME BUDGET 1000 TOKENS"
        ),
        [0, 3]
    );
    assert_eq!(
        turns(
            "SELECT FROM session('t') WHERE time < '2023-05-03T00:00:01Z' ORDER BY TIME BUDGET 1000 TOKENS"
        ),
        [1, 0]
    );
    // A turn without a time fails every time comparison, so passes its NOT.
    assert_eq!(
        turns(
            "SELECT FROM session('t') WHERE NOT time < '2023-05-02' ORDER BY TIME BUDGET 1000 TOKENS"
        ),
        [0, 3, 2]
    );
    // ORDER BY TIME: timed turns by time, untimed last.
    assert_eq!(
        turns("SELECT FROM session('t') SEED BM25('garden roses') ORDER BY TIME LIMIT 10"),
        [1, 0, 3, 2]
    );
    // Errors say where: time outside a session scope, a bad time.
    for (statement, wanted, hint) in [
        (
            "SELECT FROM * WHERE time > '2023-05-01'",
            "time is a property of session turns",
            true,
        ),
        (
            "SELECT FROM session('t') WHERE time > 'May'",
            "is not a time",
            false,
        ),
        (
            "SELECT FROM * SEED BM25('garden') ORDER BY TIME",
            "time is a property of session turns",
            true,
        ),
    ] {
        let err = match db.query(statement, &Params::new()) {
            Err(Error::Query(error)) => error,
            other => panic!("{statement}: {other:?}"),
        };
        assert!(err.message.contains(wanted), "{err}");
        let marked = &statement[err.underline.clone()];
        assert!(marked.starts_with('\'') || marked == "TIME", "{err}");
        assert_eq!(err.hint.is_some(), hint, "{err}");
    }
}

#[test]
fn salvage_copies_documents_and_sessions_whole() {
    let (dir, db) = store();
    crate::support::ingest_markdown(&db, "notes", "# Notes\n\nMoss needs shade and water.");
    for (text, placement) in [
        (
            "We plan a trip to Sapporo in February.",
            Placement::NewTopic,
        ),
        (
            "The snow festival opens on the fourth.",
            Placement::Continue,
        ),
        (
            "Separately, the garden needs new moss.",
            Placement::NewTopic,
        ),
    ] {
        db.append_turn("trip", Role::User, text, placement).unwrap();
    }
    let to = dir.path().join("copy");
    let report = db
        .salvage(&to, &edudb::NoProgress, &edudb::CancelToken::new())
        .unwrap();
    assert_eq!(
        (report.documents, report.sessions, report.skipped.len()),
        (1, 1, 0),
        "{report:?}"
    );
    drop(db);
    let (db, copy) = (
        Db::open(dir.path().join("db")).unwrap(),
        Db::open(&to).unwrap(),
    );
    assert!(copy.check().unwrap().damaged.is_empty());
    assert_eq!(copy.dialogue("trip").unwrap(), db.dialogue("trip").unwrap());
    assert_eq!(
        copy.session_context("trip", 200, Some("snow festival"))
            .unwrap(),
        db.session_context("trip", 200, Some("snow festival"))
            .unwrap()
    );
    assert_eq!(
        copy.search("moss", 5).unwrap(),
        db.search("moss", 5).unwrap()
    );
}

#[test]
fn a_turn_s_metadata_is_filtered_on_in_its_session_and_goes_with_the_turn() {
    let (dir, db) = store();
    let said = |speaker: &str, text: &str| TurnInput {
        metadata: Metadata::from_json(&serde_json::json!({"speaker": speaker, "source": "chat"}))
            .unwrap(),
        ..TurnInput::new(Role::User, text)
    };
    let receipts = db
        .append_turns(
            "trip",
            &[
                said(
                    "Caroline",
                    "We fly to Sapporo on Monday and take the train.",
                ),
                said("Mel", "Then we take the train to Otaru."),
                said("Caroline", "The train to Otaru leaves at nine."),
            ],
            &NoProgress,
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        db.metadata(&receipts[1].doc).unwrap().to_json(),
        serde_json::json!({"speaker": "Mel", "source": "chat"})
    );
    let picked = |condition: &str| -> Vec<String> {
        let statement = format!(
            "SELECT SPANS FROM session('trip') WHERE {condition} SEED BM25('train Otaru') BUDGET 300 TOKENS"
        );
        let mut docs: Vec<String> = (selection(&db, &statement).items.into_iter())
            .map(|item| item.doc)
            .collect();
        docs.sort();
        docs.dedup();
        docs
    };
    assert_eq!(
        picked("meta.speaker = 'Caroline'"),
        [receipts[0].doc.clone(), receipts[2].doc.clone()]
    );
    assert_eq!(picked("meta.speaker = 'Mel'"), [receipts[1].doc.clone()]);
    // A forgotten turn's metadata goes with its text.
    db.forget_turn("trip", 2).unwrap();
    assert_eq!(
        picked("meta.speaker = 'Caroline'"),
        [receipts[0].doc.clone()]
    );
    assert!(db.check().unwrap().damaged.is_empty());

    // The command line gives a turn metadata with --meta, or per line of
    // --jsonl.
    let path = dir.path().join("cli.db");
    let out = crate::support::edudb(
        &path,
        &[
            "session",
            "add",
            "chat",
            "We meet at noon.",
            "--meta",
            "speaker=Ana",
            "--meta",
            "day=2023-05-01",
        ],
    );
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let lines = dir.path().join("turns.jsonl");
    std::fs::write(
        &lines,
        "{\"text\": \"Noon suits me.\", \"metadata\": {\"speaker\": \"Bo\"}}\n\
         {\"text\": \"Bring the map.\", \"metadata\": {\"speaker\": {\"nested\": 1}}}\n",
    )
    .unwrap();
    let out = crate::support::edudb(
        &path,
        &["session", "add", "chat", "--jsonl", lines.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let refused = crate::support::stderr(&out);
    assert!(
        refused.contains(":2") && refused.contains("speaker"),
        "{refused}"
    );
    std::fs::write(
        &lines,
        "{\"text\": \"Noon suits me.\", \"metadata\": {\"speaker\": \"Bo\"}}\n",
    )
    .unwrap();
    let out = crate::support::edudb(
        &path,
        &["session", "add", "chat", "--jsonl", lines.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    drop(db);
    let db = Db::open(&path).unwrap();
    assert_eq!(
        db.metadata(&turn_doc_id("chat", 0)).unwrap().to_json(),
        serde_json::json!({"speaker": "Ana", "day": "2023-05-01"})
    );
    assert_eq!(
        db.metadata(&turn_doc_id("chat", 1)).unwrap().to_json(),
        serde_json::json!({"speaker": "Bo"})
    );
}
