//! Running a command line: parsing it, forwarding it to the store's
//! server when one is live, dispatching it to its command, and its exit
//! code.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use edudb::serve::{CommandOutput, CommandRequest, CommandRunner, Served};

use super::args::{Cli, Command};
use super::context::Context;
use super::failure::{self, EXIT_INTERNAL, EXIT_USER, Failure};
use super::{
    bars, demo, documents, eval, maintenance, mcp, metadata, render, retrieval, route, serving,
    session,
};

/// Runs the CLI and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { EXIT_USER } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    // Library warnings show; sled's own log lines (its recovery notes
    // after a crash, routed here through `log`) and the PDF reader's only
    // when RUST_LOG asks: pdf_oxide logs every stream it cannot inflate
    // as an error, hundreds for a filing whose images are damaged though
    // all its text reads, and a page it cannot read is ours to report.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sled=off,pdf_oxide=off".into()),
        )
        .init();
    if cli.command.routable()
        && let Some(code) = route::forward(&cli.db, cli.command.reads_stdin())
    {
        return ExitCode::from(code);
    }
    let context = Context {
        cli: &cli,
        served: None,
        stdin: route::Stdin::Own,
    };
    // Standard output is not held locked: `edudb mcp` writes its messages
    // to it from the runtime's threads.
    let result = run(&context, &mut anstream::stdout(), &mut anstream::stderr());
    ExitCode::from(finish(&cli, result, &mut anstream::stderr()))
}

/// Runs forwarded command lines on the served store (the server side of
/// [`route::forward`]): parsed as here, relative paths read from the
/// caller's directory, progress bars off.
#[derive(Debug)]
struct Runner;

impl CommandRunner for Runner {
    fn run(&self, served: &Served, request: CommandRequest) -> CommandOutput {
        let refused = |stderr: String| CommandOutput {
            stdout: String::new(),
            stderr,
            code: EXIT_USER,
        };
        let args = std::iter::once("edudb".to_owned()).chain(request.args);
        let mut cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(err) => return refused(err.render().to_string()),
        };
        if !cli.command.routable() {
            return refused("error: this command cannot run through a server\n".into());
        }
        cli.command.resolve_paths(&request.cwd);
        cli.quiet = true;
        let decode = |text: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(text)
        };
        let stdin = match request.stdin_base64.as_deref().map(decode).transpose() {
            Ok(stdin) => stdin,
            Err(err) => {
                return refused(format!(
                    "error: the forwarded standard input is not base64: {err}\n"
                ));
            }
        };
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let context = Context {
            cli: &cli,
            served: Some(served),
            stdin: route::Stdin::Forwarded(stdin.as_deref()),
        };
        let result = run(&context, &mut out, &mut errors);
        let code = finish(&cli, result, &mut errors);
        CommandOutput {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&errors).into_owned(),
            code,
        }
    }
}

/// The exit code of a command's outcome, with the failure written to
/// `errors`.
fn finish(cli: &Cli, result: Result<u8, Failure>, errors: &mut dyn Write) -> u8 {
    match result {
        Ok(code) => code,
        // The reader went away (`edudb docs | head`): nothing left to say.
        Err(Failure::Output(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(Failure::Output(err)) => {
            let _ = render::error(errors, &format!("writing output: {err}"));
            EXIT_INTERNAL
        }
        Err(Failure::Db(err)) => {
            let _ = render::error(errors, &err);
            if err.is_busy() {
                let _ = render::hint(
                    errors,
                    &format!(
                        "waited {} s for it; --wait SECONDS (or EDUDB_WAIT) waits longer",
                        cli.wait.as_secs_f64()
                    ),
                );
            }
            failure::exit_code(&err)
        }
    }
}

/// Runs the command, writing to `out` and `errors`; returns the exit code.
fn run(context: &Context, out: &mut dyn Write, errors: &mut dyn Write) -> Result<u8, Failure> {
    let cli = context.cli;
    if cli.command.counts_tokens() {
        edudb::model::tokens::load_in_background();
    }
    let done = |result: Result<(), Failure>| result.map(|()| 0);
    match &cli.command {
        Command::Init { shards } => done(documents::init(context, out, *shards)),
        Command::Ingest(args) => documents::ingest(context, out, errors, args),
        Command::Docs { condition } => done(documents::docs(context, out, condition.as_deref())),
        Command::Meta { doc, change } => done(metadata::run(context, out, doc, change.as_ref())),
        Command::Tree { doc, depth } => done(documents::tree(context, out, doc, *depth)),
        Command::Dag {
            doc,
            level,
            dot,
            attention,
        } => done(documents::dag(
            context,
            out,
            doc,
            *level,
            *dot,
            attention.as_ref(),
        )),
        Command::Show { doc, range, page } => done(documents::show(
            context,
            out,
            doc,
            range.as_deref(),
            page.as_deref(),
        )),
        Command::Rm { docs } => done(documents::rm(context, out, docs)),
        Command::Highlight(args) => done(retrieval::highlight(context, out, args)),
        Command::Search { query, limit } => done(retrieval::search(context, out, query, *limit)),
        Command::Query {
            statement,
            format,
            params,
        } => done(retrieval::query(context, out, statement, *format, params)),
        Command::Ask(args) => done(retrieval::ask(context, out, args)),
        Command::Console { format } => serving::console(context, *format),
        Command::Serve(args) => done(serving::serve(context, out, args, Arc::new(Runner))),
        Command::Mcp { access } => {
            done(mcp::run(&cli.db, || context.api(true), access).map_err(Failure::from))
        }
        Command::Stats => done(maintenance::stats(context, out)),
        Command::Reindex => maintenance::reindex(context, out),
        Command::Salvage { to } => maintenance::salvage(context, out, to),
        Command::Backup { dest } => maintenance::backup(context, out, dest),
        Command::Vacuum => done(maintenance::vacuum(context, out)),
        Command::Check => maintenance::check(context, out),
        Command::Demo => done(demo::run(out, cli.quiet)),
        Command::Session { command } => done(session::run(
            out,
            command,
            &|create| context.open(create),
            context.stdin,
            &bars::Bars::new(cli.quiet || cli.json),
            cli.json,
        )),
        Command::Eval { command } => done(eval::run(
            out,
            command,
            cli.embedder.config()?,
            cli.json,
            cli.quiet,
        )),
    }
}
