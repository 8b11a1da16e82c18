//! Agent memory: sessions of turns stored as documents, the dialogue tree,
//! placement, incremental summaries, context for the next turn, the
//! `session('id')` scope, and failure modes.

use std::collections::HashSet;

use edudb::memory::{
    BranchChoice, ContextKind, DecidedBy, Dialogue, Placement, Role, TopicChoice, is_turn_id,
    turn_doc_id,
};
use edudb::{CancelToken, Db, Error, IngestOptions, NoProgress, Params, Rows};
use proptest::prelude::*;
use tempfile::TempDir;

use crate::support::{selection, selection_with, store};

/// Turns of a family travel dialogue (after the Context-Agent paper's
/// travel example), all on one topic.
const TRAVEL: [(Role, &str); 4] = [
    (
        Role::User,
        "Our family of three, with a 10-year-old child, is planning an 8-day international trip in winter with a budget of around 20,000 dollars. How about Japan, Australia or Thailand?",
    ),
    (
        Role::Assistant,
        "Japan offers snow festivals and hot springs in winter, Australia has summer beaches, and Thailand is warm and affordable for a family trip.",
    ),
    (
        Role::User,
        "I think Japan is a good destination. Could you provide a detailed itinerary for Hokkaido, Japan?",
    ),
    (
        Role::Assistant,
        "A Hokkaido itinerary for the family: Sapporo and its Snow Festival, the Otaru canal, skiing lessons in Niseko for the child, and the hot springs of Noboribetsu.",
    ),
];

/// A turn unrelated to travel.
const PYTHON: &str = "Could you recommend some Python libraries for parsing JSON files quickly?";
/// A turn clearly back on the travel topic.
const BACK_TO_TRAVEL: &str = "Regarding Thailand instead of Japan, how should our family of three handle visas for the winter trip?";

fn travel(db: &Db, session: &str) {
    for (role, text) in TRAVEL {
        db.append_turn(session, role, text, Placement::Continue)
            .unwrap();
    }
}

/// The store's change counter: any write moves it.
fn last_change(db: &Db) -> u64 {
    db.stats().unwrap().last_change
}

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
fn explicit_placements_build_topics_branches_and_parents() {
    let (_dir, db) = store();
    let add = |text: &str, placement| db.append_turn("s", Role::User, text, placement).unwrap();
    let t0 = add("We plan a winter trip to Hokkaido.", Placement::Continue);
    let t1 = add(
        "Sapporo has a snow festival in February.",
        Placement::Continue,
    );
    let t2 = add(
        "Niseko offers ski lessons for children.",
        Placement::Continue,
    );
    let t3 = add("What about Otaru instead of Niseko?", Placement::Fork(1));
    let t4 = add(
        "Which Python library parses JSON fastest?",
        Placement::NewTopic,
    );
    let t5 = add("And the hot springs near Sapporo?", Placement::Topic(0));
    let t6 = add("Is orjson faster than ujson?", Placement::Topic(1));
    let t7 = add("Start over: what about Thailand?", Placement::Fork(0));
    let t8 = add("Phuket or Chiang Mai for a family?", Placement::Continue);

    let at = |r: &edudb::TurnReceipt| (r.parent, r.topic, r.branch);
    assert_eq!(at(&t0), (None, 0, 0));
    assert_eq!(t0.decision.topic, TopicChoice::First);
    assert_eq!(at(&t1), (Some(0), 0, 0));
    assert_eq!(at(&t2), (Some(1), 0, 0));
    assert_eq!(at(&t3), (Some(1), 0, 1));
    assert_eq!(t3.decision.branch, BranchChoice::Fork);
    assert_eq!(at(&t4), (None, 1, 2));
    assert_eq!(t4.decision.topic, TopicChoice::New);
    // Back to topic 0: continues its latest turn (3), on that turn's branch.
    assert_eq!(at(&t5), (Some(3), 0, 1));
    assert_eq!(t5.decision.topic, TopicChoice::Switch);
    assert_eq!(at(&t6), (Some(4), 1, 2));
    assert_eq!(at(&t7), (Some(0), 0, 3));
    // A fork inside the active topic stays; one into another topic (turn 0
    // while topic 1 is active) records a switch.
    assert_eq!(t3.decision.topic, TopicChoice::Stay);
    assert_eq!(
        (t7.decision.topic, t7.decision.branch),
        (TopicChoice::Switch, BranchChoice::Fork)
    );
    assert_eq!(at(&t8), (Some(7), 0, 3));

    let dialogue = db.dialogue("s").unwrap();
    assert_eq!(dialogue.current, 8);
    assert_eq!(dialogue.active_path(), [0, 7, 8]);
    assert_eq!(dialogue.topics[0].branches, [0, 1, 3]);
    assert_eq!(dialogue.topics[1].branches, [2]);
    assert_eq!(dialogue.branches[1].turns, [3, 5]);
    assert_eq!(dialogue.branches[1].fork, Some(1));
    let view = db.session("s").unwrap();
    assert_eq!(view.topics.len(), 2);
    let current: Vec<u32> = view
        .topics
        .iter()
        .flat_map(|t| &t.branches)
        .flat_map(|b| &b.turns)
        .filter(|t| t.current)
        .map(|t| t.number)
        .collect();
    assert_eq!(current, [8]);
    assert!(view.topics[0].active && !view.topics[1].active);
    let metas = db.sessions().unwrap();
    assert_eq!(metas.len(), 1);
    assert_eq!(
        (metas[0].turns, metas[0].topics, metas[0].branches),
        (9, 2, 4)
    );
}

#[test]
fn auto_placement_stays_starts_new_topics_and_returns() {
    let (_dir, db) = store();
    let mut receipts = Vec::new();
    for (role, text) in TRAVEL {
        receipts.push(db.append_turn("trip", role, text, Placement::Auto).unwrap());
    }
    // Same-topic follow-ups stay on topic 0.
    assert!(receipts.iter().all(|r| r.topic == 0), "{receipts:#?}");
    for r in &receipts[1..] {
        assert_eq!(r.decision.topic, TopicChoice::Stay, "{r:#?}");
        assert!(r.decision.active_topic_similarity.is_some());
    }
    // An unrelated turn starts a new topic, and records why.
    let python = db
        .append_turn("trip", Role::User, PYTHON, Placement::Auto)
        .unwrap();
    assert_eq!(python.decision.topic, TopicChoice::New, "{python:#?}");
    assert_eq!((python.topic, python.parent), (1, None));
    let similarity = python.decision.active_topic_similarity.unwrap();
    assert!(similarity < edudb::memory::placement::CONTINUE_THRESHOLD);
    // A follow-up on Python stays there.
    let orjson = db
        .append_turn(
            "trip",
            Role::Assistant,
            "For parsing JSON files in Python, orjson and ujson are faster than the standard json library.",
            Placement::Auto,
        )
        .unwrap();
    assert_eq!((orjson.topic, orjson.parent), (1, Some(4)), "{orjson:#?}");
    // A turn clearly about the trip goes back to topic 0.
    let back = db
        .append_turn("trip", Role::User, BACK_TO_TRAVEL, Placement::Auto)
        .unwrap();
    assert_eq!(back.decision.topic, TopicChoice::Switch, "{back:#?}");
    assert_eq!(back.topic, 0);
    let (other, s) = back.decision.best_other_topic.unwrap();
    assert_eq!(other, 0);
    assert!(s >= edudb::memory::placement::SWITCH_THRESHOLD);
    assert!(back.parent.is_some_and(|p| p < 4), "{back:#?}");
}

#[test]
fn a_follow_up_stays_on_its_branch() {
    // Issue 53 item 2: the hashed vectors of these two share almost
    // nothing (0.08), and the second started a new topic.
    let (_dir, db) = store();
    let first = "We fly to Sapporo on Monday.";
    db.append_turn("t", Role::User, first, Placement::Auto)
        .unwrap();
    let then = db
        .append_turn(
            "t",
            Role::User,
            "Then we take the train to Otaru.",
            Placement::Auto,
        )
        .unwrap();
    assert_eq!(
        (then.topic, then.branch, then.parent),
        (0, 0, Some(0)),
        "{then:#?}"
    );
    assert_eq!(
        (then.decision.topic, then.decision.branch),
        (TopicChoice::Stay, BranchChoice::Continue)
    );
}

#[test]
fn long_conversations_do_not_fragment_into_branches() {
    // LoCoMo's dev conversations (509 and 568 turns between two people,
    // one subject leading to the next): every earlier turn is a fork
    // candidate, and the best of hundreds of noisy cosines beat the leaf's
    // by the margin for over half of the turns (279 and 298 branches).
    for name in ["49", "50"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/data/locomo_dev")
            .join(format!("{name}.json"));
        let conversation = edudb::eval::memory::load_locomo(&path).unwrap();
        let (_dir, db) = store();
        db.append_turns("c", &conversation.turns, &NoProgress, &CancelToken::new())
            .unwrap();
        let meta = db.dialogue("c").unwrap().meta();
        assert_eq!(meta.turns as usize, conversation.turns.len());
        assert!(
            meta.branches * 4 <= meta.turns,
            "{name}: {} branches for {} turns",
            meta.branches,
            meta.turns
        );
    }
}

/// A session with an inactive branch and an inactive topic: topic 0 has
/// branch 0 (turns 0-3) and branch 2 forking at turn 1 (turns 6, 7;
/// current); topic 1 (turns 4, 5) is about Python.
fn branched(db: &Db) {
    travel(db, "trip");
    db.append_turn("trip", Role::User, PYTHON, Placement::NewTopic)
        .unwrap();
    db.append_turn(
        "trip",
        Role::Assistant,
        "orjson and ujson parse JSON faster than the standard library.",
        Placement::Continue,
    )
    .unwrap();
    db.append_turn(
        "trip",
        Role::User,
        "Hokkaido in winter might be too cold for our child. Let us consider Thailand instead: Phuket or Chiang Mai?",
        Placement::Fork(1),
    )
    .unwrap();
    db.append_turn(
        "trip",
        Role::Assistant,
        "Phuket has calm beaches for families; Chiang Mai has temples, night markets and an elephant sanctuary.",
        Placement::Continue,
    )
    .unwrap();
}

#[test]
fn a_forgotten_turn_keeps_its_place_and_loses_its_text_everywhere() {
    let (dir, db) = store();
    branched(&db);
    let before = db.dialogue("trip").unwrap();
    let doc = before.turns[6].doc.clone();
    // Turn 6 (on the active path, forking at turn 1) and all of topic 1.
    for turn in [6, 4, 5] {
        db.forget_turn("trip", turn).unwrap();
    }
    let dialogue = db.dialogue("trip").unwrap();
    assert_eq!(dialogue.turns.len(), 8);
    assert!([4, 5, 6].iter().all(|&t| dialogue.turns[t].is_forgotten()));
    assert_eq!(
        dialogue.turns[7].parent,
        Some(6),
        "later turns keep their place"
    );
    assert_eq!(dialogue.active_path(), [0, 1, 7]);
    assert!(matches!(db.document(&doc), Err(Error::NoSuchDocument(_))));
    // No summary picks a forgotten turn; topic 1 has none left.
    for picks in (dialogue.branches.iter().map(|b| &b.summary))
        .chain(dialogue.topics.iter().map(|t| &t.summary))
    {
        assert!(
            picks.iter().all(|p| ![4, 5, 6].contains(&p.turn)),
            "{picks:?}"
        );
    }
    assert!(dialogue.topics[1].summary.is_empty());
    assert!(
        !dialogue.branches[2].summary.is_empty(),
        "turn 7 still sums its branch"
    );
    // Contexts, queries and the view leave its text out.
    let phuket = "Thailand instead: Phuket or Chiang Mai";
    for query in [
        None,
        Some("Thailand Phuket Chiang Mai"),
        Some("Python JSON"),
    ] {
        let context = db.session_context("trip", 400, query).unwrap();
        assert!(context.tokens_used <= 400);
        for item in &context.items {
            assert!(![4, 5, 6].contains(&item.turn), "{query:?}: {item:?}");
            assert!(!item.text.contains(phuket));
        }
    }
    let found = selection(
        &db,
        "SELECT FROM session('trip') SEED BM25('Phuket Chiang') LIMIT 20",
    );
    assert!(
        found.items.iter().all(|i| i.doc != doc),
        "{:?}",
        found.items
    );
    let view = db.session("trip").unwrap();
    let turns: Vec<_> = (view.topics.iter())
        .flat_map(|t| &t.branches)
        .flat_map(|b| &b.turns)
        .collect();
    assert_eq!(turns.len(), 8);
    assert!(
        turns
            .iter()
            .all(|t| t.summary.is_none() == [4, 5, 6].contains(&t.number))
    );
    // Forgetting again changes nothing; unknown turns and sessions are refused.
    let written = last_change(&db);
    db.forget_turn("trip", 6).unwrap();
    assert_eq!(last_change(&db), written);
    assert!(matches!(
        db.forget_turn("trip", 8),
        Err(Error::NoSuchTurn { .. })
    ));
    assert!(matches!(
        db.forget_turn("nope", 0),
        Err(Error::NoSuchSession(_))
    ));
    // The current turn forgotten, the session goes on.
    db.forget_turn("trip", 7).unwrap();
    for placement in [Placement::Auto, Placement::Continue, Placement::Topic(1)] {
        db.append_turn("trip", Role::User, "Thailand in February, then.", placement)
            .unwrap();
    }
    db.session_context("trip", 200, Some("Thailand")).unwrap();
    assert!(db.check().unwrap().damaged.is_empty());
    // Reopened and salvaged, the forgotten turns stay forgotten.
    drop(db);
    let db = Db::open(dir.path().join("db")).unwrap();
    let reopened = db.dialogue("trip").unwrap();
    assert!(
        [4, 5, 6, 7]
            .iter()
            .all(|&t| reopened.turns[t].is_forgotten())
    );
    let to = dir.path().join("salvaged");
    db.salvage(&to, &NoProgress, &CancelToken::new()).unwrap();
    let salvaged = Db::open(&to).unwrap();
    assert_eq!(salvaged.dialogue("trip").unwrap(), reopened);
    assert!(salvaged.check().unwrap().damaged.is_empty());
}

#[test]
fn forgetting_a_turn_leaves_the_summaries_it_would_never_have_touched() {
    // A branch's summary after forgetting a turn is the one appends of
    // the other turns alone build.
    let said = [
        "We fly to Sapporo on Monday for the snow festival.",
        "The festival has ice sculptures along Odori park.",
        "Ramen alley in Susukino is open late.",
        "Otaru is an hour away by train along the coast.",
    ];
    let texts = |db: &Db| -> Vec<String> {
        let view = db.session("s").unwrap();
        view.topics[0].branches[0]
            .summary
            .iter()
            .map(|p| p.text.clone())
            .collect()
    };
    let (_a, full) = store();
    let (_b, without) = store();
    for (n, text) in said.iter().enumerate() {
        full.append_turn("s", Role::User, text, Placement::Continue)
            .unwrap();
        if n != 1 {
            without
                .append_turn("s", Role::User, text, Placement::Continue)
                .unwrap();
        }
    }
    full.forget_turn("s", 1).unwrap();
    assert_eq!(texts(&full), texts(&without));
    let topic = |db: &Db| db.dialogue("s").unwrap().topics[0].vector_sum.clone();
    let (a, b) = (topic(&full), topic(&without));
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5));
}

#[test]
fn context_is_the_active_path_plus_summaries_within_the_budget() {
    let (_dir, db) = store();
    branched(&db);
    let dialogue = db.dialogue("trip").unwrap();
    assert_eq!(dialogue.active_path(), [0, 1, 6, 7]);
    let context = db.session_context("trip", 100_000, None).unwrap();
    assert_eq!(context.history_tokens, dialogue.tokens());
    assert!(context.tokens_used < context.history_tokens);
    assert_eq!(context.path_turns, 4);
    assert_eq!(context.path_turns_dropped, 0);
    // The active path, complete, in order, each turn's text in full.
    let path: Vec<&edudb::ContextItem> = context
        .items
        .iter()
        .filter(|i| i.kind == ContextKind::PathTurn)
        .collect();
    assert_eq!(
        path.iter().map(|i| i.turn).collect::<Vec<_>>(),
        [0, 1, 6, 7]
    );
    for item in &path {
        let text = db.document(&item.doc).unwrap().text;
        assert_eq!(item.text, text.trim());
        assert_eq!(
            item.text,
            text[item.bytes[0] as usize..item.bytes[1] as usize]
        );
    }
    // Everything else only as stored summaries: branch 0's turns 2-3 and
    // topic 1, each a span of its turn.
    let on_path: HashSet<u32> = [0, 1, 6, 7].into();
    let mut summarised_topics = HashSet::new();
    for item in context
        .items
        .iter()
        .filter(|i| i.kind != ContextKind::PathTurn)
    {
        assert!(!on_path.contains(&item.turn), "{item:?}");
        let text = db.document(&item.doc).unwrap().text;
        assert_eq!(
            item.text,
            text[item.bytes[0] as usize..item.bytes[1] as usize]
        );
        let turn = &dialogue.turns[item.turn as usize];
        match item.kind {
            ContextKind::BranchSummary => {
                assert_eq!((turn.topic, turn.branch, item.branch), (0, 0, 0));
                assert!(
                    dialogue.branches[0]
                        .summary
                        .iter()
                        .any(|p| p.turn == item.turn)
                );
            }
            ContextKind::TopicSummary => {
                assert_eq!(turn.topic, 1);
                summarised_topics.insert(item.topic);
            }
            ContextKind::PathTurn | ContextKind::RelevantTurn | ContextKind::RelevantExcerpt => {
                panic!("no query: no relevant turns, and path turns were filtered out")
            }
        }
    }
    assert_eq!(summarised_topics, HashSet::from([1]));
    assert!(
        context
            .items
            .iter()
            .any(|i| i.kind == ContextKind::BranchSummary)
    );
    // Never over the budget, at any budget; tight budgets keep the most
    // recent path turns first.
    let current_tokens = dialogue.turns[7].tokens;
    for budget in [1, 5, current_tokens, current_tokens + 10, 60, 90, 150, 250] {
        let context = db.session_context("trip", budget, None).unwrap();
        assert!(context.tokens_used <= budget, "{budget}: {context:?}");
        let path: Vec<u32> = context
            .items
            .iter()
            .filter(|i| i.kind == ContextKind::PathTurn)
            .map(|i| i.turn)
            .collect();
        // A suffix of the active path.
        assert!([0u32, 1, 6, 7].ends_with(&path), "{budget}: {path:?}");
        if budget >= current_tokens {
            assert_eq!(path.last(), Some(&7), "{budget}");
        }
        if !path.is_empty() && path.len() < 4 {
            // Summaries only fill what the path left.
            let dropped = dialogue.turns[[0, 1, 6, 7][3 - path.len()] as usize].tokens;
            let path_tokens: u64 = context
                .items
                .iter()
                .filter(|i| i.kind == ContextKind::PathTurn)
                .map(|i| i.tokens)
                .sum();
            assert!(path_tokens + dropped > budget, "{budget}");
        }
    }
    assert!(matches!(
        db.session_context("nobody", 100, None),
        Err(Error::NoSuchSession(_))
    ));
    // A budget of 0 is refused, as BUDGET 0 is in a query.
    let err = db.session_context("trip", 0, None).unwrap_err();
    assert!(
        matches!(err, Error::Usage(_)) && err.to_string().contains("budget of 0"),
        "{err}"
    );
}

/// Multi-line bulleted turns: the list markers and line breaks between
/// their EDUs are part of the text a path turn returns.
const LISTS: [&str; 4] = [
    "- apples\n- pears\n- plums, and a long list item about which fruit keeps best in a cold cellar over the winter",
    "- rice\n- beans\n- lentils, which cook faster than beans and need no soaking overnight",
    "Which of these should we pack?\n\n- the apples\n- the lentils\n- a small stove",
    "- tents\n- sleeping bags rated for minus ten degrees\n- a lantern",
];

#[test]
fn context_text_never_holds_more_tokens_than_counted() {
    let (_dir, db) = store();
    for (n, text) in LISTS.iter().enumerate() {
        let placement = if n == 3 {
            Placement::NewTopic
        } else {
            Placement::Continue
        };
        db.append_turn("lists", Role::User, text, placement)
            .unwrap();
    }
    db.append_turn(
        "lists",
        Role::User,
        "- a map\n- a compass",
        Placement::Fork(0),
    )
    .unwrap();
    let dialogue = db.dialogue("lists").unwrap();
    for turn in &dialogue.turns {
        let text = db.document(&turn.doc).unwrap().text;
        let span = &text[turn.bytes[0] as usize..turn.bytes[1] as usize];
        assert_eq!(u64::from(edudb::model::tokens::count(span)), turn.tokens);
    }
    let history = db
        .session_context("lists", u64::MAX, None)
        .unwrap()
        .history_tokens;
    for budget in (1..=history + 10).step_by(3) {
        let context = db.session_context("lists", budget, None).unwrap();
        let mut recounted = 0u64;
        for item in &context.items {
            // Recount the text returned, not the stated counts.
            let tokens = u64::from(edudb::model::tokens::count(&item.text));
            assert!(
                tokens <= item.tokens,
                "{budget}: {item:?} has {tokens} tokens"
            );
            recounted += tokens;
        }
        assert!(recounted <= budget, "{budget}: {recounted} tokens returned");
        assert!(context.tokens_used <= budget);
    }
    // With room for everything, the path turns are returned whole.
    let all = db.session_context("lists", history, None).unwrap();
    assert!(
        all.items
            .iter()
            .any(|i| i.kind == ContextKind::PathTurn && i.text.contains("\n- "))
    );
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

/// The stored bytes of a branch record, as rkyv archives it.
fn branch_bytes(dialogue: &Dialogue, branch: u32) -> Vec<u8> {
    rkyv::to_bytes::<rkyv::rancor::Error>(&dialogue.branches[branch as usize])
        .unwrap()
        .to_vec()
}

#[test]
fn summaries_are_spans_of_their_turns_and_updated_incrementally() {
    let (_dir, db) = store();
    branched(&db);
    let before = db.dialogue("trip").unwrap();
    let branch_0 = branch_bytes(&before, 0);
    let topic_1 = rkyv::to_bytes::<rkyv::rancor::Error>(&before.topics[1]).unwrap();
    // A turn on branch 2 (current) leaves branch 0 and topic 1 as stored.
    // It is the most central turn of its topic (it names the trip's main
    // subjects), so the joined branch's and topic's summaries must change
    // to include it: a stale summary fails here.
    let receipt = db
        .append_turn(
            "trip",
            Role::User,
            "For our family winter trip with the child: Thailand, Phuket or Chiang Mai, or Japan and Hokkaido with hot springs?",
            Placement::Continue,
        )
        .unwrap();
    assert_eq!(receipt.branch, 2);
    let after = db.dialogue("trip").unwrap();
    let turns =
        |picks: &[edudb::memory::SummaryPick]| picks.iter().map(|p| p.turn).collect::<Vec<_>>();
    for (name, old, new) in [
        (
            "branch 2",
            &before.branches[2].summary,
            &after.branches[2].summary,
        ),
        (
            "topic 0",
            &before.topics[0].summary,
            &after.topics[0].summary,
        ),
    ] {
        assert_ne!(old, new, "{name}");
        assert!(
            turns(new).contains(&receipt.turn),
            "{name}: {:?} -> {:?}",
            turns(old),
            turns(new)
        );
    }
    // The untouched branch's and topic's summary picks are the same.
    assert_eq!(after.branches[0].summary, before.branches[0].summary);
    assert_eq!(after.topics[1].summary, before.topics[1].summary);
    assert_eq!(branch_bytes(&after, 0), branch_0);
    assert_eq!(
        rkyv::to_bytes::<rkyv::rancor::Error>(&after.topics[1])
            .unwrap()
            .as_slice(),
        topic_1.as_slice()
    );
    // Branch 2 and topic 0 changed: the new turn joined them.
    assert_ne!(branch_bytes(&after, 2), branch_bytes(&before, 2));
    assert_ne!(after.topics[0].vector_sum, before.topics[0].vector_sum);
    // Every summary pick is an EDU span of one of its own turns.
    let check = |picks: &[edudb::memory::SummaryPick], belongs: &dyn Fn(u32) -> bool| {
        assert!(!picks.is_empty());
        let tokens: u32 = picks.iter().map(|p| p.tokens).sum();
        assert!(picks.len() == 1 || tokens <= edudb::memory::summary::SUMMARY_TOKEN_CAP);
        for pick in picks {
            assert!(belongs(pick.turn));
            let doc = &after.turns[pick.turn as usize].doc;
            let edus = db
                .edus(doc, Some((pick.edus.first, pick.edus.last)))
                .unwrap();
            assert_eq!(
                [edus[0].bytes[0], edus[edus.len() - 1].bytes[1]],
                pick.bytes
            );
            // Its tokens are those of exactly its text.
            let text = db.document(doc).unwrap().text;
            let span = &text[pick.bytes[0] as usize..pick.bytes[1] as usize];
            assert_eq!(edudb::model::tokens::count(span), pick.tokens);
        }
    };
    for branch in &after.branches {
        check(&branch.summary, &|t| {
            after.turns[t as usize].branch == branch.id
        });
    }
    for topic in &after.topics {
        check(&topic.summary, &|t| {
            after.turns[t as usize].topic == topic.id
        });
    }
    for turn in &after.turns {
        check(&[turn.summary], &|t| t == turn.number);
    }
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

/// One step of the property test.
#[derive(Debug, Clone)]
enum Step {
    Auto(usize),
    Continue(usize),
    NewTopic(usize),
    Topic(u32, usize),
    Fork(u32, usize),
}

/// Turn texts for the property test: travel, Python and cooking.
const TEXTS: [&str; 6] = [
    "Which ski resort in Hokkaido suits a child?",
    "Sapporo snow festival dates in February.",
    "How fast is orjson at parsing JSON in Python?",
    "Python json module versus ujson for large files.",
    "A risotto needs arborio rice and warm stock.",
    "Stir the risotto slowly and add parmesan at the end.",
];

fn step() -> impl Strategy<Value = Step> {
    let text = 0..TEXTS.len();
    prop_oneof![
        text.clone().prop_map(Step::Auto),
        text.clone().prop_map(Step::Continue),
        text.clone().prop_map(Step::NewTopic),
        (0u32..4, text.clone()).prop_map(|(t, x)| Step::Topic(t, x)),
        (0u32..10, text).prop_map(|(t, x)| Step::Fork(t, x)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Random placements keep the dialogue tree valid: parents precede
    /// children, every turn is on exactly one branch, the active path is a
    /// chain from a topic root to the current turn; invalid targets are
    /// refused and change nothing.
    #[test]
    fn random_placements_keep_the_tree_valid(steps in prop::collection::vec(step(), 1..10)) {
        let (_dir, db) = store();
        for step in steps {
            let before = db.dialogue("p").ok();
            let (placement, text) = match step {
                Step::Auto(x) => (Placement::Auto, x),
                Step::Continue(x) => (Placement::Continue, x),
                Step::NewTopic(x) => (Placement::NewTopic, x),
                Step::Topic(t, x) => (Placement::Topic(t), x),
                Step::Fork(t, x) => (Placement::Fork(t), x),
            };
            match db.append_turn("p", Role::User, TEXTS[text], placement) {
                Ok(receipt) => {
                    let d = db.dialogue("p").unwrap();
                    prop_assert_eq!(d.current, receipt.turn);
                    if let Placement::Fork(t) = placement {
                        prop_assert_eq!(receipt.parent, Some(t));
                    }
                }
                Err(err) => {
                    prop_assert!(err.is_user_error(), "{}", err);
                    prop_assert_eq!(db.dialogue("p").ok(), before);
                }
            }
            let Ok(d) = db.dialogue("p") else { continue };
            for turn in &d.turns {
                if let Some(parent) = turn.parent {
                    prop_assert!(parent < turn.number);
                    prop_assert_eq!(d.turns[parent as usize].topic, turn.topic);
                }
                let holding = d.branches.iter().filter(|b| b.turns.contains(&turn.number)).count();
                prop_assert_eq!(holding, 1);
            }
            let path = d.active_path();
            prop_assert_eq!(*path.last().unwrap(), d.current);
            prop_assert!(d.turns[path[0] as usize].parent.is_none());
            for pair in path.windows(2) {
                prop_assert_eq!(d.turns[pair[1] as usize].parent, Some(pair[0]));
            }
            db.check().unwrap();
        }
    }
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

/// Turns that say nothing about cats, to bury the ones that do.
fn filler(n: usize) -> String {
    let subjects = [
        "the garden",
        "a train timetable",
        "the football match",
        "a new recipe",
        "the weather",
    ];
    format!(
        "Turn {n}: we talked about {} for a while, and then about {} again.",
        subjects[n % subjects.len()],
        subjects[(n / 5) % subjects.len()]
    )
}

#[test]
fn append_turns_is_one_write_that_places_turns_as_one_by_one_appends_do() {
    use edudb::TurnInput;
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
fn a_query_aware_context_answers_from_the_whole_history() {
    use edudb::{CancelToken, NoProgress, TurnInput};
    let (_dir, db) = store();
    let mut inputs = vec![
        TurnInput::new(
            Role::User,
            "My sister adopted a grey cat, and she called it Biscuit.",
        ),
        TurnInput::new(Role::Assistant, "That is a sweet name. How old is it?"),
        TurnInput::new(Role::User, "Two years old, and very shy."),
    ];
    inputs.extend((0..60).map(|n| TurnInput::new(Role::User, filler(n))));
    let inputs: Vec<TurnInput> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, input)| TurnInput {
            at: Some(86_400 * i as i64),
            ..input
        })
        .collect();
    db.append_turns("long", &inputs, &NoProgress, &CancelToken::new())
        .unwrap();
    let dialogue = db.dialogue("long").unwrap();
    let budget = 120;
    let plain = db.session_context("long", budget, None).unwrap();
    assert!(
        plain.items.iter().all(|i| i.turn > 2),
        "without a query the old turns are out of reach"
    );
    let context = db
        .session_context("long", budget, Some("Which cat did my sister adopt?"))
        .unwrap();
    assert!(context.tokens_used <= budget);
    assert_eq!(
        context.tokens_used,
        context.items.iter().map(|i| i.tokens).sum::<u64>()
    );
    let by_turn = |turn: u32| context.items.iter().find(|i| i.turn == turn);
    let cat = by_turn(0).expect("the relevant turn");
    assert_eq!((cat.kind, cat.at), (ContextKind::RelevantTurn, Some(0)));
    assert!(cat.score.unwrap() > 0.0);
    // Its reply comes along as a neighbour, at a lower claim.
    let reply = by_turn(1).expect("the neighbour");
    assert!(reply.score.unwrap() < cat.score.unwrap());
    // The recent path is still there: the current turn.
    let current = by_turn(dialogue.current).expect("the current turn");
    assert_eq!(current.kind, ContextKind::PathTurn);
    // Exact coordinates; grouped by topic, chronological within one.
    for item in &context.items {
        let text = db.document(&item.doc).unwrap().text;
        assert_eq!(
            item.text,
            text[item.bytes[0] as usize..item.bytes[1] as usize]
        );
        assert_eq!(item.at, dialogue.turns[item.turn as usize].at);
    }
    for pair in context.items.windows(2) {
        if pair[0].topic == pair[1].topic {
            assert!(
                pair[0].turn <= pair[1].turn,
                "{:?}",
                (pair[0].turn, pair[1].turn)
            );
        }
    }
    let topics: Vec<u32> = context.items.iter().map(|i| i.topic).collect();
    let mut seen = HashSet::new();
    let mut last = None;
    for topic in topics {
        assert!(
            last == Some(topic) || seen.insert(topic),
            "topic {topic} comes back after another"
        );
        last = Some(topic);
    }
    // A query with no indexed words finds nothing relevant: its context is
    // the path's recent turns and then summaries, as without a query.
    let none = db.session_context("long", budget, Some("?!")).unwrap();
    assert!(none.items.iter().all(|i| matches!(
        i.kind,
        ContextKind::PathTurn | ContextKind::BranchSummary | ContextKind::TopicSummary
    )));
    assert!(none.items.iter().any(|i| i.turn == dialogue.current));
    assert!(matches!(
        db.session_context("long", 0, Some("cat")),
        Err(Error::Usage(_))
    ));
}

/// Issue 53's reproduction: a query that matches nothing must not leave
/// the budget unused while path turns that fit are left out.
#[test]
fn a_query_aware_context_fills_its_budget_and_keeps_every_path_turn_that_fits() {
    use edudb::{CancelToken, NoProgress, TurnInput};
    let (_dir, db) = store();
    let said = [
        "We fly to Sapporo on Monday.",
        "Then we take the train to Otaru.",
        "After crash turn.",
        "We fly on Monday.",
    ];
    let inputs: Vec<TurnInput> = said
        .iter()
        .map(|t| TurnInput::new(Role::User, *t))
        .collect();
    db.append_turns("trip", &inputs, &NoProgress, &CancelToken::new())
        .unwrap();
    let history = db.dialogue("trip").unwrap().tokens();
    for query in ["when", "Monday", "Otaru train"] {
        let context = db.session_context("trip", 64, Some(query)).unwrap();
        assert_eq!(context.path_turns_dropped, 0, "{query}: {context:?}");
        assert_eq!(context.tokens_used, history, "{query}: everything fits");
        let texts: HashSet<&str> = context.items.iter().map(|i| i.text.as_str()).collect();
        assert!(said.iter().all(|t| texts.contains(t)), "{query}: {texts:?}");
    }
    // Under a budget that holds only part, the path keeps its most recent
    // turns first once the relevant ones are in.
    let tight = db.session_context("trip", 14, Some("when")).unwrap();
    assert!(tight.tokens_used <= 14);
    assert!(tight.items.iter().any(|i| i.text == "We fly on Monday."));
}

#[test]
fn relevant_turns_that_do_not_fit_whole_are_excerpted_at_their_best_match() {
    use edudb::{CancelToken, NoProgress, TurnInput};
    let (_dir, db) = store();
    // Many turns mention the lighthouse, each in its middle sentence
    // (their summary picks, the most central, are about the harbour).
    let mut inputs: Vec<TurnInput> = (0..40)
        .map(|n| {
            let text = format!(
                "On day {n} we walked along the harbour wall and counted the boats. \
                 The lighthouse keeper waved at us from the gallery. \
                 Then we walked back along the harbour wall and counted the boats again."
            );
            TurnInput::new(Role::User, text)
        })
        .collect();
    inputs.extend((0..20).map(|n| TurnInput::new(Role::User, filler(n))));
    db.append_turns("walks", &inputs, &NoProgress, &CancelToken::new())
        .unwrap();
    let budget = 300;
    let context = db
        .session_context("walks", budget, Some("lighthouse keeper"))
        .unwrap();
    assert!(context.tokens_used <= budget);
    let kinds = |kind| context.items.iter().filter(move |i| i.kind == kind);
    let whole: Vec<_> = kinds(ContextKind::RelevantTurn).collect();
    let excerpts: Vec<_> = kinds(ContextKind::RelevantExcerpt).collect();
    assert!(!whole.is_empty(), "the best turns come whole");
    assert!(
        excerpts.len() > whole.len(),
        "the rest of the budget reaches more turns: {} excerpts, {} whole",
        excerpts.len(),
        whole.len()
    );
    let mut turns = HashSet::new();
    for item in &context.items {
        assert!(turns.insert(item.turn), "turn {} twice", item.turn);
    }
    for excerpt in &excerpts {
        // Exactly the turn's matching EDU, by its coordinates.
        let edus = db
            .edus(&excerpt.doc, Some((excerpt.edus[0], excerpt.edus[1])))
            .unwrap();
        assert_eq!(edus.len(), 1);
        assert_eq!(excerpt.edus[0], excerpt.edus[1]);
        assert_eq!(edus[0].text, excerpt.text);
        assert_eq!(edus[0].bytes, excerpt.bytes);
        assert!(
            excerpt.text.starts_with("The lighthouse keeper"),
            "{excerpt:?}"
        );
        assert_eq!(u64::from(edus[0].tokens), excerpt.tokens);
        assert!(excerpt.score.unwrap() > 0.0);
        let turn = db.document(&excerpt.doc).unwrap();
        assert!(excerpt.text.len() < turn.text.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Whatever the query and budget, a query-aware context stays within
    /// its budget and names each turn at most once.
    #[test]
    fn a_query_aware_context_never_exceeds_its_budget(
        budget in 1u64..400,
        words in proptest::collection::vec("(garden|train|cat|recipe|weather|Biscuit|x)", 0..5),
    ) {
        use edudb::{CancelToken, NoProgress, TurnInput};
        let (_dir, db) = store();
        let inputs: Vec<TurnInput> = (0..25).map(|n| TurnInput::new(Role::User, filler(n))).collect();
        db.append_turns("p", &inputs, &NoProgress, &CancelToken::new()).unwrap();
        let context = db.session_context("p", budget, Some(&words.join(" "))).unwrap();
        prop_assert!(context.tokens_used <= budget);
        let mut turns = HashSet::new();
        for item in &context.items {
            prop_assert!(turns.insert(item.turn), "turn {} twice", item.turn);
        }
    }
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

/// A conversation that wanders: travel, code, back to travel, food.
const WANDERING: [&str; 10] = [
    TRAVEL[0].1,
    TRAVEL[1].1,
    TRAVEL[2].1,
    PYTHON,
    "Which Python library parses large JSON files with the least memory?",
    BACK_TO_TRAVEL,
    "What food should the child try in Sapporo during the winter trip?",
    "Is ramen or sushi better for a family dinner in Hokkaido?",
    "Could the JSON parser stream the file instead of loading it whole?",
    "How many days should the family spend in Niseko skiing?",
];

#[test]
fn llm_placement_asks_the_model_only_when_the_similarities_are_in_doubt() {
    let chat = std::sync::Arc::new(
        crate::scripted::ScriptedChat::new().on("placement", |_, _| {
            r#"{"decision": "new_topic", "target": -1}"#.into()
        }),
    );
    let (_dir, db) = crate::support::store_asking(chat.clone());
    // The same turns placed by the rules, to know which decisions are in doubt.
    let mut first_doubt = None;
    for (n, text) in WANDERING.iter().enumerate() {
        let auto = db
            .append_turn("rules", Role::User, text, Placement::Auto)
            .unwrap();
        if auto.decision.in_doubt() {
            first_doubt = Some(n);
            break;
        }
    }
    let doubt = first_doubt.expect("some turn of the conversation leaves the rules in doubt");
    for (n, text) in WANDERING.iter().take(doubt + 1).enumerate() {
        let receipt = db
            .append_turn("model", Role::User, text, Placement::Llm)
            .unwrap();
        assert_eq!(receipt.decision.requested, Placement::Llm);
        if n < doubt {
            assert_eq!(receipt.decision.decided_by, DecidedBy::Rule);
            assert!(receipt.decision.llm.is_zero());
            assert_eq!(chat.asked("placement"), 0);
        } else {
            // The model said new topic, and the similarities stay on record.
            assert_eq!(receipt.decision.decided_by, DecidedBy::Model);
            assert_eq!(receipt.decision.topic, TopicChoice::New);
            assert!(receipt.decision.active_topic_similarity.is_some());
            assert_eq!(receipt.decision.llm.calls, 1);
            assert_eq!(chat.asked("placement"), 1);
            let seen = chat.seen.lock().unwrap();
            assert!(seen[0].user.contains("[topic 0] latest turn:"));
            assert!(seen[0].user.contains(&format!("New turn: {text}")));
        }
    }
}

#[test]
fn llm_placement_falls_back_to_the_rules_on_invalid_answers() {
    // A fork after a turn that does not exist is refused every time.
    let chat = std::sync::Arc::new(
        crate::scripted::ScriptedChat::new().on("placement", |_, _| {
            r#"{"decision": "fork", "target": 999}"#.into()
        }),
    );
    let (_dir, db) = crate::support::store_asking(chat.clone());
    let mut fell_back = false;
    for text in WANDERING {
        let auto_like = db
            .append_turn("rules", Role::User, text, Placement::Auto)
            .unwrap();
        let receipt = db
            .append_turn("model", Role::User, text, Placement::Llm)
            .unwrap();
        // With every answer refused the rules decide, so both sessions grow alike.
        assert_eq!(
            (receipt.topic, receipt.branch, receipt.parent),
            (auto_like.topic, auto_like.branch, auto_like.parent)
        );
        if auto_like.decision.in_doubt() {
            assert_eq!(receipt.decision.decided_by, DecidedBy::Fallback);
            assert_eq!(
                (receipt.decision.llm.calls, receipt.decision.llm.fallbacks),
                (3, 1)
            );
            fell_back = true;
        } else {
            assert_eq!(receipt.decision.decided_by, DecidedBy::Rule);
        }
    }
    assert!(fell_back);
    let seen = chat.seen.lock().unwrap();
    assert!(seen.iter().any(|r| {
        r.user
            .contains("rejected: fork needs the number of an earlier turn")
    }));
}

#[test]
fn llm_placement_needs_a_chat_model() {
    let (_dir, db) = store();
    let err = db
        .append_turn("s", Role::User, "Hello there.", Placement::Llm)
        .unwrap_err();
    assert!(
        matches!(err, Error::NoChatModel { .. }) && err.is_user_error(),
        "{err}"
    );
    assert!(db.sessions().unwrap().is_empty());
}
