//! Scoring picks against gold sentences, and the bootstrap summary.
//!
//! Gold sentences map to EDUs through byte spans: a sentence's EDUs are
//! those overlapping it. It is *covered* when all of them were picked
//! (every method picks whole EDUs, so no method is scored on fragments).
//! Per question: evidence recall = covered gold sentences ÷ gold
//! sentences; precision = picked tokens in EDUs of any gold sentence ÷
//! picked tokens (0 when nothing was picked); tokens = picked tokens.
//!
//! Gold passages (text whose place in the stored text is not known, as
//! FinanceBench gives its evidence) are scored by word bigrams instead:
//! recall = the mean over passages of the share of a passage's bigrams in
//! the text picked from its document; precision = the share of the picked
//! text's bigrams that are in some passage.

use std::collections::{BTreeMap, HashSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::bigrams::{Bigram, word_bigrams};
use super::dataset::{Evidence, Passage};
use super::flat::Unit;
use crate::model::document::Document;

/// One gold sentence as the EDUs `(document index, EDU id)` it overlaps.
pub type GoldSentence = Vec<(usize, u32)>;

/// The EDUs each gold sentence overlaps; `doc_index` maps a document id to
/// its index in `docs`.
pub fn gold_sentences(
    evidence: &[Evidence],
    docs: &[Document],
    doc_index: impl Fn(&str) -> Option<usize>,
) -> Vec<GoldSentence> {
    evidence
        .iter()
        .map(|gold| {
            let Some(index) = doc_index(&gold.doc) else {
                return Vec::new();
            };
            let edus = &docs[index].edus;
            let (start, end) = (gold.bytes.start as u32, gold.bytes.end as u32);
            let from = edus.partition_point(|e| e.end <= start);
            edus[from..]
                .iter()
                .take_while(|e| e.start < end)
                .map(|e| (index, e.id))
                .collect()
        })
        .collect()
}

/// How one method did on one question at one budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    /// Share of gold sentences covered.
    pub recall: f64,
    /// Share of picked tokens inside gold sentences.
    pub precision: f64,
    /// Tokens picked.
    pub tokens: u64,
}

/// The distinct EDUs `(document index, EDU id)` of `picks`.
fn picked_edus(picks: &[Unit]) -> HashSet<(usize, u32)> {
    picks
        .iter()
        .flat_map(|u| (u.first..=u.last).map(move |edu| (u.doc, edu)))
        .collect()
}

/// Tokens of `edus`.
fn tokens_of<'a>(edus: impl Iterator<Item = &'a (usize, u32)>, docs: &[Document]) -> u64 {
    edus.map(|&(doc, edu)| u64::from(docs[doc].edus[edu as usize].tokens))
        .sum()
}

/// Scores `picks` (disjoint EDU runs) against gold passages; `doc_index`
/// maps a document id to its index in `docs`.
pub fn score_passages(
    passages: &[Passage],
    picks: &[Unit],
    docs: &[Document],
    doc_index: impl Fn(&str) -> Option<usize>,
) -> Scores {
    let mut picked_bigrams: BTreeMap<usize, HashSet<Bigram>> = BTreeMap::new();
    for unit in picks {
        let edus = &docs[unit.doc].edus;
        let span = edus[unit.first as usize].start as usize..edus[unit.last as usize].end as usize;
        picked_bigrams
            .entry(unit.doc)
            .or_default()
            .extend(word_bigrams(&docs[unit.doc].text[span]));
    }
    let wanted: Vec<(Option<usize>, HashSet<Bigram>)> = passages
        .iter()
        .map(|p| (doc_index(&p.doc), word_bigrams(&p.text)))
        .collect();
    let found = |doc: Option<usize>, bigrams: &HashSet<Bigram>| {
        let Some(picked) = doc.and_then(|d| picked_bigrams.get(&d)) else {
            return 0;
        };
        bigrams.intersection(picked).count()
    };
    let recall = wanted
        .iter()
        .map(|(doc, bigrams)| found(*doc, bigrams) as f64 / bigrams.len().max(1) as f64)
        .sum::<f64>()
        / wanted.len().max(1) as f64;
    let picked_total: usize = picked_bigrams.values().map(HashSet::len).sum();
    let in_gold: usize = picked_bigrams
        .iter()
        .map(|(&doc, picked)| {
            picked
                .iter()
                .filter(|bigram| {
                    wanted
                        .iter()
                        .any(|(d, bigrams)| *d == Some(doc) && bigrams.contains(*bigram))
                })
                .count()
        })
        .sum();
    Scores {
        recall,
        precision: if picked_total == 0 {
            0.0
        } else {
            in_gold as f64 / picked_total as f64
        },
        tokens: tokens_of(picked_edus(picks).iter(), docs),
    }
}

/// Scores `picks` (disjoint EDU runs) against `gold`. A gold sentence
/// without EDUs (nothing to retrieve) counts as not covered.
pub fn score(gold: &[GoldSentence], picks: &[Unit], docs: &[Document]) -> Scores {
    let picked = picked_edus(picks);
    let gold_edus: HashSet<(usize, u32)> = gold.iter().flatten().copied().collect();
    let covered = gold
        .iter()
        .filter(|sentence| !sentence.is_empty() && sentence.iter().all(|e| picked.contains(e)))
        .count();
    let tokens = tokens_of(picked.iter(), docs);
    let in_gold = tokens_of(picked.intersection(&gold_edus), docs);
    Scores {
        recall: if gold.is_empty() {
            0.0
        } else {
            covered as f64 / gold.len() as f64
        },
        precision: if tokens == 0 {
            0.0
        } else {
            in_gold as f64 / tokens as f64
        },
        tokens,
    }
}

/// One method's result on one question at one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// Data set name.
    pub dataset: String,
    /// Question id.
    pub question: String,
    /// Method name.
    pub method: String,
    /// Whether the method is an edudb query (not a flat baseline).
    pub structured: bool,
    /// Token budget.
    pub budget: u64,
    /// Evidence recall.
    pub recall: f64,
    /// Precision.
    pub precision: f64,
    /// Tokens used.
    pub tokens: u64,
    /// Retrieval time in milliseconds (ranking and selection).
    pub latency_ms: f64,
}

/// A mean with its 95% bootstrap interval (percentile method).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Sample mean.
    pub mean: f64,
    /// 2.5th percentile of the resampled means.
    pub low: f64,
    /// 97.5th percentile of the resampled means.
    pub high: f64,
}

/// One method × budget × data set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Data set name.
    pub dataset: String,
    /// Method name.
    pub method: String,
    /// Whether the method is an edudb query.
    pub structured: bool,
    /// Token budget.
    pub budget: u64,
    /// Questions scored.
    pub questions: usize,
    /// Evidence recall.
    pub recall: Estimate,
    /// Precision.
    pub precision: Estimate,
    /// Tokens used.
    pub tokens: Estimate,
    /// Latency in milliseconds.
    pub latency_ms: Estimate,
}

/// A structured method against the best flat baseline (by mean recall) of
/// the same data set and budget: the paired difference in recall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Data set name.
    pub dataset: String,
    /// Token budget.
    pub budget: u64,
    /// The structured method.
    pub method: String,
    /// The best flat baseline.
    pub baseline: String,
    /// Recall of `method` minus recall of `baseline`, per question.
    pub recall_difference: Estimate,
}

/// Everything an evaluation reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Resamples behind each interval.
    pub resamples: usize,
    /// Cells, by data set, budget and method (in the order methods ran).
    pub cells: Vec<Cell>,
    /// One per structured method, data set and budget.
    pub comparisons: Vec<Comparison>,
}

/// Resampled means of several paired series at once (the same resampled
/// questions for each): one [`Estimate`] per series.
fn bootstrap(series: &[Vec<f64>], resamples: usize, rng: &mut StdRng) -> Vec<Estimate> {
    let n = series.first().map_or(0, Vec::len);
    let mean = |values: &[f64]| {
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        }
    };
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); series.len()];
    if n > 0 {
        let mut sums = vec![0.0; series.len()];
        for _ in 0..resamples {
            sums.iter_mut().for_each(|s| *s = 0.0);
            for _ in 0..n {
                let pick = rng.random_range(0..n);
                for (sum, values) in sums.iter_mut().zip(series) {
                    *sum += values[pick];
                }
            }
            for (m, sum) in means.iter_mut().zip(&sums) {
                m.push(sum / n as f64);
            }
        }
    }
    series
        .iter()
        .zip(means)
        .map(|(values, mut resampled)| {
            resampled.sort_by(f64::total_cmp);
            let at = |q: f64| -> f64 {
                if resampled.is_empty() {
                    mean(values)
                } else {
                    let i = ((resampled.len() - 1) as f64 * q).round() as usize;
                    resampled[i]
                }
            };
            Estimate {
                mean: mean(values),
                low: at(0.025),
                high: at(0.975),
            }
        })
        .collect()
}

/// One method's observations at one data set and budget.
struct MethodRun<'a> {
    method: &'a str,
    structured: bool,
    observations: Vec<&'a Observation>,
}

impl MethodRun<'_> {
    fn mean_recall(&self) -> f64 {
        self.observations.iter().map(|o| o.recall).sum::<f64>()
            / self.observations.len().max(1) as f64
    }
}

/// Summarises observations with `resamples` bootstrap resamples from a
/// generator seeded with `seed` (the same seed gives the same intervals).
pub fn summarise(observations: &[Observation], resamples: usize, seed: u64) -> Summary {
    let mut rng = StdRng::seed_from_u64(seed);
    // (dataset, budget) → methods in first-seen order.
    let mut by_key: BTreeMap<(&str, u64), Vec<MethodRun<'_>>> = BTreeMap::new();
    let mut dataset_order: Vec<&str> = Vec::new();
    for o in observations {
        if !dataset_order.contains(&o.dataset.as_str()) {
            dataset_order.push(&o.dataset);
        }
        let runs = by_key.entry((&o.dataset, o.budget)).or_default();
        match runs.iter_mut().find(|run| run.method == o.method) {
            Some(run) => run.observations.push(o),
            None => runs.push(MethodRun {
                method: &o.method,
                structured: o.structured,
                observations: vec![o],
            }),
        }
    }
    let mut keys: Vec<&(&str, u64)> = by_key.keys().collect();
    keys.sort_by_key(|(d, b)| (dataset_order.iter().position(|x| x == d), *b));
    let mut cells = Vec::new();
    let mut comparisons = Vec::new();
    for key in keys {
        let &(dataset, budget) = key;
        let runs = &by_key[key];
        for run in runs {
            let column =
                |f: fn(&Observation) -> f64| run.observations.iter().map(|o| f(o)).collect();
            let estimates = bootstrap(
                &[
                    column(|o| o.recall),
                    column(|o| o.precision),
                    column(|o| o.tokens as f64),
                    column(|o| o.latency_ms),
                ],
                resamples,
                &mut rng,
            );
            cells.push(Cell {
                dataset: dataset.to_owned(),
                method: run.method.to_owned(),
                structured: run.structured,
                budget,
                questions: run.observations.len(),
                recall: estimates[0],
                precision: estimates[1],
                tokens: estimates[2],
                latency_ms: estimates[3],
            });
        }
        let Some(best) = runs
            .iter()
            .filter(|run| !run.structured)
            .max_by(|a, b| a.mean_recall().total_cmp(&b.mean_recall()))
        else {
            continue;
        };
        let best_recall: BTreeMap<&str, f64> = best
            .observations
            .iter()
            .map(|o| (o.question.as_str(), o.recall))
            .collect();
        for run in runs.iter().filter(|run| run.structured) {
            let differences: Vec<f64> = run
                .observations
                .iter()
                .filter_map(|o| Some(o.recall - best_recall.get(o.question.as_str())?))
                .collect();
            comparisons.push(Comparison {
                dataset: dataset.to_owned(),
                budget,
                method: run.method.to_owned(),
                baseline: best.method.to_owned(),
                recall_difference: bootstrap(&[differences], resamples, &mut rng)[0],
            });
        }
    }
    Summary {
        resamples,
        cells,
        comparisons,
    }
}
