//! Forgetting one turn: its place kept, its text gone everywhere, the
//! summaries it was in chosen again.

use edudb::memory::{Placement, Role};
use edudb::{CancelToken, Db, Error, NoProgress};

use super::fixtures::*;
use crate::support::{selection, store};

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
