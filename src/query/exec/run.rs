//! Runs a bound [`Plan`]: seed → (traverse or propagate) → filter →
//! expand → select → linearise, timing every stage for EXPLAIN. Documents
//! are decoded into the engine's cache, once per query, and only those the
//! seed touched.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::expand::expand;
use super::filter::matches;
use super::linearise::linearise;
use super::propagate::{link_named_sections, propagate};
use super::scan::scan;
use super::scope::unless_damaged;
use super::seed::{MatchScores, seed};
use super::traverse::traverse;
use crate::error::Result;
use crate::memory::session as sessions;
use crate::model::rank::RankedHit;
use crate::query::ast::{Order, Output};
use crate::query::corpus::Corpus;
use crate::query::plan::{Plan, PlanKind, SeedMethod, SelectPlan, ShowPlan};
use crate::query::result::{QueryResult, Rows, Selection, Stage};
use crate::query::select::{Candidate, TokenPrefix, select};
use crate::query::view::View;

/// Where every stage but propagation runs.
const DEVICE: &str = "cpu";

/// Runs `plan` on `corpus`.
pub(crate) fn execute(corpus: &Corpus<'_>, plan: &Plan) -> Result<QueryResult> {
    let mut stages = Vec::new();
    let (output, rows) = match &plan.kind {
        PlanKind::Select(select) => (
            select.output,
            Rows::Selection(run_select(corpus, select, &mut stages)?),
        ),
        PlanKind::Show(show) => (Output::Text, run_show(corpus, show, &mut stages)?),
    };
    Ok(QueryResult {
        output,
        rows,
        stages,
        explain: plan.explain,
        elapsed: Duration::ZERO,
    })
}

/// Records one stage's counts and time.
struct Timer(Instant);

impl Timer {
    fn start() -> Timer {
        Timer(Instant::now())
    }

    fn stop(
        self,
        stages: &mut Vec<Stage>,
        operator: &'static str,
        detail: String,
        rows: (usize, usize),
    ) {
        self.stop_on(stages, operator, detail, rows, DEVICE);
    }

    fn stop_on(
        self,
        stages: &mut Vec<Stage>,
        operator: &'static str,
        detail: String,
        rows: (usize, usize),
        device: &'static str,
    ) {
        stages.push(Stage {
            operator,
            detail,
            rows_in: rows.0,
            rows_out: rows.1,
            elapsed: self.0.elapsed(),
            device,
        });
    }
}

fn run_show(corpus: &Corpus<'_>, show: &ShowPlan, stages: &mut Vec<Stage>) -> Result<Rows> {
    let timer = Timer::start();
    let (detail, rows) = match show {
        ShowPlan::Docs => ("docs".to_owned(), Rows::Docs(corpus.documents()?)),
        ShowPlan::Stats => (
            "stats".to_owned(),
            Rows::Stats(corpus.only_store("SHOW STATS")?.stats()?),
        ),
        ShowPlan::Sessions => (
            "sessions".to_owned(),
            Rows::Sessions(sessions::sessions(corpus.only_store("SHOW SESSIONS")?)?),
        ),
        ShowPlan::Session(id) => (
            format!("session '{id}'"),
            Rows::Session(Box::new(sessions::session(
                corpus.only_store("SHOW SESSION")?,
                id,
            )?)),
        ),
        ShowPlan::Tree(doc, depth) => (
            format!("tree of '{doc}'"),
            Rows::Tree(corpus.holder(doc).tree(doc)?, *depth),
        ),
        ShowPlan::Dag(doc, level) => (
            format!("DAG of '{doc}'"),
            Rows::Dag(corpus.holder(doc).dag_listing(doc, *level)?),
        ),
        ShowPlan::Edus(doc, range) => (
            format!("EDUs of '{doc}'"),
            Rows::Edus(corpus.holder(doc).edus(doc, *range)?),
        ),
        ShowPlan::Node(doc, node) => {
            let view = View::load(corpus, doc)?;
            let candidate = Candidate {
                doc: 0,
                node: Some(*node),
                span: view.span_of(*node),
                score: 0.0,
            };
            let item = view.item(&candidate, false);
            (
                format!("node {node} of '{doc}'"),
                Rows::Selection(Selection {
                    tokens_used: item.tokens,
                    items: vec![item],
                    budget: None,
                }),
            )
        }
    };
    let count = match &rows {
        Rows::Selection(s) => s.items.len(),
        Rows::Docs(d) => d.len(),
        Rows::Tree(t, _) => t.nodes.len(),
        Rows::Edus(e) => e.len(),
        Rows::Stats(_) => 1,
        Rows::Dag(listing) => listing.nodes.len(),
        Rows::Sessions(sessions) => sessions.len(),
        Rows::Session(view) => view.turns as usize,
    };
    timer.stop(stages, "show", detail, (0, count));
    Ok(rows)
}

fn run_select(
    corpus: &Corpus<'_>,
    plan: &SelectPlan,
    stages: &mut Vec<Stage>,
) -> Result<Selection> {
    let mut seeded = match &plan.seed {
        Some(how) => {
            let timer = Timer::start();
            let seeded = seed(corpus, plan, how)?;
            let quoted = how.text.replace('\'', "''");
            let method = match (how.method, &how.vector) {
                (SeedMethod::Near, Some(given)) => {
                    format!("NEAR(a given vector of {})", given.len())
                }
                (SeedMethod::Bm25, _) => format!("BM25('{quoted}')"),
                (SeedMethod::Near, None) => format!("NEAR('{quoted}')"),
                (SeedMethod::Hybrid { alpha }, _) => format!("HYBRID('{quoted}', {alpha})"),
            };
            let method = match how.min {
                Some(min) => format!("{method} MIN {min}"),
                None => method,
            };
            timer.stop(
                stages,
                "seed",
                format!("{method} over nodes and EDUs in {}", plan.scope_text),
                (0, seeded.nodes.len() + seeded.edus.len()),
            );
            Some(seeded)
        }
        None => None,
    };
    // Load: the documents in play, decoded once into the engine's cache.
    let timer = Timer::start();
    let doc_ids = match (&seeded, &plan.docs) {
        (Some(seeded), _) => seeded.documents(),
        (None, Some(ids)) => ids.clone(),
        (None, None) => corpus.documents()?.into_iter().map(|m| m.id).collect(),
    };
    let mut views: Vec<View> = Vec::with_capacity(doc_ids.len());
    for id in &doc_ids {
        if let Some(view) = unless_damaged(id, View::load(corpus, id))? {
            views.push(view);
        }
    }
    let left_out = doc_ids.len() - views.len();
    let doc_ids: Vec<String> = views.iter().map(|view| view.id.clone()).collect();
    let passing = seeded.as_ref().map_or(0, |s| s.nodes.len() + s.edus.len());
    timer.stop(
        stages,
        "load",
        if left_out == 0 {
            format!("{} documents read from the store", views.len())
        } else {
            format!(
                "{} documents read from the store, {left_out} damaged left out",
                views.len()
            )
        },
        (passing, passing),
    );
    let match_scores =
        (seeded.as_mut()).map_or_else(MatchScores::default, |s| std::mem::take(&mut s.matches));
    let mut candidates = match seeded {
        Some(seeded) => {
            let index: HashMap<&str, usize> = doc_ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i))
                .collect();
            // A damaged document's hits went with it, and a hit whose
            // coordinates its document does not have (a damaged index
            // entry) is left out.
            let to_candidate = |hit: &RankedHit| {
                let doc = *index.get(hit.doc.as_str())?;
                let view = &views[doc];
                let nodes = view.document().tree.nodes.len();
                let within = hit.span.first <= hit.span.last
                    && hit.span.last <= view.last_edu()
                    && hit.node.is_none_or(|node| (node as usize) < nodes);
                if !within {
                    tracing::warn!(
                        "an index entry of {} names coordinates it does not have (EDUs {}-{}, node {:?}): the index is damaged (`edudb reindex` rebuilds it)",
                        hit.doc,
                        hit.span.first,
                        hit.span.last,
                        hit.node
                    );
                    return None;
                }
                Some(Candidate {
                    doc,
                    node: hit.node,
                    span: hit.span,
                    score: hit.score,
                })
            };
            let nodes: Vec<Candidate> = seeded.nodes.iter().filter_map(to_candidate).collect();
            let edus: Vec<Candidate> = seeded.edus.iter().filter_map(to_candidate).collect();
            match (plan.traverse, plan.propagate) {
                (_, Some(how)) => {
                    let timer = Timer::start();
                    let rows = nodes.len() + edus.len();
                    let named =
                        link_named_sections(corpus, plan, &nodes, &edus, how.across, &mut views)?;
                    let seeds: Vec<Candidate> =
                        edus.iter().chain(&named.first_edus).copied().collect();
                    let (propagated, detail, device) = propagate(corpus, &views, &seeds, how)?;
                    timer.stop_on(
                        stages,
                        "propagate",
                        format!("{detail}; sections named across: {}", named.sections.len()),
                        (rows, nodes.len() + named.sections.len() + propagated.len()),
                        device,
                    );
                    nodes
                        .into_iter()
                        .chain(named.sections)
                        .chain(propagated)
                        .collect()
                }
                (Some((threshold, depth)), None) => {
                    let timer = Timer::start();
                    let rows = nodes.len() + edus.len();
                    let (walked, visited) = traverse(&views, &nodes, &edus, threshold, depth);
                    timer.stop(
                        stages,
                        "traverse",
                        format!(
                            "threshold {threshold}, depth {}; {visited} nodes visited",
                            depth.map_or("unbounded".to_owned(), |d| d.to_string())
                        ),
                        (rows, walked.len()),
                    );
                    walked
                }
                (None, None) => nodes.into_iter().chain(edus).collect(),
            }
        }
        None => {
            let timer = Timer::start();
            let scanned = scan(&views, plan.output != Output::Nodes);
            timer.stop(
                stages,
                "scan",
                format!("every node and EDU in {}", plan.scope_text),
                (0, scanned.len()),
            );
            scanned
        }
    };
    if plan.output == Output::Nodes {
        candidates.retain(|c| c.node.is_some());
    }
    if let Some(filter) = &plan.filter {
        let timer = Timer::start();
        let before = candidates.len();
        candidates.retain(|c| {
            let view = &views[c.doc];
            matches(filter, view, c, plan.times.get(&view.id).copied())
        });
        timer.stop(
            stages,
            "filter",
            "WHERE".to_owned(),
            (before, candidates.len()),
        );
    }
    if let Some(growth) = plan.expand {
        let timer = Timer::start();
        for candidate in &mut candidates {
            *candidate = expand(&views[candidate.doc], candidate, growth);
        }
        let rows = candidates.len();
        timer.stop(
            stages,
            "expand",
            format!("{growth:?}").to_lowercase(),
            (rows, rows),
        );
    }
    let timer = Timer::start();
    // Best first; on ties whole nodes before runs, then document order,
    // then the wider span (so an ancestor comes before its descendants).
    candidates.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.node.is_some().cmp(&a.node.is_some()))
            .then(a.doc.cmp(&b.doc))
            .then(a.span.first.cmp(&b.span.first))
            .then(b.span.len().cmp(&a.span.len()))
    });
    let tokens: Vec<&TokenPrefix> = views.iter().map(|v| &v.loaded.tokens).collect();
    let picked = select(
        &candidates,
        &tokens,
        plan.budget,
        plan.limit,
        plan.output != Output::Nodes,
    );
    timer.stop(
        stages,
        "select",
        match plan.budget {
            Some(b) => format!("greedy under {b} tokens, limit {}", limit_text(plan.limit)),
            None => format!("best {}", limit_text(plan.limit)),
        },
        (candidates.len(), picked.picks.len()),
    );
    let timer = Timer::start();
    let items = linearise(&views, picked.picks, plan, &match_scores);
    timer.stop(
        stages,
        "linearise",
        match plan.order {
            Order::Position => "document order, grouped by document".to_owned(),
            Order::Score => "best first".to_owned(),
            Order::Time => "by the time of each session turn".to_owned(),
        },
        (items.len(), items.len()),
    );
    Ok(Selection {
        items,
        tokens_used: picked.tokens,
        budget: plan.budget,
    })
}

fn limit_text(limit: usize) -> String {
    if limit == usize::MAX {
        "none".to_owned()
    } else {
        limit.to_string()
    }
}
