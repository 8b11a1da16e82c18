//! The commands on documents: `init`, `ingest`, `docs`, `tree`, `dag`,
//! `show` and `rm` (`meta` has a module of its own).

use std::io::Write;
use std::path::PathBuf;

use edudb::ingest::sources::Origin;
use edudb::serve::Api;
use edudb::{CancelToken, Error, IngestOptions, ShardSet};
use serde_json::json;

use super::args::IngestArgs;
use super::bars;
use super::context::Context;
use super::failure::{EXIT_USER, Failure};
use super::render;
use super::route;

/// `init`: creates the store.
pub(super) fn init(
    context: &Context,
    out: &mut dyn Write,
    shards: Option<u16>,
) -> Result<(), Failure> {
    let Some(count) = shards else {
        let db = context.open(true)?;
        if context.cli.json {
            render::json(out, &json!({ "path": db.path() }))?;
        } else {
            writeln!(out, "store ready at {}", db.path().display())?;
        }
        return Ok(());
    };
    let set = ShardSet::create(
        &context.cli.db,
        usize::from(count),
        &context.open_options(true)?,
    )?;
    if context.cli.json {
        render::json(out, &json!({ "path": set.path(), "shards": count }))?;
    } else {
        writeln!(
            out,
            "shard set of {count} stores ready at {}",
            set.path().display()
        )?;
    }
    Ok(())
}

/// `ingest`: stores the documents read from `args.paths`; exit code 1
/// when some of them were refused for their content.
pub(super) fn ingest(
    context: &Context,
    out: &mut dyn Write,
    errors: &mut dyn Write,
    args: &IngestArgs,
) -> Result<u8, Failure> {
    let cli = context.cli;
    let (mut sources, skipped) =
        edudb::ingest::sources::expand_listing_skipped(&args.paths, args.id.as_deref())?;
    if let route::Stdin::Forwarded(_) = context.stdin {
        for source in &mut sources {
            if source.origin == Origin::Stdin {
                source.origin = Origin::Bytes(context.stdin.read()?);
            }
        }
    }
    let metadata = super::meta_values::given(&args.meta, args.meta_json.as_deref())?;
    let options = IngestOptions {
        format: args.format,
        lossy: args.lossy,
        structurer: args.structurer,
        ip_maker: args.ip_maker,
        metadata,
    };
    let progress = bars::Bars::new(cli.quiet || cli.json);
    if let Some(set) = context.shard_set()? {
        let report = set.ingest(&sources, options, &progress, &CancelToken::new())?;
        render::ingest_report(out, errors, &report, &skipped, cli.json)?;
        if args.vectors {
            for shard in set.shards() {
                shard.build_vectors(&progress, &CancelToken::new())?;
            }
        }
        return Ok(if report.failures.is_empty() {
            0
        } else {
            EXIT_USER
        });
    }
    let db = context.open(true)?;
    let report = match db.ingest(&sources, options, &progress, &CancelToken::new()) {
        Ok(report) => report,
        Err(err) => {
            if cli.json {
                render::unfinished_ingest(out, &err)?;
            }
            return Err(Failure::Db(err));
        }
    };
    render::ingest_report(out, errors, &report, &skipped, cli.json)?;
    if args.vectors {
        db.build_vectors(&progress, &CancelToken::new())?;
    }
    Ok(if report.failures.is_empty() {
        0
    } else {
        EXIT_USER
    })
}

/// `docs`: lists the documents (those meeting `condition`, when given).
pub(super) fn docs(
    context: &Context,
    out: &mut dyn Write,
    condition: Option<&str>,
) -> Result<(), Failure> {
    if let Some(set) = context.shard_set()? {
        if context.cli.json {
            let mut rows = Vec::new();
            for shard in set.shards() {
                if let serde_json::Value::Array(part) = Api::documents(shard, condition)? {
                    rows.extend(part);
                }
            }
            rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
            return Ok(render::json(out, &serde_json::Value::Array(rows))?);
        }
        let documents = match condition {
            Some(condition) => set.documents_where(condition)?,
            None => set.documents()?,
        };
        return Ok(render::documents(out, &documents)?);
    }
    let db = context.open(false)?;
    if context.cli.json {
        return Ok(render::json(out, &Api::documents(&*db, condition)?)?);
    }
    let documents = match condition {
        Some(condition) => db.documents_where(condition)?,
        None => db.documents()?,
    };
    Ok(render::documents(out, &documents)?)
}

/// `tree`: a document's structural tree, to `depth`.
pub(super) fn tree(
    context: &Context,
    out: &mut dyn Write,
    doc: &str,
    depth: Option<u16>,
) -> Result<(), Failure> {
    let tree = context.open_holding(doc)?.tree(doc)?;
    Ok(render::tree(out, &tree, depth, context.cli.json)?)
}

/// `dag`: a document's DAG (its `level` only, when given), as text, JSON
/// or Graphviz (`dot`), re-weighted first from `attention` when given.
pub(super) fn dag(
    context: &Context,
    out: &mut dyn Write,
    doc: &str,
    level: Option<u16>,
    dot: bool,
    attention: Option<&PathBuf>,
) -> Result<(), Failure> {
    let db = context.open_holding(doc)?;
    if let Some(path) = attention {
        db.reweight_dag(
            doc,
            &edudb::ingest::dag::supplied::SuppliedAttention::read(path)?,
        )?;
    }
    let listing = db.dag_listing(doc, level)?;
    if dot {
        render::dag_dot(out, &listing)?;
    } else if context.cli.json {
        render::json(out, &serde_json::to_value(&listing).unwrap_or_default())?;
    } else {
        render::dag(out, &listing)?;
    }
    Ok(())
}

/// `show`: a document's EDUs with their coordinates, all of them or those
/// of an EDU `range` or a `page` range (`A..B` or `A`).
pub(super) fn show(
    context: &Context,
    out: &mut dyn Write,
    doc: &str,
    range: Option<&str>,
    page: Option<&str>,
) -> Result<(), Failure> {
    let range = range.map(|r| parse_range(r, "EDU range")).transpose()?;
    let pages = page.map(|p| parse_range(p, "page range")).transpose()?;
    let db = context.open_holding(doc)?;
    let mut edus = db.edus(doc, range)?;
    if let Some((first, last)) = pages {
        let Some(layout) = db.pages(doc)? else {
            return Err(Failure::Db(Error::Usage(format!(
                "{doc} has no pages: --page is for documents read from a PDF"
            ))));
        };
        let count = layout.pages.len() as u32;
        if first == 0 || first > last {
            return Err(Failure::Db(Error::Usage(format!(
                "bad page range {first}..{last}: pages are numbered from 1, first to last"
            ))));
        }
        if first > count {
            let noun = if count == 1 { "page" } else { "pages" };
            return Err(Failure::Db(Error::Usage(format!(
                "{doc} has {count} {noun}: --page {first} is past its last"
            ))));
        }
        edus.retain(|e| e.pages.is_some_and(|[a, b]| a <= last && first <= b));
    }
    Ok(render::edus(out, &edus, context.cli.json)?)
}

/// `rm`: removes `docs`.
pub(super) fn rm(context: &Context, out: &mut dyn Write, docs: &[String]) -> Result<(), Failure> {
    match context.shard_set()? {
        Some(set) => remove_each(context, out, docs, &|doc| set.remove(doc)),
        None => {
            let db = context.open(false)?;
            remove_each(context, out, docs, &|doc| db.remove(doc))
        }
    }
}

/// Removes each of `docs` with `remove`, saying so.
fn remove_each(
    context: &Context,
    out: &mut dyn Write,
    docs: &[String],
    remove: &dyn Fn(&str) -> edudb::Result<()>,
) -> Result<(), Failure> {
    for doc in docs {
        remove(doc)?;
        if !context.cli.json {
            writeln!(out, "removed {doc}")?;
        }
    }
    if context.cli.json {
        render::json(out, &json!({ "removed": docs }))?;
    }
    Ok(())
}

/// Parses `A..B` (inclusive) or `A` into an EDU range.
fn parse_range(text: &str, what: &str) -> edudb::Result<(u32, u32)> {
    let bad = || {
        Error::Usage(format!(
            "bad {what} {text:?}; expected A..B (inclusive) or A, e.g. 3..7"
        ))
    };
    let number = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    match text.split_once("..") {
        Some((a, b)) => Ok((number(a)?, number(b.strip_prefix('=').unwrap_or(b))?)),
        None => number(text).map(|a| (a, a)),
    }
}
