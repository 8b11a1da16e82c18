//! Text and JSON rendering of command results. Every function writes to
//! the stream it is given, so a closed pipe is an error the caller handles
//! rather than a panic. Styles are written unconditionally; the stream
//! (`anstream`) strips them when colour is off (NO_COLOR, not a terminal).

use std::io::{self, Write};

use anstyle::{AnsiColor, Style};
use edudb::memory::{DecidedBy, SummaryText};
use edudb::model::dag::DagListing;
use edudb::query::Output;
use edudb::{
    AskResult, ContextKind, DocMeta, EduText, Error, IngestReport, LlmCost, QueryResult, Rows,
    SearchHit, Selection, SessionContext, SessionMeta, SessionView, Stage, Stats, Stopped, Tree,
    TurnReceipt,
};
use serde_json::{Value, json};

/// How `query` prints results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// The JSON contract.
    Json,
}

/// Column headings and item headers.
const HEADING: Style = Style::new().bold();
/// Coordinates: EDU spans and byte ranges.
const COORDINATES: Style = AnsiColor::Cyan.on_default();
/// Secondary details: scores, token counts, summaries.
const DETAIL: Style = Style::new().dimmed();
/// The `error:` label.
const ERROR: Style = AnsiColor::Red.on_default().bold();

/// Megabytes (10^6 bytes), for human-readable sizes.
fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// A rate of text read, in the unit that shows its figures: MB/s, or
/// KB/s below a tenth of a megabyte a second (a model-backed ingest, where
/// "0.00 MB/s" said nothing).
fn text_rate(megabytes_per_second: f64) -> String {
    if megabytes_per_second >= 0.1 || megabytes_per_second == 0.0 {
        format!("{megabytes_per_second:.2} MB/s")
    } else {
        format!("{:.1} KB/s", megabytes_per_second * 1e3)
    }
}

/// Writes a JSON value, pretty-printed, and a newline.
pub fn json(out: &mut dyn Write, value: &Value) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// Writes `error: message` with the label styled.
pub fn error(out: &mut dyn Write, message: &dyn std::fmt::Display) -> io::Result<()> {
    writeln!(out, "{ERROR}error:{ERROR:#} {message}")
}

/// Says where `edudb serve` listens, as soon as it does (flushed, so a
/// script reading the first line can connect).
pub fn serving(out: &mut dyn Write, bound: &edudb::serve::Bound, as_json: bool) -> io::Result<()> {
    let socket = bound.socket.as_ref().map(|s| s.display().to_string());
    if as_json {
        serde_json::to_writer(
            &mut *out,
            &json!({"listen": bound.address.to_string(), "socket": socket}),
        )?;
        writeln!(out)?;
    } else {
        write!(out, "serving on http://{}", bound.address)?;
        if let Some(socket) = socket {
            write!(out, " and unix:{socket}")?;
        }
        writeln!(out, " (stop with Ctrl-C or SIGTERM)")?;
    }
    out.flush()
}

/// Writes an indented `hint: message` line under an error.
pub fn hint(out: &mut dyn Write, message: &str) -> io::Result<()> {
    writeln!(out, "  hint: {message}")
}

/// Writes, for `--json`, which documents an ingest that failed part-way
/// ([`Error::PartlyIngested`]) stored and which it did not, so a caller can
/// resume; nothing for any other error (the error itself goes to standard
/// error).
pub fn unfinished_ingest(out: &mut dyn Write, err: &Error) -> io::Result<()> {
    let Error::PartlyIngested {
        cause,
        stored,
        not_stored,
    } = err
    else {
        return Ok(());
    };
    json(
        out,
        &json!({"stored": stored, "not_stored": not_stored, "error": cause.to_string()}),
    )
}

/// Writes the summary of an ingest run; failures go to `errors`.
pub fn ingest_report(
    out: &mut dyn Write,
    errors: &mut dyn Write,
    report: &IngestReport,
    skipped: &[std::path::PathBuf],
    as_json: bool,
) -> io::Result<()> {
    let known: Vec<&str> = (edudb::ingest::sources::EXTENSIONS.iter())
        .map(|(name, _)| *name)
        .collect();
    let skip_reason = format!("not a known extension ({})", known.join(", "));
    let seconds = report.elapsed.as_secs_f64();
    let (rate, tokens_per_second) = if seconds > 0.0 {
        (
            megabytes(report.bytes()) / seconds,
            report.tokens() as f64 / seconds,
        )
    } else {
        (0.0, 0.0)
    };
    if as_json {
        let failures: Vec<Value> = report
            .failures
            .iter()
            .map(|f| json!({ "source": f.source, "error": f.error.to_string() }))
            .collect();
        return json(
            out,
            &json!({
                "documents": report.documents.len(),
                "edus": report.edus(),
                "nodes": report.nodes(),
                "tokens": report.tokens(),
                "bytes": report.bytes(),
                "seconds": seconds,
                "mb_per_s": rate,
                "failures": failures,
                "llm": report.llm,
                "skipped": skipped
                    .iter()
                    .map(|p| json!({ "path": p.display().to_string(), "reason": skip_reason }))
                    .collect::<Vec<_>>(),
            }),
        );
    }
    for failure in &report.failures {
        error(errors, &failure.error)?;
        if matches!(failure.error, Error::InvalidUtf8 { .. }) {
            hint(errors, "pass --lossy to replace invalid bytes")?;
        }
    }
    writeln!(
        out,
        "ingested {} documents: {} EDUs, {} nodes, {} tokens, {:.2} MB in {:.2} s ({}, {:.0} tokens/s){}",
        report.documents.len(),
        report.edus(),
        report.nodes(),
        report.tokens(),
        megabytes(report.bytes()),
        seconds,
        text_rate(rate),
        tokens_per_second,
        if report.failures.is_empty() {
            String::new()
        } else {
            format!("; {} failed", report.failures.len())
        }
    )?;
    if !report.llm.is_zero() {
        writeln!(
            out,
            "language model: {} (a fallback: a document given the layout tree)",
            llm_cost(&report.llm)
        )?;
    }
    if !skipped.is_empty() {
        let files = if skipped.len() == 1 { "file" } else { "files" };
        writeln!(out, "skipped {} {files}, {skip_reason}:", skipped.len())?;
        for path in skipped {
            writeln!(out, "  {}", path.display())?;
        }
    }
    Ok(())
}

/// What language-model work cost, in one line.
fn llm_cost(cost: &LlmCost) -> String {
    format!(
        "{} calls, {} prompt and {} completion tokens, {:.2} s, {} {}",
        cost.calls,
        cost.prompt_tokens,
        cost.completion_tokens,
        cost.millis as f64 / 1000.0,
        cost.fallbacks,
        if cost.fallbacks == 1 {
            "fallback"
        } else {
            "fallbacks"
        }
    ) + &match cost.dropped_points {
        0 => String::new(),
        1 => ", 1 written point dropped".into(),
        n => format!(", {n} written points dropped"),
    }
}

/// An answer with its citations; with `explain`, every reading step.
pub fn ask(
    out: &mut dyn Write,
    result: &AskResult,
    explain: bool,
    as_json: bool,
) -> io::Result<()> {
    if as_json {
        return json(out, &result.to_json());
    }
    let coordinates = |n: usize| {
        let item = &result.evidence[n - 1];
        format!(
            "[{n}] {} EDUs [{}-{}] bytes {}..{}",
            item.doc, item.edus[0], item.edus[1], item.bytes[0], item.bytes[1]
        )
    };
    if explain {
        writeln!(out, "evidence: {}", result.statement)?;
        for step in &result.steps {
            let cost = &step.cost;
            writeln!(
                out,
                "step: shown {:?}, useful {:?}, enough {} ({}; {} prompt + {} completion tokens, {} ms)",
                step.shown,
                step.relevant,
                step.enough,
                step.judged_by,
                cost.prompt_tokens,
                cost.completion_tokens,
                cost.millis
            )?;
            for &n in &step.shown {
                writeln!(
                    out,
                    "  {}: {}",
                    coordinates(n),
                    result.evidence[n - 1]
                        .text
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                )?;
            }
        }
    }
    let stopped = match result.stopped {
        Stopped::Enough => "the model judged the evidence enough",
        Stopped::Budget => "every retrieved item was read",
        Stopped::Nothing => "nothing was retrieved",
    };
    writeln!(out, "read {} items: {stopped}", result.evidence.len())?;
    match &result.answer {
        Some(answer) => writeln!(out, "answer: {answer}")?,
        None => writeln!(out, "no answer")?,
    }
    for &n in &result.citations {
        writeln!(out, "  {}", coordinates(n))?;
    }
    writeln!(out, "language model: {}", llm_cost(&result.cost))
}

/// Lists documents as a table (`--json` lists them through the API).
pub fn documents(out: &mut dyn Write, docs: &[DocMeta]) -> io::Result<()> {
    let width = docs
        .iter()
        .map(|d| d.id.chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    writeln!(
        out,
        "{HEADING}{:width$}  {:>7}  {:>6}  {:>8}  {:>9}  TITLE{HEADING:#}",
        "ID", "EDUS", "NODES", "TOKENS", "BYTES"
    )?;
    for d in docs {
        writeln!(
            out,
            "{:width$}  {:>7}  {:>6}  {:>8}  {:>9}  {}",
            d.id, d.edus, d.nodes, d.tokens, d.bytes, d.title
        )?;
    }
    Ok(())
}

/// Draws a tree with box characters, or writes it as nested JSON.
pub fn tree(out: &mut dyn Write, tree: &Tree, depth: Option<u16>, as_json: bool) -> io::Result<()> {
    let max_level = depth.unwrap_or(u16::MAX);
    if as_json {
        return json(out, &tree.to_json(depth));
    }
    let mut stack: Vec<(u32, String, Option<bool>)> = vec![(0, String::new(), None)];
    while let Some((id, prefix, last)) = stack.pop() {
        let node = &tree.nodes[id as usize];
        let branch = match last {
            None => "",
            Some(true) => "└── ",
            Some(false) => "├── ",
        };
        writeln!(
            out,
            "{prefix}{branch}{COORDINATES}{}{COORDINATES:#} {DETAIL}{}{DETAIL:#} {}",
            node.span,
            node.kind.name(),
            node.title
        )?;
        if node.level >= max_level {
            continue;
        }
        let child_prefix = match last {
            None => String::new(),
            Some(true) => format!("{prefix}    "),
            Some(false) => format!("{prefix}│   "),
        };
        for (index, &child) in node.children.iter().enumerate().rev() {
            stack.push((
                child,
                child_prefix.clone(),
                Some(index + 1 == node.children.len()),
            ));
        }
    }
    Ok(())
}

/// Writes EDUs with their coordinates.
pub fn edus(out: &mut dyn Write, edus: &[EduText], as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(edus).unwrap_or_default());
    }
    for edu in edus {
        writeln!(
            out,
            "{COORDINATES}[{}] {}..{}{}{COORDINATES:#} {DETAIL}({} tok){DETAIL:#} {}",
            edu.id,
            edu.bytes[0],
            edu.bytes[1],
            pages(edu.pages),
            edu.tokens,
            edu.text
        )?;
    }
    Ok(())
}

/// ` p.3` or ` pp.3-4` for a PDF's span (1-based pages), else nothing.
fn pages(pages: Option<[u32; 2]>) -> String {
    match pages {
        Some([first, last]) if first == last => format!(" p.{first}"),
        Some([first, last]) => format!(" pp.{first}-{last}"),
        None => String::new(),
    }
}

/// Writes search hits, best first.
pub fn hits(out: &mut dyn Write, hits: &[SearchHit], as_json: bool) -> io::Result<()> {
    if as_json {
        let rows: Vec<Value> = hits.iter().map(SearchHit::to_json).collect();
        return json(out, &Value::Array(rows));
    }
    if hits.is_empty() {
        writeln!(out, "no matches")?;
    }
    for hit in hits {
        let what = hit
            .node
            .map_or_else(|| "edu".to_owned(), |n| format!("section {n}"));
        writeln!(
            out,
            "{DETAIL}{:7.3}{DETAIL:#}  {} {COORDINATES}{}{COORDINATES:#} {what}  {}",
            hit.score,
            hit.doc,
            hit.edus,
            one_line(&hit.text, 160)
        )?;
    }
    Ok(())
}

/// Writes store totals.
pub fn stats(out: &mut dyn Write, stats: &Stats, as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(stats).unwrap_or_default());
    }
    let rows = [
        ("documents", stats.documents.to_string()),
        (
            "sessions",
            format!("{} ({} turns)", stats.sessions, stats.turns),
        ),
        ("EDUs", stats.edus.to_string()),
        ("nodes", stats.nodes.to_string()),
        ("tokens", format!("{} ({})", stats.tokens, stats.tokenizer)),
        ("text", format!("{:.2} MB", megabytes(stats.text_bytes))),
        (
            "on disk (store)",
            format!("{:.2} MB", megabytes(stats.store_bytes)),
        ),
        ("full-text", format!("{} entries", stats.fulltext_entries)),
        ("last change", stats.last_change.to_string()),
        ("format version", stats.format_version.to_string()),
        ("language model", llm_cost(&stats.llm)),
    ];
    for (name, value) in rows {
        writeln!(out, "{HEADING}{name:<16}{HEADING:#} {value}")?;
    }
    Ok(())
}

/// `text` on one line, cut to at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// Writes a statement's result: its rows, the plan under EXPLAIN, and a
/// summary line.
pub fn query_result(out: &mut dyn Write, result: &QueryResult, as_json: bool) -> io::Result<()> {
    if as_json || result.output == Output::Json {
        return json(out, &result.to_json());
    }
    if result.explain {
        plan(out, &result.stages)?;
    }
    match &result.rows {
        Rows::Selection(picked) => selection(out, picked, result.output),
        Rows::Docs(docs) => documents(out, docs),
        Rows::Tree(t, depth) => tree(out, t, *depth, false),
        Rows::Edus(e) => edus(out, e, false),
        Rows::Stats(s) => stats(out, s, false),
        Rows::Dag(listing) => dag(out, listing),
        Rows::Sessions(list) => sessions(out, list, false),
        Rows::Session(view) => session(out, view, false),
    }
}

/// Lists sessions.
pub fn sessions(out: &mut dyn Write, list: &[SessionMeta], as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(list).unwrap_or_default());
    }
    let width = list
        .iter()
        .map(|s| s.id.chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    writeln!(
        out,
        "{HEADING}{:width$}  {:>6}  {:>6}  {:>8}  {:>8}  {:>7}{HEADING:#}",
        "ID", "TURNS", "TOPICS", "BRANCHES", "TOKENS", "CURRENT"
    )?;
    for s in list {
        writeln!(
            out,
            "{:width$}  {:>6}  {:>6}  {:>8}  {:>8}  {:>7}",
            s.id, s.turns, s.topics, s.branches, s.tokens, s.current
        )?;
    }
    Ok(())
}

/// Summary picks on one line: `text` of each, joined with ` … `.
fn summary_line(picks: &[SummaryText], max: usize) -> String {
    let joined: Vec<String> = picks.iter().map(|p| one_line(&p.text, max)).collect();
    joined.join(" … ")
}

/// Draws a session's dialogue tree (topics, branches, turns with role,
/// summary span and text; the current turn marked), or writes it as JSON.
pub fn session(out: &mut dyn Write, view: &SessionView, as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(view).unwrap_or_default());
    }
    writeln!(
        out,
        "{HEADING}session {}{HEADING:#} {DETAIL}({} turns, {} topics, {} tokens; current turn {}){DETAIL:#}",
        view.id,
        view.turns,
        view.topics.len(),
        view.tokens,
        view.current
    )?;
    let mark = |last: bool| if last { "└── " } else { "├── " };
    let indent = |last: bool| if last { "    " } else { "│   " };
    for (t, topic) in view.topics.iter().enumerate() {
        let last_topic = t + 1 == view.topics.len();
        writeln!(
            out,
            "{}{HEADING}topic {}{HEADING:#}{} {DETAIL}{}{DETAIL:#}",
            mark(last_topic),
            topic.id,
            if topic.active { " (active)" } else { "" },
            summary_line(&topic.summary, 60)
        )?;
        let prefix = indent(last_topic);
        for (b, branch) in topic.branches.iter().enumerate() {
            let last_branch = b + 1 == topic.branches.len();
            let fork = branch
                .fork
                .map_or_else(String::new, |f| format!(" forks at #{f}"));
            writeln!(
                out,
                "{prefix}{}{HEADING}branch {}{HEADING:#}{fork}{} {DETAIL}{}{DETAIL:#}",
                mark(last_branch),
                branch.id,
                if branch.active { " (active)" } else { "" },
                summary_line(&branch.summary, 60)
            )?;
            let prefix = format!("{prefix}{}", indent(last_branch));
            for (n, turn) in branch.turns.iter().enumerate() {
                let said = match &turn.summary {
                    Some(summary) => format!(
                        "{COORDINATES}[{}-{}] {}..{}{COORDINATES:#} {}",
                        summary.edus[0],
                        summary.edus[1],
                        summary.bytes[0],
                        summary.bytes[1],
                        one_line(&summary.text, 80),
                    ),
                    None => "(forgotten)".to_owned(),
                };
                writeln!(
                    out,
                    "{prefix}{}#{} {}{} {said}{}",
                    mark(n + 1 == branch.turns.len()),
                    turn.number,
                    turn.role,
                    turn.at.map_or_else(String::new, |at| format!(
                        " {}",
                        edudb::model::time::format(at)
                    )),
                    if turn.current { "  ◀ current" } else { "" }
                )?;
            }
        }
    }
    Ok(())
}

/// Writes where an appended turn went and why.
pub fn receipt(out: &mut dyn Write, receipt: &TurnReceipt, as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(receipt).unwrap_or_default());
    }
    let d = &receipt.decision;
    let parent = receipt
        .parent
        .map_or_else(|| "none".to_owned(), |p| format!("#{p}"));
    writeln!(
        out,
        "turn {} ({}) → topic {}, branch {}, parent {parent}  {DETAIL}{} EDUs, {} tok{DETAIL:#}",
        receipt.turn, receipt.role, receipt.topic, receipt.branch, receipt.edus, receipt.tokens
    )?;
    let similarity = |s: Option<f32>| s.map_or_else(|| "-".to_owned(), |s| format!("{s:.3}"));
    let pair =
        |p: Option<(u32, f32)>| p.map_or_else(|| "-".to_owned(), |(i, s)| format!("{i} ({s:.3})"));
    writeln!(
        out,
        "decision: topic {}, branch {} {DETAIL}(asked {}{}; active topic {}, best other topic {}, most similar turn {}, leaf {}){DETAIL:#}",
        serde_json::to_value(d.topic)
            .unwrap_or_default()
            .as_str()
            .unwrap_or("?"),
        serde_json::to_value(d.branch)
            .unwrap_or_default()
            .as_str()
            .unwrap_or("?"),
        d.requested,
        match d.decided_by {
            DecidedBy::Rule => String::new(),
            DecidedBy::Model => format!(", decided by the model ({})", llm_cost(&d.llm)),
            DecidedBy::Fallback => format!(
                ", decided by the rules: the model's answers were refused ({})",
                llm_cost(&d.llm)
            ),
        },
        similarity(d.active_topic_similarity),
        pair(d.best_other_topic),
        pair(d.fork_candidate),
        similarity(d.leaf_similarity),
    )
}

/// Writes what `session add --jsonl` appended: a line for the whole
/// batch (every receipt with `--json`).
pub fn receipts(out: &mut dyn Write, receipts: &[TurnReceipt], as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(receipts).unwrap_or_default());
    }
    let (Some(first), Some(last)) = (receipts.first(), receipts.last()) else {
        return Ok(());
    };
    let topics: std::collections::BTreeSet<u32> = receipts.iter().map(|r| r.topic).collect();
    writeln!(
        out,
        "appended {} turns to session {} (turns {}-{}, in {} topics) {DETAIL}{} tok{DETAIL:#}",
        receipts.len(),
        first.session,
        first.turn,
        last.turn,
        topics.len(),
        receipts.iter().map(|r| r.tokens).sum::<u64>()
    )
}

/// Writes the context for a session's next turn.
pub fn context(out: &mut dyn Write, context: &SessionContext, as_json: bool) -> io::Result<()> {
    if as_json {
        return json(out, &serde_json::to_value(context).unwrap_or_default());
    }
    for item in &context.items {
        let what = match item.kind {
            ContextKind::PathTurn => format!("turn #{} {}", item.turn, item.role),
            ContextKind::RelevantTurn => format!(
                "turn #{} {} (relevance {:.2})",
                item.turn,
                item.role,
                item.score.unwrap_or(0.0)
            ),
            ContextKind::RelevantExcerpt => format!(
                "from turn #{} {} (relevance {:.2})",
                item.turn,
                item.role,
                item.score.unwrap_or(0.0)
            ),
            ContextKind::BranchSummary => {
                format!("branch {} summary (turn #{})", item.branch, item.turn)
            }
            ContextKind::TopicSummary => {
                format!("topic {} summary (turn #{})", item.topic, item.turn)
            }
        };
        let when = item.at.map_or_else(String::new, |at| {
            format!(" {}", edudb::model::time::format(at))
        });
        writeln!(
            out,
            "{HEADING}──{HEADING:#} {what}{when} {COORDINATES}{} [{}-{}] bytes {}..{}{COORDINATES:#} {DETAIL}{} tok{DETAIL:#}",
            item.doc, item.edus[0], item.edus[1], item.bytes[0], item.bytes[1], item.tokens
        )?;
        writeln!(out, "{}", item.text.trim_end())?;
    }
    writeln!(
        out,
        "{DETAIL}({} items, {} of {} tokens; the whole history is {} tokens; {} of {} path turns left out){DETAIL:#}",
        context.items.len(),
        context.tokens_used,
        context.budget,
        context.history_tokens,
        context.path_turns_dropped,
        context.path_turns
    )
}

/// Strongest out-edges shown per node in a DAG listing.
const EDGES_SHOWN: usize = 3;

/// Writes a DAG listing: one line per node (id, level, EDU span, text)
/// and its strongest out-edges.
pub fn dag(out: &mut dyn Write, listing: &DagListing) -> io::Result<()> {
    for node in &listing.nodes {
        writeln!(
            out,
            "{HEADING}#{}{HEADING:#} {DETAIL}L{}{DETAIL:#} {COORDINATES}[{}-{}]{COORDINATES:#} {}",
            node.id,
            node.level,
            node.edus[0],
            node.edus[1],
            one_line(&node.text, 100)
        )?;
        let strongest: Vec<String> = listing
            .edges
            .iter()
            .filter(|e| e.from == node.id)
            .take(EDGES_SHOWN)
            .map(|e| format!("#{} {:.3}", e.to, e.weight))
            .collect();
        if !strongest.is_empty() {
            writeln!(out, "    {DETAIL}→ {}{DETAIL:#}", strongest.join(", "))?;
        }
    }
    let level = listing
        .level
        .map_or_else(|| "all levels".to_owned(), |l| format!("level {l}"));
    writeln!(
        out,
        "{DETAIL}({} nodes at {level} of {}, top level {}, {} edges){DETAIL:#}",
        listing.nodes.len(),
        listing.doc,
        listing.top_level,
        listing.edges.len()
    )
}

/// Writes a DAG listing as a Graphviz digraph: nodes labelled with level,
/// span and the start of their text, edges with their weights (pen width
/// growing with weight), one rank per level.
pub fn dag_dot(out: &mut dyn Write, listing: &DagListing) -> io::Result<()> {
    let quote = |text: &str| text.replace('\\', "\\\\").replace('"', "\\\"");
    writeln!(out, "digraph \"{}\" {{", quote(&listing.doc))?;
    writeln!(out, "  rankdir=TB; node [shape=box, fontsize=10];")?;
    for level in (1..=listing.top_level).rev() {
        let ids: Vec<String> = listing
            .nodes
            .iter()
            .filter(|n| n.level == level)
            .map(|n| format!("n{}", n.id))
            .collect();
        if !ids.is_empty() {
            writeln!(out, "  {{ rank=same; {}; }}", ids.join("; "))?;
        }
    }
    for node in &listing.nodes {
        writeln!(
            out,
            "  n{} [label=\"#{} L{} [{}-{}]\\n{}\"];",
            node.id,
            node.id,
            node.level,
            node.edus[0],
            node.edus[1],
            quote(&one_line(&node.text, 60))
        )?;
    }
    for edge in &listing.edges {
        writeln!(
            out,
            "  n{} -> n{} [label=\"{:.2}\", penwidth={:.2}];",
            edge.from,
            edge.to,
            edge.weight,
            0.5 + 3.0 * edge.weight
        )?;
    }
    writeln!(out, "}}")
}

/// Writes the EXPLAIN table: one row per operator.
pub fn plan(out: &mut dyn Write, stages: &[Stage]) -> io::Result<()> {
    writeln!(
        out,
        "{HEADING}{:<10} {:>8} {:>8} {:>9}  {:<6} DETAIL{HEADING:#}",
        "OPERATOR", "ROWS IN", "ROWS OUT", "TIME MS", "DEVICE"
    )?;
    for stage in stages {
        writeln!(
            out,
            "{:<10} {:>8} {:>8} {:>9.3}  {:<6} {}",
            stage.operator,
            stage.rows_in,
            stage.rows_out,
            stage.elapsed.as_secs_f64() * 1000.0,
            stage.device,
            stage.detail
        )?;
    }
    writeln!(out)
}

/// Writes picked items with their coordinates; text unless SPANS or NODES.
fn selection(out: &mut dyn Write, selection: &Selection, output: Output) -> io::Result<()> {
    for item in &selection.items {
        let what = match (&item.node, &item.title) {
            (Some(node), Some(title)) => format!(
                "{} {node} L{} \"{}\"",
                item.kind,
                item.level,
                one_line(title, 60)
            ),
            _ => format!("edus L{}", item.level),
        };
        writeln!(
            out,
            "{HEADING}──{HEADING:#} {} {COORDINATES}[{}-{}]{COORDINATES:#} {what}  \
             {COORDINATES}bytes {}..{}{}{COORDINATES:#}  {DETAIL}{} tok  score {:.3}{}{DETAIL:#}",
            item.doc,
            item.edus[0],
            item.edus[1],
            item.bytes[0],
            item.bytes[1],
            pages(item.pages),
            item.tokens,
            item.score,
            (item.match_score).map_or_else(String::new, |m| format!(" (match {m:.3})")),
        )?;
        if output == Output::Text {
            writeln!(out, "{}", item.text.trim_end())?;
        }
    }
    let budget = selection
        .budget
        .map_or_else(String::new, |b| format!(" of a {b}-token budget"));
    writeln!(
        out,
        "{DETAIL}({} items, {} tokens{budget}){DETAIL:#}",
        selection.items.len(),
        selection.tokens_used
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_rate_keeps_its_figures_at_model_speeds() {
        assert_eq!(text_rate(12.345), "12.35 MB/s");
        assert_eq!(text_rate(0.1), "0.10 MB/s");
        assert_eq!(text_rate(0.0021), "2.1 KB/s");
        assert_eq!(text_rate(0.0), "0.00 MB/s");
    }
}
