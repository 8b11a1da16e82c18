//! Turn, topic and branch summaries: spans of their turns, updated
//! incrementally.

use edudb::memory::{Dialogue, Placement, Role};

use super::fixtures::*;
use crate::support::store;

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
