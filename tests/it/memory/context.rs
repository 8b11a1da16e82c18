//! The context for the next turn: the active path plus summaries within
//! the budget, and the query-aware context (relevant turns whole or as
//! excerpts, the budget filled).

use std::collections::HashSet;

use edudb::Error;
use edudb::memory::{ContextKind, Placement, Role};

use super::fixtures::*;
use crate::support::store;

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
