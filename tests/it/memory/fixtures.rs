//! What the memory tests share: a travel dialogue, a branched session,
//! turns that bury others, and the store's change counter.

use edudb::Db;
use edudb::memory::{Placement, Role};

/// Turns of a family travel dialogue (after the Context-Agent paper's
/// travel example), all on one topic.
pub const TRAVEL: [(Role, &str); 4] = [
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
pub const PYTHON: &str =
    "Could you recommend some Python libraries for parsing JSON files quickly?";
/// A turn clearly back on the travel topic.
pub const BACK_TO_TRAVEL: &str = "Regarding Thailand instead of Japan, how should our family of three handle visas for the winter trip?";

pub fn travel(db: &Db, session: &str) {
    for (role, text) in TRAVEL {
        db.append_turn(session, role, text, Placement::Continue)
            .unwrap();
    }
}

/// The store's change counter: any write moves it.
pub fn last_change(db: &Db) -> u64 {
    db.stats().unwrap().last_change
}

/// A session with an inactive branch and an inactive topic: topic 0 has
/// branch 0 (turns 0-3) and branch 2 forking at turn 1 (turns 6, 7;
/// current); topic 1 (turns 4, 5) is about Python.
pub fn branched(db: &Db) {
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

/// Turns that say nothing about cats, to bury the ones that do.
pub fn filler(n: usize) -> String {
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
