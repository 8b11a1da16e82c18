//! Retrieval-quality evaluation: does a query pick the gold evidence under a
//! token budget, and does it beat flat retrieval at the same budget?
//!
//! A [`Dataset`] (JSONL; converters in [`convert`]) holds documents and
//! questions with gold sentences. [`evaluate`] builds one store per group
//! (per question, or shared) in a temporary directory, runs every
//! [`Method`] at every budget for every question, and returns
//! [`Observation`]s; [`summarise`] turns them into means with bootstrap
//! intervals and paired comparisons. [`structure`] scores how well the
//! tree builder recovers headings from text alone.

pub mod bigrams;
pub mod convert;
pub mod dataset;
pub mod flat;
pub mod memory;
pub mod score;
pub mod structure;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use dataset::Body;
pub use dataset::{Dataset, Record};
pub use flat::Baseline;
pub use score::{Observation, Summary, summarise};

use crate::compute::embed::EmbedderConfig;
use crate::db::Db;
use crate::engine::OpenOptions;
use crate::error::{Error, Result};
use crate::ingest::sources::{Origin, Source};
use crate::model::document::Document;
use crate::model::edu::Span;
use crate::progress::{CancelToken, Progress};
use crate::query::{Params, Query, Rows};
use crate::{Format, IngestOptions};
use flat::{FlatIndex, Unit};

/// Budgets evaluated when none are given.
pub const DEFAULT_BUDGETS: [u64; 4] = [128, 256, 512, 1024];

/// Resamples behind each bootstrap interval by default.
pub const DEFAULT_RESAMPLES: usize = 1000;

/// A retrieval method under evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Method {
    /// Its name in reports.
    pub name: String,
    /// What it runs.
    pub kind: MethodKind,
}

/// What a method runs.
#[derive(Debug, Clone, PartialEq)]
pub enum MethodKind {
    /// A query-language statement using `$question` and `$budget`.
    Query(String),
    /// A flat baseline.
    Flat(Baseline),
}

impl Method {
    /// An edudb query template named `name`.
    pub fn query(name: &str, statement: &str) -> Method {
        Method {
            name: name.to_owned(),
            kind: MethodKind::Query(statement.to_owned()),
        }
    }

    /// A flat baseline, under its own name.
    pub fn baseline(baseline: Baseline) -> Method {
        Method {
            name: baseline.name(),
            kind: MethodKind::Flat(baseline),
        }
    }
}

/// The methods run when none are given: three edudb templates (BM25 seeds
/// with budgeted selection, the same with a top-down traversal, and the
/// same propagated down the weighted DAG) and every flat baseline (chunks
/// of 100, 200 and 300 tokens).
pub fn default_methods() -> Vec<Method> {
    let mut methods = vec![
        Method::query(
            "edudb",
            "SELECT SPANS FROM * SEED BM25($question) BUDGET $budget TOKENS",
        ),
        Method::query(
            "edudb-traverse",
            "SELECT SPANS FROM * SEED BM25($question) TRAVERSE BUDGET $budget TOKENS",
        ),
        Method::query(
            "edudb-propagate",
            "SELECT SPANS FROM * SEED BM25($question) PROPAGATE BUDGET $budget TOKENS",
        ),
    ];
    for size in [100, 200, 300] {
        methods.push(Method::baseline(Baseline::Bm25Chunks(size)));
    }
    for size in [100, 200, 300] {
        methods.push(Method::baseline(Baseline::VectorChunks(size)));
    }
    methods.push(Method::baseline(Baseline::Bm25Edus));
    methods.push(Method::baseline(Baseline::Truncate));
    methods
}

/// The methods run on `dataset` when none are given: [`default_methods`],
/// with BM25 over whole pages too when it holds PDF files.
pub fn default_methods_for(dataset: &Dataset) -> Vec<Method> {
    let mut methods = default_methods();
    let has_pdfs = dataset.documents.iter().any(|d| match &d.body {
        Body::File { format, path } => crate::ingest::pipeline::is_pdf(*format, Some(path), &[]),
        Body::Text { .. } => false,
    });
    if has_pdfs {
        methods.push(Method::baseline(Baseline::Bm25Pages));
    }
    methods
}

/// How to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalOptions {
    /// Methods, in report order.
    pub methods: Vec<Method>,
    /// Token budgets.
    pub budgets: Vec<u64>,
    /// The embedder of the stores built (and of the vector baselines).
    pub embedder: EmbedderConfig,
    /// Where to keep the stores (`DIR/<data set>-<group>/store`), so that a
    /// later run reuses each one that holds exactly its group's documents
    /// (a store built with a local model takes many minutes). A kept store
    /// is used as it was built: after changing how stores are built (edudb
    /// itself, the embedder), use a new directory. `None`: a temporary
    /// directory, removed afterwards.
    pub stores: Option<PathBuf>,
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            methods: default_methods(),
            budgets: DEFAULT_BUDGETS.to_vec(),
            embedder: EmbedderConfig::default(),
            stores: None,
        }
    }
}

/// Checks the options before any work: budgets positive, method names
/// unique, templates parse and use both `$question` and `$budget`.
fn validate(options: &EvalOptions) -> Result<Vec<Option<Query>>> {
    if options.budgets.is_empty() || options.budgets.contains(&0) {
        return Err(Error::Usage(
            "budgets must be positive token counts".to_owned(),
        ));
    }
    let mut names = std::collections::HashSet::new();
    options
        .methods
        .iter()
        .map(|method| {
            if !names.insert(method.name.as_str()) {
                return Err(Error::Usage(format!(
                    "method {:?} is named twice",
                    method.name
                )));
            }
            match &method.kind {
                MethodKind::Query(statement) => {
                    for param in ["$question", "$budget"] {
                        if !statement.contains(param) {
                            return Err(Error::Usage(format!(
                                "query template {:?} does not use {param}: {statement}",
                                method.name
                            )));
                        }
                    }
                    Ok(Some(Query::parse(statement)?))
                }
                MethodKind::Flat(_) => Ok(None),
            }
        })
        .collect()
}

/// Evaluates every method of `options` on every question of `dataset` at
/// every budget. Stores are built in [`EvalOptions::stores`] or a temporary
/// directory removed afterwards. Progress counts questions; cancelling stops between
/// questions with [`Error::Cancelled`].
pub fn evaluate(
    dataset: &Dataset,
    options: &EvalOptions,
    progress: &dyn Progress,
    cancel: &CancelToken,
) -> Result<Vec<Observation>> {
    let prepared = validate(options)?;
    let temporary = tempfile::tempdir().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let work = options.stores.as_deref().unwrap_or(temporary.path());
    progress.start(
        &format!("eval {}", dataset.name),
        dataset.questions.len() as u64,
    );
    let mut observations = Vec::new();
    let outcome = (|| -> Result<()> {
        for (number, group) in dataset.groups().iter().enumerate() {
            let dir = work.join(format!("{}-{number}", dataset.name));
            let run = GroupRun::build(dataset, group, &dir, options)?;
            for question in &group.questions {
                cancel.check()?;
                run.ask(dataset, question, options, &prepared, &mut observations)?;
                progress.advance(1, &question.id);
            }
        }
        Ok(())
    })();
    progress.finish();
    outcome.map(|()| observations)
}

/// Whether `stored` is what ingesting `wanted` gives: the same format and
/// text; for a file, a PDF read from the same bytes (its size and CRC), or
/// other formats stored as the file's text unchanged.
fn holds(stored: &Document, wanted: &dataset::EvalDocument) -> Result<bool> {
    match &wanted.body {
        Body::Text { format, text } => Ok(stored.meta.format == *format && stored.text == *text),
        Body::File { format, path } => {
            if format.is_some_and(|f| f != stored.meta.format) {
                return Ok(false);
            }
            let bytes = std::fs::read(path).map_err(|source| Error::Input {
                path: path.clone(),
                source,
            })?;
            Ok(match &stored.pages {
                Some(pages) => {
                    pages.source_bytes == bytes.len() as u64
                        && pages.source_crc32 == crc32fast::hash(&bytes)
                }
                None => stored.text.as_bytes() == bytes,
            })
        }
    }
}

/// The group's documents as `db` holds them, when it holds exactly them
/// (the same ids and bodies, [`holds`]: a kept store of an earlier run).
fn stored_group(db: &Db, group: &dataset::Group<'_>) -> Result<Option<Vec<Document>>> {
    if db.documents()?.len() != group.documents.len() {
        return Ok(None);
    }
    let mut docs = Vec::with_capacity(group.documents.len());
    for d in &group.documents {
        let stored = match db.document(&d.id) {
            Ok(stored) => stored,
            Err(Error::NoSuchDocument(_)) => return Ok(None),
            Err(err) => return Err(err),
        };
        if !holds(&stored, d)? {
            return Ok(None);
        }
        docs.push(stored);
    }
    Ok(Some(docs))
}

/// `group`'s documents as stored in `db`, loaded first unless it already
/// holds exactly them ([`stored_group`]: a kept store is used as it is,
/// however it was built); before loading, every document it holds is
/// removed.
fn load_group(db: &Db, dataset: &Dataset, group: &dataset::Group<'_>) -> Result<Vec<Document>> {
    if let Some(docs) = stored_group(db, group)? {
        return Ok(docs);
    }
    let kept = db.documents()?;
    for meta in &kept {
        db.remove(&meta.id)?;
    }
    // One ingest per format asked for (`None`: detected from each file).
    let mut by_format: Vec<(Option<Format>, Vec<Source>)> = Vec::new();
    for d in &group.documents {
        let (format, origin) = match &d.body {
            Body::Text { format, text } => {
                (Some(*format), Origin::Bytes(text.clone().into_bytes()))
            }
            Body::File { format, path } => (*format, Origin::File(path.clone())),
        };
        let source = Source {
            id: d.id.clone(),
            origin,
        };
        match by_format.iter_mut().find(|(f, _)| *f == format) {
            Some((_, sources)) => sources.push(source),
            None => by_format.push((format, vec![source])),
        }
    }
    for (format, sources) in by_format {
        let report = db.ingest(
            &sources,
            IngestOptions {
                format,
                ..Default::default()
            },
            &crate::progress::NoProgress,
            &CancelToken::new(),
        )?;
        if let Some(failure) = report.failures.first() {
            return Err(Error::Dataset {
                path: PathBuf::from(&dataset.name),
                line: 0,
                message: format!("document {}: {}", failure.source, failure.error),
            });
        }
    }
    group.documents.iter().map(|d| db.document(&d.id)).collect()
}

/// One group's store and flat indexes.
struct GroupRun {
    db: Db,
    docs: Vec<Document>,
    doc_index: HashMap<String, usize>,
    /// One per method; `None` for query methods.
    flat: Vec<Option<FlatIndex>>,
}

impl GroupRun {
    fn build(
        dataset: &Dataset,
        group: &dataset::Group<'_>,
        dir: &std::path::Path,
        options: &EvalOptions,
    ) -> Result<GroupRun> {
        let db = Db::open_with(
            dir.join("store"),
            &OpenOptions {
                create: true,
                embedder: Some(options.embedder.clone()),
                ..Default::default()
            },
        )?;
        let docs = load_group(&db, dataset, group)?;
        let doc_index = docs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.meta.id.clone(), i))
            .collect();
        let flat = options
            .methods
            .iter()
            .enumerate()
            .map(|(i, method)| match method.kind {
                MethodKind::Flat(baseline) => {
                    // A kept directory may hold an index of another run.
                    let flat = dir.join(format!("flat-{i}"));
                    if flat.exists() {
                        std::fs::remove_dir_all(&flat).map_err(|source| Error::Io {
                            path: flat.clone(),
                            source,
                        })?;
                    }
                    Ok(Some(FlatIndex::build(
                        baseline,
                        &docs,
                        &flat,
                        db.embedder(),
                    )?))
                }
                MethodKind::Query(_) => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GroupRun {
            db,
            docs,
            doc_index,
            flat,
        })
    }

    /// Runs every method at every budget on `question`.
    fn ask(
        &self,
        dataset: &Dataset,
        question: &dataset::EvalQuestion,
        options: &EvalOptions,
        prepared: &[Option<Query>],
        out: &mut Vec<Observation>,
    ) -> Result<()> {
        let doc_index = |id: &str| self.doc_index.get(id).copied();
        let gold = score::gold_sentences(&question.evidence, &self.docs, doc_index);
        let max_budget = options.budgets.iter().copied().max().unwrap_or(0);
        for ((method, query), flat) in options.methods.iter().zip(prepared).zip(&self.flat) {
            let mut observe = |budget: u64, picks: &[Unit], seconds: f64| {
                let scores = if question.passages.is_empty() {
                    score::score(&gold, picks, &self.docs)
                } else {
                    score::score_passages(&question.passages, picks, &self.docs, doc_index)
                };
                out.push(Observation {
                    dataset: dataset.name.clone(),
                    question: question.id.clone(),
                    method: method.name.clone(),
                    structured: query.is_some(),
                    budget,
                    recall: scores.recall,
                    precision: scores.precision,
                    tokens: scores.tokens,
                    latency_ms: seconds * 1000.0,
                });
            };
            if let Some(query) = query {
                for &budget in &options.budgets {
                    let params = Params::new()
                        .text("question", question.question.as_str())
                        .number("budget", budget as f64);
                    let started = Instant::now();
                    let result = self.db.run(query, &params)?;
                    let seconds = started.elapsed().as_secs_f64();
                    observe(budget, &self.picks_of(&method.name, &result.rows)?, seconds);
                }
            } else if let Some(index) = flat {
                let started = Instant::now();
                let limit = usize::try_from(max_budget)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1);
                let ranked =
                    index.rank(&question.question, limit, self.db.embedder(), &self.docs)?;
                let ranking = started.elapsed().as_secs_f64();
                for &budget in &options.budgets {
                    let started = Instant::now();
                    let picks = index.select(&ranked, budget);
                    observe(budget, &picks, ranking + started.elapsed().as_secs_f64());
                }
            }
        }
        Ok(())
    }

    /// The EDU runs a query selected; an error when it was not a SELECT.
    fn picks_of(&self, method: &str, rows: &Rows) -> Result<Vec<Unit>> {
        let Rows::Selection(selection) = rows else {
            return Err(Error::Usage(format!(
                "query template {method:?} is not a SELECT"
            )));
        };
        Ok(selection
            .items
            .iter()
            .filter_map(|item| {
                let doc = *self.doc_index.get(&item.doc)?;
                let span = Span {
                    first: item.edus[0],
                    last: item.edus[1],
                };
                Some(flat::unit_of(&self.docs, doc, span))
            })
            .collect())
    }
}
