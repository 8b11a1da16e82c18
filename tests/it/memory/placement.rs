//! Where turns go: explicit placements, automatic placement (staying on a
//! branch, new topics, returning), the chat model's placement, and a
//! property test that any placements keep the dialogue tree valid.

use std::collections::HashSet;

use edudb::memory::{BranchChoice, DecidedBy, Placement, Role, TopicChoice};
use edudb::{CancelToken, Error, NoProgress};
use proptest::prelude::*;

use super::fixtures::*;
use crate::support::store;

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
