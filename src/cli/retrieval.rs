//! The commands that retrieve: `search`, `query`, `ask` and `highlight`.

use std::io::Write;

use edudb::{AskOptions, CancelToken, Params};

use super::args::{AskArgs, HighlightArgs};
use super::bars;
use super::context::Context;
use super::failure::Failure;
use super::highlight;
use super::render::{self, OutputFormat};

/// `search`: full-text search, the best `limit` hits.
pub(super) fn search(
    context: &Context,
    out: &mut dyn Write,
    query: &str,
    limit: u32,
) -> Result<(), Failure> {
    let hits = context.target()?.search(query, limit as usize)?;
    Ok(render::hits(out, &hits, context.cli.json)?)
}

/// `query`: runs one statement with `params` bound, as text or JSON.
pub(super) fn query(
    context: &Context,
    out: &mut dyn Write,
    statement: &str,
    format: OutputFormat,
    params: &[(String, String)],
) -> Result<(), Failure> {
    let params = bind_params(params);
    let result = context.target()?.query(statement, &params)?;
    let as_json = context.cli.json || format == OutputFormat::Json;
    Ok(render::query_result(out, &result, as_json)?)
}

/// `ask`: answers a question with the chat model from retrieved evidence.
pub(super) fn ask(context: &Context, out: &mut dyn Write, args: &AskArgs) -> Result<(), Failure> {
    let cli = context.cli;
    let db = context.target()?;
    let options = AskOptions {
        budget: args.budget,
        statement: args.statement.clone(),
        group: args.group,
        answer: !args.no_answer,
    };
    let progress = bars::Bars::new(cli.quiet || cli.json);
    let result = db.ask(&args.question, &options, &progress, &CancelToken::new())?;
    Ok(render::ask(out, &result, args.explain, cli.json)?)
}

/// `highlight`: writes a copy of a document's PDF with what the question
/// retrieves highlighted.
pub(super) fn highlight(
    context: &Context,
    out: &mut dyn Write,
    args: &HighlightArgs,
) -> Result<(), Failure> {
    let params = Params::new()
        .text("doc", &args.doc)
        .text("question", &args.question)
        .number("budget", args.budget as f64);
    let target = context.target()?;
    let picked = target.query(&args.statement, &params)?;
    let db = target.holding(&args.doc);
    let written = highlight::write(db, &args.doc, &picked, &args.pdf, &args.output)?;
    if context.cli.json {
        render::json(out, &serde_json::to_value(&written).unwrap_or_default())?;
    } else {
        writeln!(
            out,
            "{} spans highlighted on pages {:?} in {}",
            written.spans,
            written.pages,
            args.output.display()
        )?;
    }
    Ok(())
}

/// Parameters from `--param` pairs: numbers as numbers, a JSON array of
/// numbers (`[0.1, -0.3, ...]`) as a vector, the rest as text.
pub fn bind_params(pairs: &[(String, String)]) -> Params {
    pairs.iter().fold(Params::new(), |params, (name, value)| {
        if let Ok(number) = value.parse::<f64>()
            && number.is_finite()
        {
            return params.number(name, number);
        }
        match serde_json::from_str::<Vec<f32>>(value) {
            Ok(vector) if value.trim_start().starts_with('[') => params.vector(name, vector),
            _ => params.text(name, value),
        }
    })
}
