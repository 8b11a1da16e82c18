//! PROPAGATE: PECAN's score propagation down the documents' DAGs, and the
//! step across documents to the sections a question or a candidate names.

use std::collections::HashMap;

use super::scope::{scope_ids, unless_damaged};
use crate::compute::propagate::{PropagateOptions, PropagationGraph};
use crate::error::{Error, Result};
use crate::model::dag::Dag;
use crate::model::edu::{EduKind, Span};
use crate::query::corpus::Corpus;
use crate::query::links;
use crate::query::plan::{PropagatePlan, SelectPlan};
use crate::query::select::Candidate;
use crate::query::view::View;

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
pub(super) fn propagate(
    corpus: &Corpus<'_>,
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
    let device = corpus.device().propagation_device(&graph, 1);
    let scored = corpus
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

/// The sections PROPAGATE reaches across documents (see [`links`]).
#[derive(Default)]
pub(super) struct NamedCandidates {
    /// Each named section, whole.
    pub(super) sections: Vec<Candidate>,
    /// Each named section's first EDU that is not its heading, at the same
    /// score: it fits a budget the whole section may not, and it seeds the
    /// section's DAG.
    pub(super) first_edus: Vec<Candidate>,
}

/// The sections that the seed's question and its best [`links::SOURCES`]
/// candidates name, within the query's scope, as candidates: a section the
/// question names scores the best candidate's score, one a candidate names
/// `across ×` that candidate's, and each keeps the most it is given.
/// Documents not yet in `views` are loaded. A document removed since the
/// index was read names nothing and is named by nothing. Nothing when
/// `across` is 0 or nothing was seeded.
pub(super) fn link_named_sections(
    corpus: &Corpus<'_>,
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
        &corpus.fulltext(),
        scope.as_deref(),
        &sources,
        |doc, section| match corpus.cached_document(doc) {
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
            None => match View::load(corpus, &section.doc) {
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
