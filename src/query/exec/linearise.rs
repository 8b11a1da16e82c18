//! Orders the picks as the statement asks and reads their text.

use std::collections::HashMap;

use super::seed::MatchScores;
use crate::model::ids::parse_turn_id;
use crate::query::ast::Order;
use crate::query::plan::SelectPlan;
use crate::query::result::Item;
use crate::query::select::Candidate;
use crate::query::view::View;

/// Orders picks as the plan asks and reads their text (and boxes).
pub(super) fn linearise(
    views: &[View],
    mut picks: Vec<Candidate>,
    plan: &SelectPlan,
    matches: &MatchScores,
) -> Vec<Item> {
    let times = &plan.times;
    match plan.order {
        Order::Position => {
            // A session reads as one document: its turns in the order spoken
            // (their ids are zero-padded turn numbers).
            let units: Vec<(bool, &str)> = views
                .iter()
                .map(|view| match parse_turn_id(&view.id) {
                    Some((session, _)) => (true, session),
                    None => (false, view.id.as_str()),
                })
                .collect();
            let mut best: HashMap<(bool, &str), f32> = HashMap::new();
            for pick in &picks {
                let unit = best.entry(units[pick.doc]).or_insert(f32::NEG_INFINITY);
                *unit = unit.max(pick.score);
            }
            picks.sort_by(|a, b| {
                let (unit_a, unit_b) = (units[a.doc], units[b.doc]);
                best[&unit_b]
                    .total_cmp(&best[&unit_a])
                    .then(unit_a.cmp(&unit_b))
                    .then(views[a.doc].id.cmp(&views[b.doc].id))
                    .then(a.span.first.cmp(&b.span.first))
            });
        }
        Order::Score => picks.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.doc.cmp(&b.doc))
                .then(a.span.first.cmp(&b.span.first))
        }),
        Order::Time => {
            // Untimed items last (`None` sorts first, so compare reversed
            // presence), then in document order.
            let time = |pick: &Candidate| times.get(&views[pick.doc].id).copied();
            picks.sort_by(|a, b| {
                let (ta, tb) = (time(a), time(b));
                tb.is_some()
                    .cmp(&ta.is_some())
                    .then(ta.cmp(&tb))
                    .then(views[a.doc].id.cmp(&views[b.doc].id))
                    .then(a.span.first.cmp(&b.span.first))
            });
        }
    }
    picks
        .iter()
        .map(|p| {
            let view = &views[p.doc];
            Item {
                match_score: matches.of(&view.id, p),
                ..view.item(p, plan.boxes)
            }
        })
        .collect()
}
