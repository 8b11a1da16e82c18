//! Text and JSON rendering of command results.

use edudb::query::Output;
use edudb::{
    DocMeta, EduText, IngestReport, QueryResult, Rows, SearchHit, Selection, Stage, Stats, Tree,
};
use serde_json::{Value, json};

use super::print_json;

/// Megabytes (10^6 bytes), for human-readable sizes.
fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Prints the summary of an ingest run; failures go to stderr.
pub fn ingest_report(report: &IngestReport, as_json: bool) {
    let seconds = report.elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        megabytes(report.bytes()) / seconds
    } else {
        0.0
    };
    if as_json {
        let failures: Vec<Value> = report
            .failures
            .iter()
            .map(|f| json!({ "source": f.source, "error": f.error.to_string() }))
            .collect();
        print_json(&json!({
            "documents": report.documents.len(),
            "edus": report.edus(),
            "nodes": report.nodes(),
            "tokens": report.tokens(),
            "bytes": report.bytes(),
            "seconds": seconds,
            "mb_per_s": rate,
            "failures": failures,
        }));
        return;
    }
    for failure in &report.failures {
        eprintln!("error: {}", failure.error);
    }
    println!(
        "ingested {} documents: {} EDUs, {} nodes, {} tokens, {:.2} MB in {:.2} s ({:.2} MB/s){}",
        report.documents.len(),
        report.edus(),
        report.nodes(),
        report.tokens(),
        megabytes(report.bytes()),
        seconds,
        rate,
        if report.failures.is_empty() {
            String::new()
        } else {
            format!("; {} failed", report.failures.len())
        }
    );
}

/// Lists documents.
pub fn documents(docs: &[DocMeta], as_json: bool) {
    if as_json {
        let rows: Vec<Value> = docs.iter().map(DocMeta::to_json).collect();
        print_json(&Value::Array(rows));
        return;
    }
    let width = docs
        .iter()
        .map(|d| d.id.chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    println!(
        "{:width$}  {:>7}  {:>6}  {:>8}  {:>9}  TITLE",
        "ID", "EDUS", "NODES", "TOKENS", "BYTES"
    );
    for d in docs {
        println!(
            "{:width$}  {:>7}  {:>6}  {:>8}  {:>9}  {}",
            d.id, d.edus, d.nodes, d.tokens, d.bytes, d.title
        );
    }
}

/// Draws a tree with box characters, or prints it as nested JSON.
pub fn tree(tree: &Tree, depth: Option<u16>, as_json: bool) {
    let max_level = depth.unwrap_or(u16::MAX);
    if as_json {
        print_json(&tree.to_json(depth));
        return;
    }
    let mut stack: Vec<(u32, String, Option<bool>)> = vec![(0, String::new(), None)];
    while let Some((id, prefix, last)) = stack.pop() {
        let node = &tree.nodes[id as usize];
        let branch = match last {
            None => "",
            Some(true) => "└── ",
            Some(false) => "├── ",
        };
        println!(
            "{prefix}{branch}{} {} {}",
            node.span,
            node.kind.name(),
            node.title
        );
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
}

/// Prints EDUs with their coordinates.
pub fn edus(edus: &[EduText], as_json: bool) {
    if as_json {
        print_json(&serde_json::to_value(edus).unwrap_or_default());
        return;
    }
    for edu in edus {
        println!(
            "[{}] {}..{} ({} tok) {}",
            edu.id, edu.bytes[0], edu.bytes[1], edu.tokens, edu.text
        );
    }
}

/// Prints search hits, best first.
pub fn hits(hits: &[SearchHit], as_json: bool) {
    if as_json {
        let rows: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({
                    "doc": h.doc, "node": h.node, "edus": [h.edus.first, h.edus.last],
                    "bytes": h.bytes, "score": h.score, "text": h.text,
                })
            })
            .collect();
        print_json(&Value::Array(rows));
        return;
    }
    if hits.is_empty() {
        println!("no matches");
    }
    for hit in hits {
        let what = hit
            .node
            .map_or_else(|| "edu".to_owned(), |n| format!("section {n}"));
        println!(
            "{:7.3}  {} {} {}  {}",
            hit.score,
            hit.doc,
            hit.edus,
            what,
            one_line(&hit.text, 160)
        );
    }
}

/// Prints store totals.
pub fn stats(stats: &Stats, as_json: bool) {
    if as_json {
        print_json(&serde_json::to_value(stats).unwrap_or_default());
        return;
    }
    println!("documents        {}", stats.documents);
    println!("EDUs             {}", stats.edus);
    println!("nodes            {}", stats.nodes);
    println!("tokens           {} ({})", stats.tokens, stats.tokenizer);
    println!("text             {:.2} MB", megabytes(stats.text_bytes));
    println!("on disk (store)  {:.2} MB", megabytes(stats.store_bytes));
    println!("full-text        {} entries", stats.fulltext_entries);
    println!("last change      {}", stats.last_change);
    println!("format version   {}", stats.format_version);
}

/// `text` on one line, cut to at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// Prints a statement's result: its rows, the plan under EXPLAIN, and a
/// summary line.
pub fn query_result(result: &QueryResult, as_json: bool) {
    if as_json || result.output == Output::Json {
        print_json(&result.to_json());
        return;
    }
    if result.explain {
        plan(&result.stages);
    }
    match &result.rows {
        Rows::Selection(selection) => self::selection(selection, result.output),
        Rows::Docs(docs) => documents(docs, false),
        Rows::Tree(t, depth) => tree(t, *depth, false),
        Rows::Edus(e) => edus(e, false),
        Rows::Stats(s) => stats(s, false),
    }
}

/// Prints the EXPLAIN table: one row per operator.
pub fn plan(stages: &[Stage]) {
    println!(
        "{:<10} {:>8} {:>8} {:>9}  {:<6} DETAIL",
        "OPERATOR", "ROWS IN", "ROWS OUT", "TIME MS", "DEVICE"
    );
    for stage in stages {
        println!(
            "{:<10} {:>8} {:>8} {:>9.3}  {:<6} {}",
            stage.operator,
            stage.rows_in,
            stage.rows_out,
            stage.elapsed.as_secs_f64() * 1000.0,
            stage.device,
            stage.detail
        );
    }
    println!();
}

/// Prints picked items with their coordinates; text unless SPANS or NODES.
fn selection(selection: &Selection, output: Output) {
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
        println!(
            "── {} [{}-{}] {what}  bytes {}..{}  {} tok  score {:.3}",
            item.doc,
            item.edus[0],
            item.edus[1],
            item.bytes[0],
            item.bytes[1],
            item.tokens,
            item.score
        );
        if output == Output::Text {
            println!("{}", item.text.trim_end());
        }
    }
    let budget = selection
        .budget
        .map_or_else(String::new, |b| format!(" of a {b}-token budget"));
    println!(
        "({} items, {} tokens{budget})",
        selection.items.len(),
        selection.tokens_used
    );
}
