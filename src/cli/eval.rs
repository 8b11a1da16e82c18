//! `edudb eval`: convert data sets, run the retrieval evaluation and print
//! its table (or JSON, or an SVG plot), and score structure recovery.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use edudb::error::io_error;
use edudb::eval::convert::{self, Setting};
use edudb::eval::memory;
use edudb::eval::score::{Cell, Summary};
use edudb::eval::structure::{self, Recovery};
use edudb::eval::{self, Dataset, EvalOptions, Method, MethodKind};
use edudb::{CancelToken, Error};
use serde_json::json;

use super::bars::Bars;
use super::failure::Failure;
use super::render;

/// What `edudb eval` does.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Convert HotpotQA, MuSiQue or FinanceBench as published to the
    /// evaluation JSONL.
    Convert {
        /// Which layout the input has.
        #[arg(value_enum)]
        kind: DatasetKind,
        /// The questions file (JSON; FinanceBench: JSONL).
        questions: PathBuf,
        /// The corpus file (JSON); needed for `--setting shared`.
        #[arg(long)]
        corpus: Option<PathBuf>,
        /// FinanceBench: the directory of the filings (`<doc_name>.pdf`);
        /// default `pdfs` beside the questions file.
        #[arg(long)]
        pdfs: Option<PathBuf>,
        /// One store per question (FinanceBench: per filing), or one shared
        /// store over the corpus.
        #[arg(long, value_enum, default_value_t = SettingArg::PerQuestion)]
        setting: SettingArg,
        /// Where to write the JSONL; default standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Evaluate retrieval on JSONL data sets: edudb query templates against
    /// the flat baselines at each budget.
    Run {
        /// Data sets (JSONL); each file's stem names it in the report.
        #[arg(required = true)]
        datasets: Vec<PathBuf>,
        /// Token budgets, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = eval::DEFAULT_BUDGETS)]
        budgets: Vec<u64>,
        /// An edudb method as NAME=STATEMENT using $question and $budget;
        /// repeatable; replaces the default templates.
        #[arg(long = "query", value_parser = parse_method)]
        queries: Vec<(String, String)>,
        /// Leave out the flat baselines.
        #[arg(long)]
        no_baselines: bool,
        /// Bootstrap resamples per interval.
        #[arg(long, default_value_t = eval::DEFAULT_RESAMPLES)]
        resamples: usize,
        /// Seed of the bootstrap's generator.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Also write a plot of recall against budget (SVG) here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also write every per-question observation (JSONL) here.
        #[arg(long)]
        observations: Option<PathBuf>,
        /// Keep the stores in this directory and reuse them on the next run
        /// (a store built with a local model takes many minutes); default: a
        /// temporary directory.
        #[arg(long, value_name = "DIR")]
        stores: Option<PathBuf>,
    },
    /// Evaluate agent memory on LoCoMo conversations (JSON): each is loaded
    /// as one session, and every question's evidence recall is scored per
    /// category for session contexts (with and without the question as
    /// query), session queries, recency and flat BM25 over turns.
    Memory {
        /// LoCoMo conversation files.
        #[arg(required = true)]
        conversations: Vec<PathBuf>,
        /// Token budgets, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [256u64, 512, 1024])]
        budgets: Vec<u64>,
        /// Bootstrap resamples per interval.
        #[arg(long, default_value_t = eval::DEFAULT_RESAMPLES)]
        resamples: usize,
        /// Seed of the bootstrap's generator.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Keep the stores in this directory and reuse them on the next run
        /// (a store built with a local model takes minutes); default: a
        /// temporary directory.
        #[arg(long, value_name = "DIR")]
        stores: Option<PathBuf>,
    },
    /// Strip the headings of Markdown files, rebuild each tree from the text
    /// alone, and score it against the heading tree; with `--rendered`,
    /// rebuild it from each file rendered to PDF instead.
    Structure {
        /// Markdown files or directories of them.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// A directory holding each Markdown file rendered to PDF, named by
        /// its document id (`0001-x.md` → `DIR/0001-x.pdf`;
        /// `benches/pdf/render-rfcs.sh` makes them); a file without its
        /// PDF is skipped and counted.
        #[arg(long, value_name = "DIR")]
        rendered: Option<PathBuf>,
    },
}

/// A published data set layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DatasetKind {
    /// HotpotQA (`context`, `supporting_facts`).
    Hotpotqa,
    /// MuSiQue (`paragraphs` with `is_supporting`).
    Musique,
    /// FinanceBench (`financebench_id`, `doc_name`, `evidence` with pages;
    /// the filings as PDFs).
    Financebench,
}

/// The store setting of a conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SettingArg {
    /// One store per question.
    PerQuestion,
    /// One store over the whole corpus.
    Shared,
}

fn parse_method(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(name, statement)| (name.trim().to_owned(), statement.to_owned()))
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("expected NAME=STATEMENT, got {text:?}"))
}

/// Runs one `edudb eval` command.
pub fn run(
    out: &mut dyn Write,
    command: &EvalCommand,
    embedder: Option<edudb::compute::embed::EmbedderConfig>,
    as_json: bool,
    quiet: bool,
) -> Result<(), Failure> {
    match command {
        EvalCommand::Convert {
            kind,
            questions,
            corpus,
            pdfs,
            setting,
            output,
        } => {
            let setting = match setting {
                SettingArg::PerQuestion => Setting::PerQuestion,
                SettingArg::Shared => Setting::Shared,
            };
            let records = match kind {
                DatasetKind::Hotpotqa => convert::hotpotqa(questions, corpus.as_deref(), setting)?,
                DatasetKind::Musique => convert::musique(questions, corpus.as_deref(), setting)?,
                DatasetKind::Financebench => {
                    let pdfs = pdfs.clone().unwrap_or_else(|| {
                        questions.parent().unwrap_or(Path::new(".")).join("pdfs")
                    });
                    convert::financebench(questions, &pdfs, setting)?
                }
            };
            match output {
                Some(path) => {
                    let mut file = std::io::BufWriter::new(
                        std::fs::File::create(path).map_err(io_error(path))?,
                    );
                    eval::dataset::write_jsonl(&records, &mut file)
                        .and_then(|()| file.flush())
                        .map_err(io_error(path))?;
                    // Read back: what was written must load as a data set.
                    let dataset = Dataset::load(path)?;
                    writeln!(
                        out,
                        "{}: {} documents, {} questions",
                        path.display(),
                        dataset.documents.len(),
                        dataset.questions.len()
                    )?;
                }
                None => eval::dataset::write_jsonl(&records, out)?,
            }
        }
        EvalCommand::Run {
            datasets,
            budgets,
            queries,
            no_baselines,
            resamples,
            seed,
            svg,
            observations,
            stores,
        } => {
            let loaded = datasets
                .iter()
                .map(|path| Dataset::load(path))
                .collect::<edudb::Result<Vec<_>>>()?;
            let embedder = embedder.unwrap_or_default();
            let mut all = Vec::new();
            for dataset in &loaded {
                let defaults = eval::default_methods_for(dataset);
                let mut methods: Vec<Method> = if queries.is_empty() {
                    defaults
                        .iter()
                        .filter(|m| matches!(m.kind, MethodKind::Query(_)))
                        .cloned()
                        .collect()
                } else {
                    queries
                        .iter()
                        .map(|(name, statement)| Method::query(name, statement))
                        .collect()
                };
                if !no_baselines {
                    methods.extend(
                        defaults
                            .into_iter()
                            .filter(|m| matches!(m.kind, MethodKind::Flat(_))),
                    );
                }
                let options = EvalOptions {
                    methods,
                    budgets: budgets.clone(),
                    embedder: embedder.clone(),
                    stores: stores.clone(),
                };
                let bars = Bars::new(quiet || as_json);
                all.extend(eval::evaluate(
                    dataset,
                    &options,
                    &bars,
                    &CancelToken::new(),
                )?);
            }
            if let Some(path) = observations {
                let mut file =
                    std::io::BufWriter::new(std::fs::File::create(path).map_err(io_error(path))?);
                for observation in &all {
                    serde_json::to_writer(&mut file, observation)
                        .map_err(std::io::Error::from)
                        .and_then(|()| file.write_all(b"\n"))
                        .map_err(io_error(path))?;
                }
                file.flush().map_err(io_error(path))?;
            }
            let summary = eval::summarise(&all, *resamples, *seed);
            if let Some(path) = svg {
                plot(&summary, path)?;
            }
            if as_json {
                render::json(out, &serde_json::to_value(&summary).unwrap_or_default())?;
            } else {
                table(out, &summary)?;
            }
        }
        EvalCommand::Memory {
            conversations,
            budgets,
            resamples,
            seed,
            stores,
        } => {
            let loaded = conversations
                .iter()
                .map(|path| memory::load_locomo(path))
                .collect::<edudb::Result<Vec<_>>>()?;
            let options = edudb::OpenOptions {
                embedder: embedder.clone(),
                ..Default::default()
            };
            let bars = Bars::new(quiet || as_json);
            let (observations, times) = memory::evaluate_memory(
                &loaded,
                budgets,
                &options,
                stores.as_deref(),
                &bars,
                &CancelToken::new(),
            )?;
            let summary = eval::summarise(&observations, *resamples, *seed);
            if as_json {
                render::json(out, &json!({ "summary": summary, "loading": times }))?;
            } else {
                for (conversation, loaded) in loaded.iter().zip(&times.conversations) {
                    let how = loaded.seconds.map_or_else(
                        || "already in the kept store".to_owned(),
                        |seconds| format!("loaded in {seconds:.2} s"),
                    );
                    writeln!(
                        out,
                        "{}: {} turns {how} ({} topics, {} branches; {} dated sessions), {} questions ({} evidence ids name no turn)",
                        conversation.name,
                        loaded.turns,
                        loaded.topics,
                        loaded.branches,
                        loaded.dated_sessions,
                        conversation.questions.len(),
                        conversation.unknown_evidence
                    )?;
                }
                writeln!(out)?;
                table(out, &summary)?;
            }
        }
        EvalCommand::Structure { paths, rendered } => {
            let sources = edudb::ingest::sources::expand(paths, None)?;
            let mut scores: Vec<Recovery> = Vec::new();
            let mut unrendered = 0usize;
            let bars = Bars::new(quiet || as_json);
            edudb::Progress::start(&bars, "structure", sources.len() as u64);
            for source in &sources {
                let edudb::ingest::sources::Origin::File(path) = &source.origin else {
                    continue;
                };
                let bytes = std::fs::read(path).map_err(io_error(path))?;
                let text = edudb::ingest::decode(&source.name(), bytes, false)?;
                match rendered {
                    None => scores.push(structure::recover(&source.id, text)?),
                    Some(dir) => {
                        let pdf = dir.join(format!("{}.pdf", source.id));
                        match std::fs::read(&pdf) {
                            Ok(pdf) => {
                                scores.push(structure::recover_rendered(&source.id, text, pdf)?);
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => unrendered += 1,
                            Err(e) => return Err(io_error(&pdf)(e).into()),
                        }
                    }
                }
                edudb::Progress::advance(&bars, 1, &source.id);
            }
            edudb::Progress::finish(&bars);
            let summary = structure::summarise_recovery(&scores);
            if as_json {
                render::json(
                    out,
                    &json!({ "summary": summary, "documents": scores, "unrendered": unrendered }),
                )?;
            } else {
                writeln!(out, "documents            {}", summary.documents)?;
                if unrendered > 0 {
                    writeln!(out, "without a PDF        {unrendered} (skipped)")?;
                }
                writeln!(out, "exact match          {:.3}", summary.exact_match_rate)?;
                writeln!(out, "shape match          {:.3}", summary.shape_match_rate)?;
                writeln!(
                    out,
                    "tree edit distance   {:.2} (mean; {:.3} of the larger outline)",
                    summary.mean_distance, summary.mean_normalised_distance
                )?;
                writeln!(
                    out,
                    "shape edit distance  {:.2} (mean)",
                    summary.mean_shape_distance
                )?;
                writeln!(
                    out,
                    "heading recall       {:.3} (mean)",
                    summary.mean_heading_recall
                )?;
            }
        }
    }
    Ok(())
}

/// Budgets in the summary, ascending.
fn budgets_of(cells: &[&Cell]) -> Vec<u64> {
    cells
        .iter()
        .map(|c| c.budget)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Methods in the order they ran.
fn methods_of<'a>(cells: &[&'a Cell]) -> Vec<&'a str> {
    let mut methods: Vec<&str> = Vec::new();
    for cell in cells {
        if !methods.contains(&cell.method.as_str()) {
            methods.push(&cell.method);
        }
    }
    methods
}

/// Datasets in report order.
fn datasets_of(summary: &Summary) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for cell in &summary.cells {
        if !names.contains(&cell.dataset.as_str()) {
            names.push(&cell.dataset);
        }
    }
    names
}

/// The readable report: per data set, recall and precision (means with
/// 95% intervals), then tokens and latency, then the comparisons.
fn table(out: &mut dyn Write, summary: &Summary) -> std::io::Result<()> {
    for dataset in datasets_of(summary) {
        let cells: Vec<&Cell> = summary
            .cells
            .iter()
            .filter(|c| c.dataset == dataset)
            .collect();
        let budgets = budgets_of(&cells);
        let methods = methods_of(&cells);
        let questions = cells.first().map_or(0, |c| c.questions);
        let width = methods.iter().map(|m| m.len()).max().unwrap_or(6).max(6);
        writeln!(
            out,
            "{dataset} ({questions} questions; mean [95% bootstrap interval])"
        )?;
        type Column = fn(&Cell) -> String;
        let sections: [(&str, Column); 3] = [
            ("evidence recall", |c| {
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    c.recall.mean, c.recall.low, c.recall.high
                )
            }),
            ("precision", |c| {
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    c.precision.mean, c.precision.low, c.precision.high
                )
            }),
            ("tokens used / latency ms", |c| {
                format!("{:.0} / {:.2}", c.tokens.mean, c.latency_ms.mean)
            }),
        ];
        for (title, column) in sections {
            write!(out, "  {title:<width$}", width = width)?;
            for budget in &budgets {
                write!(out, " | {:^22}", format!("{budget} tokens"))?;
            }
            writeln!(out)?;
            for method in &methods {
                write!(out, "  {method:<width$}")?;
                for budget in &budgets {
                    let cell = cells
                        .iter()
                        .find(|c| c.method == *method && c.budget == *budget);
                    write!(
                        out,
                        " | {:^22}",
                        cell.map_or_else(String::new, |c| column(c))
                    )?;
                }
                writeln!(out)?;
            }
            writeln!(out)?;
        }
        for comparison in summary.comparisons.iter().filter(|c| c.dataset == dataset) {
            let d = comparison.recall_difference;
            writeln!(
                out,
                "  {} − {} at {} tokens: recall {:+.3} [{:+.3}, {:+.3}]",
                comparison.method, comparison.baseline, comparison.budget, d.mean, d.low, d.high
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Recall against budget, one panel per data set, one line per method.
fn plot(summary: &Summary, path: &Path) -> edudb::Result<()> {
    use plotters::prelude::*;
    let failed = |e: &dyn std::fmt::Display| Error::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    };
    let datasets = datasets_of(summary);
    let panels = datasets.len().max(1);
    let root = SVGBackend::new(path, (520 * panels as u32, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    for (area, dataset) in root.split_evenly((1, panels)).iter().zip(&datasets) {
        let cells: Vec<&Cell> = summary
            .cells
            .iter()
            .filter(|c| c.dataset == *dataset)
            .collect();
        let budgets = budgets_of(&cells);
        let (low, high) = (
            *budgets.first().unwrap_or(&1) as f64,
            *budgets.last().unwrap_or(&2) as f64,
        );
        let mut chart = ChartBuilder::on(area)
            .caption(*dataset, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d((low..high.max(low + 1.0)).log_scale(), 0.0..1.0)
            .map_err(|e| failed(&e))?;
        chart
            .configure_mesh()
            .x_desc("budget (tokens)")
            .y_desc("evidence recall")
            .x_labels(budgets.len())
            .draw()
            .map_err(|e| failed(&e))?;
        for (i, method) in methods_of(&cells).into_iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| c.method == method)
                .map(|c| (c.budget as f64, c.recall.mean))
                .collect();
            let width = if cells.iter().any(|c| c.method == method && c.structured) {
                3
            } else {
                1
            };
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(width)))
                .map_err(|e| failed(&e))?
                .label(method)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| failed(&e))?;
    }
    root.present().map_err(|e| failed(&e))
}
