//! Runs a bound [`Plan`]: seed → (traverse) → filter → expand → select →
//! linearise, timing every stage for EXPLAIN. Documents are read in place
//! from the store, once per query, and only those the seed touched.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::ast::{CompareOp, Order, Output};
use super::links;
use super::plan::{
    Catalog, Filter, Growth, Plan, PlanKind, PropagatePlan, SeedMethod, SeedPlan, SelectPlan,
    ShowPlan,
};
use super::select::{Candidate, TokenPrefix, select};
use super::view::View;
use crate::compute::propagate::{PropagateOptions, PropagationGraph};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::session as sessions;
use crate::model::dag::Dag;
use crate::model::edu::{EduKind, Span};
use crate::model::ids::parse_turn_id;
use crate::model::rank::{RankedHit, Target};
use crate::query::result::{Item, QueryResult, Rows, Selection, Stage};

/// EDUs taken from each node the walk stops at (CSTree-SRI's sentence-level top-k).
const EDUS_PER_WALK_LEAF: usize = 3;
/// Fewest candidates a seed fetches from each of the node and EDU rankings.
const MIN_SEED_CANDIDATES: usize = 32;
/// Most candidates a seed fetches from each ranking.
const MAX_SEED_CANDIDATES: usize = 10_000;
/// Where every stage but propagation runs.
const DEVICE: &str = "cpu";

impl Catalog for Engine {
    fn document_ids(&self) -> Result<Vec<String>> {
        Ok(self.documents()?.into_iter().map(|m| m.id).collect())
    }

    fn session_ids(&self) -> Result<Vec<String>> {
        Ok(sessions::sessions(self)?
            .into_iter()
            .map(|s| s.id)
            .collect())
    }

    fn session_turns(&self, id: &str) -> Result<Option<crate::model::dialogue::TimedTurns>> {
        sessions::session_turns(self, id)
    }

    fn document_size(&self, id: &str) -> Result<Option<(u32, u32)>> {
        // Through the cache: the executor reads the same document next.
        match self.cached_document(id) {
            Ok(loaded) => {
                let meta = &loaded.document.meta;
                Ok(Some((meta.nodes, meta.edus)))
            }
            Err(Error::NoSuchDocument(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

/// The query's rule for a document it reads as one among others: damage
/// (a record that does not read whole) leaves the document out of the
/// query with a warning, as listings do, so one damaged document never
/// fails a query over the rest; any other failure fails the query.
fn unless_damaged<T>(id: &str, read: Result<T>) -> Result<Option<T>> {
    match read {
        Ok(value) => Ok(Some(value)),
        Err(err) if err.is_damage() => {
            tracing::warn!(
                "document {id} is damaged and was left out of the query ({err}); `edudb check` names every damaged document"
            );
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// Runs `plan` on `engine`.
pub fn execute(engine: &Engine, plan: &Plan) -> Result<QueryResult> {
    let mut stages = Vec::new();
    let (output, rows) = match &plan.kind {
        PlanKind::Select(select) => (
            select.output,
            Rows::Selection(run_select(engine, select, &mut stages)?),
        ),
        PlanKind::Show(show) => (Output::Text, run_show(engine, show, &mut stages)?),
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

fn run_show(engine: &Engine, show: &ShowPlan, stages: &mut Vec<Stage>) -> Result<Rows> {
    let timer = Timer::start();
    let (detail, rows) = match show {
        ShowPlan::Docs => ("docs".to_owned(), Rows::Docs(engine.documents()?)),
        ShowPlan::Stats => ("stats".to_owned(), Rows::Stats(engine.stats()?)),
        ShowPlan::Sessions => (
            "sessions".to_owned(),
            Rows::Sessions(sessions::sessions(engine)?),
        ),
        ShowPlan::Session(id) => (
            format!("session '{id}'"),
            Rows::Session(Box::new(sessions::session(engine, id)?)),
        ),
        ShowPlan::Tree(doc, depth) => (
            format!("tree of '{doc}'"),
            Rows::Tree(engine.tree(doc)?, *depth),
        ),
        ShowPlan::Dag(doc, level) => (
            format!("DAG of '{doc}'"),
            Rows::Dag(engine.dag_listing(doc, *level)?),
        ),
        ShowPlan::Edus(doc, range) => (
            format!("EDUs of '{doc}'"),
            Rows::Edus(engine.edus(doc, *range)?),
        ),
        ShowPlan::Node(doc, node) => {
            let view = View::load(engine, doc)?;
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

/// Seed hits of one ranking, scores divided by the best (negative cosine
/// similarities count as 0).
fn normalised(hits: Vec<RankedHit>) -> Vec<RankedHit> {
    let best = hits.iter().map(|h| h.score).fold(0.0f32, f32::max);
    scaled(hits, best)
}

/// Hits with scores divided by `scale` and clamped to 0..=1 (all 0 when
/// `scale` is not positive).
fn scaled(mut hits: Vec<RankedHit>, scale: f32) -> Vec<RankedHit> {
    for hit in &mut hits {
        hit.score = if scale > 0.0 {
            (hit.score / scale).clamp(0.0, 1.0)
        } else {
            0.0
        };
    }
    hits
}

/// HYBRID: the union of a BM25 ranking and a vector ranking (both scaled
/// to 0..=1), each hit scored `alpha × vector + (1 − alpha) × BM25` (a hit
/// missing from one ranking scores 0 there); the best `wanted`.
fn fused(bm25: Vec<RankedHit>, near: Vec<RankedHit>, alpha: f32, wanted: usize) -> Vec<RankedHit> {
    let mut by_item: HashMap<(String, Option<u32>, u32), RankedHit> = HashMap::new();
    for (hits, weight) in [(bm25, 1.0 - alpha), (near, alpha)] {
        for hit in hits {
            let key = (hit.doc.clone(), hit.node, hit.span.first);
            let contribution = weight * hit.score;
            by_item
                .entry(key)
                .and_modify(|h| h.score += contribution)
                .or_insert(RankedHit {
                    score: contribution,
                    ..hit
                });
        }
    }
    let mut hits: Vec<RankedHit> = by_item.into_values().collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| (&a.doc, a.span.first).cmp(&(&b.doc, b.span.first)))
    });
    hits.truncate(wanted);
    hits
}

fn run_select(engine: &Engine, plan: &SelectPlan, stages: &mut Vec<Stage>) -> Result<Selection> {
    let mut seeded = match &plan.seed {
        Some(how) => {
            let timer = Timer::start();
            let seeded = seed(engine, plan, how)?;
            let quoted = how.text.replace('\'', "''");
            let method = match how.method {
                SeedMethod::Bm25 => format!("BM25('{quoted}')"),
                SeedMethod::Near => format!("NEAR('{quoted}')"),
                SeedMethod::Hybrid { alpha } => format!("HYBRID('{quoted}', {alpha})"),
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
    // Load: the documents in play, read in place.
    let timer = Timer::start();
    let doc_ids = match (&seeded, &plan.docs) {
        (Some(seeded), _) => seeded.documents(),
        (None, Some(ids)) => ids.clone(),
        (None, None) => engine.documents()?.into_iter().map(|m| m.id).collect(),
    };
    let mut views: Vec<View> = Vec::with_capacity(doc_ids.len());
    for id in &doc_ids {
        if let Some(view) = unless_damaged(id, View::load(engine, id))? {
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
                        link_named_sections(engine, plan, &nodes, &edus, how.across, &mut views)?;
                    let seeds: Vec<Candidate> =
                        edus.iter().chain(&named.first_edus).copied().collect();
                    let (propagated, detail, device) = propagate(engine, &views, &seeds, how)?;
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

/// What a seed found: node and EDU hits, each ranking normalised by its
/// best, and their match scores before that.
struct Seeded {
    nodes: Vec<RankedHit>,
    edus: Vec<RankedHit>,
    matches: MatchScores,
}

impl Seeded {
    /// The documents the hits fall in, sorted, each once.
    fn documents(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .nodes
            .iter()
            .chain(&self.edus)
            .map(|h| h.doc.clone())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// Ranks nodes and EDUs in scope against the seed text (BM25, vectors, or
/// both), fetching `max(32, 8 × LIMIT, BUDGET / 16)` of each, capped at
/// 10,000.
fn seed(engine: &Engine, plan: &SelectPlan, how: &SeedPlan) -> Result<Seeded> {
    let by_limit = if plan.limit == usize::MAX {
        0
    } else {
        plan.limit.saturating_mul(8)
    };
    let by_budget = plan.budget.map_or(0, |b| (b / 16) as usize);
    let wanted = by_limit
        .max(by_budget)
        .clamp(MIN_SEED_CANDIDATES, MAX_SEED_CANDIDATES);
    if plan.docs.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Seeded {
            nodes: Vec::new(),
            edus: Vec::new(),
            matches: MatchScores::default(),
        });
    }
    let scope = scope_ids(plan);
    let text = how.text.as_str();
    let reader = engine.fulltext_reader();
    let query_vector = match how.method {
        SeedMethod::Bm25 => None,
        SeedMethod::Near | SeedMethod::Hybrid { .. } => Some(engine.embed_query(text)?),
    };
    // A target's hits with their match scores (those under MIN dropped),
    // and how many matched at all.
    let rank = |target| -> Result<(Vec<RankedHit>, usize)> {
        let bm25 = || reader.rank(text, target, scope.as_deref(), wanted);
        let near = || match &query_vector {
            Some(query) => engine.vector_search(target, query, wanted, scope.as_deref()),
            None => Ok(Vec::new()),
        };
        let hits = match how.method {
            SeedMethod::Bm25 => bm25()?,
            SeedMethod::Near => near()?,
            // Both on a fixed scale before fusing, so a weak match in one
            // ranking is not lifted to 1 just for being that ranking's best.
            SeedMethod::Hybrid { alpha } => fused(
                scaled(
                    bm25()?,
                    reader.rank_ceiling(text, target, scope.as_deref())?,
                ),
                scaled(near()?, 1.0),
                alpha,
                wanted,
            ),
        };
        let matched = hits.len();
        Ok(match how.min {
            Some(min) => (
                hits.into_iter().filter(|h| h.score >= min).collect(),
                matched,
            ),
            None => (hits, matched),
        })
    };
    let mut matches = MatchScores::default();
    let mut seeded = |(hits, _): (Vec<RankedHit>, usize)| {
        matches.record(&hits);
        normalised(hits)
    };
    if plan.output == Output::Nodes {
        let nodes = seeded(rank(Target::Nodes)?);
        return Ok(Seeded {
            nodes,
            edus: Vec::new(),
            matches,
        });
    }
    // The two rankings are independent searches: run them side by side, on
    // the shared pool (a thread spawned per query costs a visible share).
    let (nodes, edus) = rayon::join(|| rank(Target::Nodes), || rank(Target::Edus));
    let nodes = nodes?;
    // No node matched BM25: no EDU can either (node texts cover every EDU).
    let edus = if nodes.1 == 0 && how.method == SeedMethod::Bm25 {
        (Vec::new(), 0)
    } else {
        edus?
    };
    let (nodes, edus) = (seeded(nodes), seeded(edus));
    Ok(Seeded {
        nodes,
        edus,
        matches,
    })
}

/// The seed's own scores of its hits (BM25, cosine similarity, HYBRID's
/// fused score on its fixed scale), before each ranking is divided by its
/// best: what a result item reports as its `match_score`.
#[derive(Debug, Default)]
struct MatchScores(HashMap<(String, Option<u32>, u32), f32>);

impl MatchScores {
    /// Keeps the scores of `hits`.
    fn record(&mut self, hits: &[RankedHit]) {
        for hit in hits {
            let key = (hit.doc.clone(), hit.node, hit.span.first);
            self.0.insert(key, hit.score);
        }
    }

    /// The match score of a pick in document `doc`: its node's, or for a
    /// run of EDUs the best of its EDUs'; `None` when it is or holds no
    /// seed hit (a walk leaf, a propagated node).
    fn of(&self, doc: &str, pick: &Candidate) -> Option<f32> {
        let score = |node, first| self.0.get(&(doc.to_owned(), node, first)).copied();
        match pick.node {
            Some(node) => score(Some(node), pick.span.first),
            None => (pick.span.first..=pick.span.last)
                .filter_map(|e| score(None, e))
                .reduce(f32::max),
        }
    }
}

/// Without a seed: every node (and EDU, when `edus`) in scope, score 0.
fn scan(views: &[View], edus: bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (doc, view) in views.iter().enumerate() {
        for id in 0..view.document().tree.nodes.len() as u32 {
            out.push(Candidate {
                doc,
                node: Some(id),
                span: view.span_of(id),
                score: 0.0,
            });
        }
        if edus {
            out.extend((0..view.document().edus.len() as u32).map(|e| Candidate {
                doc,
                node: None,
                span: Span::new(e, e),
                score: 0.0,
            }));
        }
    }
    out
}

/// CSTree-SRI's top-down walk. A node's continuation score φ is the best of
/// its own seed score and the seed scores of the EDUs it covers. From each
/// root with φ ≥ `threshold`, children with φ ≥ `threshold` (down to
/// `depth`) are explored; a node none of whose children is explored is a
/// walk leaf and becomes a candidate scored φ. Each visited node also
/// contributes its best EDUs not covered by an explored child. Returns the
/// candidates and the number of nodes visited.
fn traverse(
    views: &[View],
    nodes: &[Candidate],
    edus: &[Candidate],
    threshold: f32,
    depth: Option<u16>,
) -> (Vec<Candidate>, usize) {
    let mut node_scores: Vec<HashMap<u32, f32>> = vec![HashMap::new(); views.len()];
    for c in nodes {
        if let Some(id) = c.node {
            node_scores[c.doc].insert(id, c.score);
        }
    }
    let mut edu_scores: Vec<Vec<(u32, f32)>> = vec![Vec::new(); views.len()];
    for c in edus {
        edu_scores[c.doc].push((c.span.first, c.score));
    }
    for scores in &mut edu_scores {
        scores.sort_by_key(|&(edu, _)| edu);
    }
    let mut out = Vec::new();
    let mut visited = 0;
    for (doc, view) in views.iter().enumerate() {
        let hits = &edu_scores[doc];
        let in_span = |span: Span| {
            let from = hits.partition_point(|&(e, _)| e < span.first);
            let to = hits.partition_point(|&(e, _)| e <= span.last);
            &hits[from..to]
        };
        let phi = |id: u32| {
            let own = node_scores[doc].get(&id).copied().unwrap_or(0.0);
            in_span(view.span_of(id))
                .iter()
                .map(|&(_, s)| s)
                .fold(own, f32::max)
        };
        let continues = |id: u32| {
            let score = phi(id);
            score >= threshold && score > 0.0
        };
        if !continues(0) {
            continue;
        }
        let mut stack = vec![0u32];
        while let Some(id) = stack.pop() {
            visited += 1;
            let explored: Vec<u32> = view
                .children(id)
                .filter(|&c| depth.is_none_or(|d| view.node(c).level <= d))
                .filter(|&c| continues(c))
                .collect();
            let mut own: Vec<(u32, f32)> = in_span(view.span_of(id))
                .iter()
                .copied()
                .filter(|&(e, _)| {
                    !explored
                        .iter()
                        .any(|&c| view.span_of(c).contains(&Span::new(e, e)))
                })
                .collect();
            own.sort_by(|a, b| b.1.total_cmp(&a.1));
            out.extend(
                own.iter()
                    .take(EDUS_PER_WALK_LEAF)
                    .map(|&(e, score)| Candidate {
                        doc,
                        node: None,
                        span: Span::new(e, e),
                        score,
                    }),
            );
            if explored.is_empty() {
                out.push(Candidate {
                    doc,
                    node: Some(id),
                    span: view.span_of(id),
                    score: phi(id),
                });
            }
            stack.extend(explored);
        }
    }
    (out, visited)
}

/// PECAN's propagation over the DAGs of the documents the seed touched,
/// as one graph. A DAG node's direct similarity is the best seed score of
/// its EDUs; scores flow down the weighted edges ([`Device`] runs
/// [`crate::compute::propagate`]) for STEPS levels (default: from the highest
/// top level to the chunks). The candidates are EDUs: every seeded EDU,
/// rescored `(1 − α)·own + α·(its chunk's score)`, and the EDUs of every
/// information point with a positive score, at `α·(the point's score)`; an
/// EDU keeps the better of the two. The seed's tree nodes stay candidates
/// with their own scores. Returns the candidates, the stage's detail and
/// the device that ran it.
///
/// [`Device`]: crate::compute::device::Device
fn propagate(
    engine: &Engine,
    views: &[View],
    edus: &[Candidate],
    how: PropagatePlan,
) -> Result<(Vec<Candidate>, String, &'static str)> {
    let mut edu_scores: Vec<Vec<f32>> = views
        .iter()
        .map(|v| vec![0.0; v.document().edus.len()])
        .collect();
    for c in edus {
        let slot = &mut edu_scores[c.doc][c.span.first as usize];
        *slot = slot.max(c.score);
    }
    let dags: Vec<&Dag> = views.iter().map(|v| &v.loaded.dag).collect();
    let (mut seeds, mut owners) = (Vec::new(), Vec::new());
    for (doc, dag) in dags.iter().enumerate() {
        for (i, node) in dag.nodes.iter().enumerate() {
            let best = node
                .edus()
                .iter()
                .map(|&e| edu_scores[doc][e as usize])
                .fold(0.0f32, f32::max);
            seeds.push(best);
            owners.push((doc, i));
        }
    }
    let graph = PropagationGraph::of_dags(dags.iter().copied());
    let deepest = dags.iter().map(|d| d.top_level()).max().unwrap_or(1);
    let options = PropagateOptions {
        steps: how
            .steps
            .unwrap_or(u32::from(deepest.saturating_sub(1)).max(1)),
        alpha: how.alpha,
    };
    let device = engine.device().propagation_device(&graph, 1);
    let scored = engine
        .device()
        .propagate_top_k(&graph, &seeds, 1, options, seeds.len())?
        .pop()
        .unwrap_or_default();
    let mut chunk_scores: Vec<Vec<(Span, f32)>> = vec![Vec::new(); views.len()];
    // Each EDU's best score: a seeded EDU's own blended with its chunk's,
    // and an information point's members the point's propagated score.
    let mut best: HashMap<(usize, u32), f32> = HashMap::new();
    let mut raise = |doc: usize, edu: u32, score: f32| {
        let slot = best.entry((doc, edu)).or_insert(0.0);
        *slot = slot.max(score);
    };
    for &(global, score) in &scored {
        let (doc, i) = owners[global as usize];
        let node = &dags[doc].nodes[i];
        if node.level == 1 {
            chunk_scores[doc].push((node.span, score));
        } else if how.alpha * score > 0.0 {
            for &e in &node.points {
                raise(doc, e, how.alpha * score);
            }
        }
    }
    for chunks in &mut chunk_scores {
        chunks.sort_by_key(|(span, _)| span.first);
    }
    for c in edus {
        let chunks = &chunk_scores[c.doc];
        let at = chunks.partition_point(|(span, _)| span.last < c.span.first);
        let chunk = chunks
            .get(at)
            .filter(|(span, _)| span.first <= c.span.first)
            .map_or(0.0, |&(_, s)| s);
        raise(
            c.doc,
            c.span.first,
            (1.0 - how.alpha) * c.score + how.alpha * chunk,
        );
    }
    let mut out: Vec<Candidate> = best
        .into_iter()
        .map(|((doc, e), score)| Candidate {
            doc,
            node: None,
            span: Span::new(e, e),
            score,
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.doc.cmp(&b.doc))
            .then(a.span.first.cmp(&b.span.first))
    });
    let detail = format!(
        "STEPS {}, ALPHA {} over {} DAG nodes and {} edges of {} documents",
        options.steps,
        options.alpha,
        graph.nodes(),
        graph.edges(),
        views.len()
    );
    Ok((out, detail, device))
}

/// The scope's document ids, `None` for every document.
fn scope_ids(plan: &SelectPlan) -> Option<Vec<&str>> {
    plan.docs
        .as_ref()
        .map(|ids| ids.iter().map(String::as_str).collect())
}

/// The sections PROPAGATE reaches across documents (see [`links`]).
#[derive(Default)]
struct NamedCandidates {
    /// Each named section, whole.
    sections: Vec<Candidate>,
    /// Each named section's first EDU that is not its heading, at the same
    /// score: it fits a budget the whole section may not, and it seeds the
    /// section's DAG.
    first_edus: Vec<Candidate>,
}

/// The sections that the seed's question and its best [`links::SOURCES`]
/// candidates name, within the query's scope, as candidates: a section the
/// question names scores the best candidate's score, one a candidate names
/// `across ×` that candidate's, and each keeps the most it is given.
/// Documents not yet in `views` are loaded. A document removed since the
/// index was read names nothing and is named by nothing. Nothing when
/// `across` is 0 or nothing was seeded.
fn link_named_sections(
    engine: &Engine,
    plan: &SelectPlan,
    nodes: &[Candidate],
    edus: &[Candidate],
    across: f32,
    views: &mut Vec<View>,
) -> Result<NamedCandidates> {
    let mut named = NamedCandidates::default();
    if across <= 0.0 {
        return Ok(named);
    }
    let mut best: Vec<&Candidate> = nodes.iter().chain(edus).collect();
    best.sort_by(|a, b| b.score.total_cmp(&a.score));
    let (Some(top), Some(seed)) = (best.first(), &plan.seed) else {
        return Ok(named);
    };
    let question = links::Source {
        place: None,
        text: &seed.text,
        passes: top.score,
    };
    let candidates = best.iter().take(links::SOURCES).map(|c| {
        let view = &views[c.doc];
        let read = view.leading(c.span, links::SOURCE_TOKENS);
        links::Source {
            place: Some((&view.id, read)),
            text: view.text_of(read),
            passes: across * c.score,
        }
    });
    let sources: Vec<links::Source<'_>> = std::iter::once(question).chain(candidates).collect();
    let scope = scope_ids(plan);
    let found = links::named_sections(
        engine.fulltext_reader(),
        scope.as_deref(),
        &sources,
        |doc, section| match engine.cached_document(doc) {
            Err(Error::NoSuchDocument(_)) => Ok(None),
            read => Ok(unless_damaged(doc, read)?.and_then(|loaded| {
                (loaded.document.tree.nodes.get(section as usize)).map(|node| node.title.clone())
            })),
        },
    )?;
    let mut index: HashMap<String, usize> = views
        .iter()
        .enumerate()
        .map(|(i, view)| (view.id.clone(), i))
        .collect();
    for section in found {
        let doc = match index.get(&section.doc) {
            Some(&doc) => doc,
            None => match View::load(engine, &section.doc) {
                Err(Error::NoSuchDocument(_)) => continue,
                read => match unless_damaged(&section.doc, read)? {
                    Some(view) => {
                        views.push(view);
                        index.insert(section.doc, views.len() - 1);
                        views.len() - 1
                    }
                    None => continue,
                },
            },
        };
        let view = &views[doc];
        // The document's own tree, not the index, says what the section
        // spans (the two may differ while a replace is being applied).
        let Some(node) = view.document().tree.nodes.get(section.section as usize) else {
            continue;
        };
        let span = node.span;
        let first = (span.first..=span.last)
            .find(|&e| view.document().edus[e as usize].kind != EduKind::Heading)
            .unwrap_or(span.first);
        named.sections.push(Candidate {
            doc,
            node: Some(section.section),
            span,
            score: section.score,
        });
        named.first_edus.push(Candidate {
            doc,
            node: None,
            span: Span::new(first, first),
            score: section.score,
        });
    }
    Ok(named)
}

/// `actual <op> wanted`.
fn compare<T: PartialOrd>(op: CompareOp, actual: T, wanted: T) -> bool {
    match op {
        CompareOp::Eq => actual == wanted,
        CompareOp::Ne => actual != wanted,
        CompareOp::Lt => actual < wanted,
        CompareOp::Le => actual <= wanted,
        CompareOp::Gt => actual > wanted,
        CompareOp::Ge => actual >= wanted,
    }
}

/// Whether `candidate` of `view` (whose session turn time is `time`)
/// meets `filter`.
fn matches(filter: &Filter, view: &View, candidate: &Candidate, time: Option<i64>) -> bool {
    match filter {
        Filter::Level(op, level) => compare(*op, view.level(candidate), *level),
        Filter::Page(op, page) => view.pages(candidate).is_some_and(|pages| {
            let (first, last) = (pages.start + 1, pages.end);
            match op {
                CompareOp::Eq => first <= *page && *page <= last,
                CompareOp::Ne => !(first == *page && last == *page),
                CompareOp::Lt => first < *page,
                CompareOp::Le => first <= *page,
                CompareOp::Gt => last > *page,
                CompareOp::Ge => last >= *page,
            }
        }),
        Filter::Time(op, wanted) => time.is_some_and(|time| compare(*op, time, *wanted)),
        Filter::Kind(equal, kind) => {
            let actual = candidate.node.map(|n| view.node(n).kind);
            (actual == *kind) == *equal
        }
        Filter::Title(regex) => candidate
            .node
            .is_some_and(|n| regex.is_match(view.node(n).title.as_str())),
        Filter::Doc(id) => view.id == *id,
        Filter::And(filters) => filters.iter().all(|f| matches(f, view, candidate, time)),
        Filter::Or(filters) => filters.iter().any(|f| matches(f, view, candidate, time)),
        Filter::Not(a) => !matches(a, view, candidate, time),
    }
}

/// Grows one candidate structurally; its score is kept.
fn expand(view: &View, candidate: &Candidate, growth: Growth) -> Candidate {
    let whole_node = |id: u32| Candidate {
        node: Some(id),
        span: view.span_of(id),
        ..*candidate
    };
    let run = |span: Span| Candidate {
        node: view.node_of_run(span),
        span,
        ..*candidate
    };
    match (growth, candidate.node) {
        (Growth::Subtree, Some(_)) => *candidate,
        (Growth::Subtree | Growth::Parent, None) => whole_node(view.innermost(candidate.span)),
        (Growth::Parent, Some(id)) => whole_node(view.node(id).parent.unwrap_or(id)),
        (Growth::Siblings, Some(id)) => match view.node(id).parent {
            None => *candidate,
            Some(parent) => {
                let siblings: Vec<u32> = view.children(parent).collect();
                let at = siblings.iter().position(|&s| s == id).unwrap_or(0);
                let first = siblings[at.saturating_sub(1)];
                let last = siblings[(at + 1).min(siblings.len() - 1)];
                run(Span::new(
                    view.span_of(first).first,
                    view.span_of(last).last,
                ))
            }
        },
        (Growth::Siblings, None) => {
            let within = view.span_of(view.innermost(candidate.span));
            run(Span::new(
                candidate.span.first.saturating_sub(1).max(within.first),
                (candidate.span.last + 1).min(within.last),
            ))
        }
        (Growth::Context(n), _) => run(Span::new(
            candidate.span.first.saturating_sub(n),
            candidate.span.last.saturating_add(n).min(view.last_edu()),
        )),
    }
}

/// Orders picks as the plan asks and reads their text (and boxes).
fn linearise(
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
