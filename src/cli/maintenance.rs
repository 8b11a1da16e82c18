//! The commands on the store (or shard set) as a whole: `stats`,
//! `reindex`, `salvage`, `backup`, `vacuum` and `check`. Each that finds
//! damage exits with the internal code.

use std::io::Write;
use std::path::Path;

use edudb::serve::Client;
use edudb::{CancelToken, Damaged, Db, ShardSet, VacuumReport};
use serde_json::json;

use super::bars;
use super::context::Context;
use super::failure::{EXIT_INTERNAL, Failure};
use super::{render, route};

/// `stats`: the store's counts and sizes.
pub(super) fn stats(context: &Context, out: &mut dyn Write) -> Result<(), Failure> {
    let stats = context.target()?.stats()?;
    Ok(render::stats(out, &stats, context.cli.json)?)
}

/// `reindex`: rebuilds the full-text index and the vector graph from the
/// store, skipping damaged documents (named).
pub(super) fn reindex(context: &Context, out: &mut dyn Write) -> Result<u8, Failure> {
    let cli = context.cli;
    let db = context.target()?;
    let skipped = db.reindex(&bars::Bars::new(cli.quiet || cli.json), &CancelToken::new())?;
    let entries = db.stats()?.fulltext_entries;
    let vectors = db.vector_counts()?;
    if cli.json {
        render::json(
            out,
            &json!({ "fulltext_entries": entries, "vectors": vectors, "skipped": skipped }),
        )?;
    } else {
        writeln!(
            out,
            "indexes rebuilt: {entries} full-text entries, {} node and {} EDU vectors in the graph (heading EDUs are not indexed: their section's vector carries the title)",
            vectors.nodes, vectors.edus
        )?;
        list_damaged(out, "skipped damaged ", &skipped)?;
    }
    Ok(exit_for(&skipped))
}

/// `salvage`: copies every document and session that still reads into a
/// new store at `to`.
pub(super) fn salvage(context: &Context, out: &mut dyn Write, to: &Path) -> Result<u8, Failure> {
    let cli = context.cli;
    let bars = bars::Bars::new(cli.quiet || cli.json);
    let cancel = CancelToken::new();
    // A served store is open; one that is not is first read from its data
    // log, before its engine can cut it short.
    let report = match context.served {
        Some(_) => context.open(false)?.salvage(to, &bars, &cancel)?,
        None if ShardSet::is_shard_set(&cli.db) => return Err(context.one_store_only().into()),
        None => Db::salvage_store(&cli.db, to, &context.open_options(false)?, &bars, &cancel)?,
    };
    if cli.json {
        render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
    } else {
        if let Some(log) = &report.from_log {
            writeln!(
                out,
                "its data log is damaged, or its engine could not open it, so it was read page by page: {} pages, {} records, {} damaged stretches left out (a document removed or replaced just before the damage may be back in its earlier form)",
                log.pages, log.records, log.damaged
            )?;
            if log.format_assumed {
                writeln!(
                    out,
                    "the store's format record did not read, so its records were read in this version's format (one that does not decode in it is left out)"
                )?;
            }
            if log.embedder_named {
                writeln!(
                    out,
                    "the store's embedder record did not read; the copy records the embedder named here"
                )?;
            }
        }
        writeln!(
            out,
            "salvaged into {}: {} documents and {} sessions, {} left out",
            to.display(),
            report.documents,
            report.sessions,
            report.skipped.len()
        )?;
        list_damaged(out, "left out ", &report.skipped)?;
    }
    Ok(exit_for(&report.skipped))
}

/// `backup DEST`: a consistent copy of the store (the served one when a
/// server runs), with what it holds; exit 2 when something did not read
/// whole and was left out of it.
pub(super) fn backup(context: &Context, out: &mut dyn Write, dest: &Path) -> Result<u8, Failure> {
    let cli = context.cli;
    let bars = bars::Bars::new(cli.quiet || cli.json);
    let report = context.target()?.backup(dest, &bars, &CancelToken::new())?;
    if cli.json {
        render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
    } else {
        writeln!(
            out,
            "backed up to {}: {} documents and {} sessions as of change {} ({:.1} MB, {:.2} s; writers waited {:.2} s)",
            report.path.display(),
            report.documents,
            report.sessions,
            report.change,
            report.bytes as f64 / 1e6,
            report.seconds,
            report.writers_held_seconds
        )?;
        list_damaged(out, "left out ", &report.skipped)?;
    }
    Ok(exit_for(&report.skipped))
}

/// `vacuum`: the store rewritten compactly, with its size before and
/// after; by its server when one runs (every other request waits for it),
/// else here with the store closed.
pub(super) fn vacuum(context: &Context, out: &mut dyn Write) -> Result<(), Failure> {
    let cli = context.cli;
    let report: VacuumReport = match route::Server::find(&cli.db) {
        Some(server) => {
            let answer = Client::connect(&server.store().to_string_lossy(), None)?.vacuum()?;
            serde_json::from_value(answer)
                .map_err(|e| edudb::Error::Serve(format!("the server's vacuum report: {e}")))?
        }
        None => {
            let bars = bars::Bars::new(cli.quiet || cli.json);
            let cancel = CancelToken::new();
            if ShardSet::is_shard_set(&cli.db) {
                context
                    .open_served(false)?
                    .vacuum_reopened(&bars, &cancel)
                    .0?
            } else {
                Db::vacuum(&cli.db, &context.open_options(false)?, &bars, &cancel)?
            }
        }
    };
    if cli.json {
        render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
    } else {
        writeln!(
            out,
            "vacuumed {}: {:.1} MB → {:.1} MB ({} documents, {} sessions; {:.1} s)",
            cli.db.display(),
            report.bytes_before as f64 / 1e6,
            report.bytes_after as f64 / 1e6,
            report.documents,
            report.sessions,
            report.seconds
        )?;
    }
    Ok(())
}

/// `check`: validates every record and index, naming the damage found.
pub(super) fn check(context: &Context, out: &mut dyn Write) -> Result<u8, Failure> {
    let report = context.target()?.check()?;
    if context.cli.json {
        render::json(out, &serde_json::to_value(&report).unwrap_or_default())?;
    } else if !report.damaged.is_empty() {
        writeln!(
            out,
            "damaged: {} of {} documents (the rest are valid)",
            report.damaged.len(),
            report.documents
        )?;
        list_damaged(out, "", &report.damaged)?;
    } else {
        writeln!(
            out,
            "ok: {} documents valid, {} full-text entries, {} node and {} EDU vectors stored",
            report.documents, report.fulltext_entries, report.vectors.nodes, report.vectors.edus
        )?;
        if report.vector_graph_change < report.last_change {
            writeln!(
                out,
                "vector graph at change {} of {}: searches score the stored vectors exactly until it catches up, in the background of a process that searches on (or now with `edudb reindex`)",
                report.vector_graph_change, report.last_change
            )?;
        }
    }
    Ok(exit_for(&report.damaged))
}

/// One indented line per damaged document: `label`, its id and the problem.
fn list_damaged(out: &mut dyn Write, label: &str, damaged: &[Damaged]) -> std::io::Result<()> {
    for damaged in damaged {
        writeln!(out, "  {label}{}: {}", damaged.doc, damaged.problem)?;
    }
    Ok(())
}

/// A maintenance command's exit code: internal failure (2) when it found
/// damage, success otherwise.
fn exit_for(damaged: &[Damaged]) -> u8 {
    if damaged.is_empty() { 0 } else { EXIT_INTERNAL }
}
