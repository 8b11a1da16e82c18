//! The commands that serve the store to others: `serve` and `console`
//! (`mcp` is [`super::mcp`]).

use std::io::Write;
use std::sync::Arc;

use edudb::Error;
use edudb::serve::CommandRunner;

use super::args::ServeArgs;

use super::console;
use super::context::Context;
use super::failure::Failure;
use super::render::{self, OutputFormat};
use super::route;

/// `serve`: serves the store over HTTP and its socket until stopped,
/// forwarded command lines run by `commands`.
pub(super) fn serve(
    context: &Context,
    out: &mut dyn Write,
    args: &ServeArgs,
    commands: Arc<dyn CommandRunner>,
) -> Result<(), Failure> {
    let token = match &args.token_env {
        Some(var) => Some(
            std::env::var(var)
                .map_err(|_| Error::Usage(format!("--token-env {var}: the variable is not set")))?,
        ),
        None => None,
    };
    let options = edudb::serve::ServeOptions {
        listen: args.listen,
        token,
        request_timeout: std::time::Duration::from_secs_f64(args.request_timeout),
        stop_on_signals: true,
        commands: Some(commands),
        mcp: Some(
            edudb::serve::mcp::McpOptions {
                read_only: args.mcp_read_only,
                allowed_dirs: args.mcp_allow_dir.clone(),
                ..Default::default()
            }
            .resolved()?,
        ),
        ..Default::default()
    };
    let mut announced = Ok(());
    edudb::serve::run(
        context.open_served(false)?,
        &options,
        |bound| announced = render::serving(out, bound, context.cli.json),
        &edudb::CancelToken::new(),
    )?;
    Ok(announced?)
}

/// `console`: the interactive console, on the store's live server when
/// there is one (each statement is sent there), else on the store itself.
pub(super) fn console(context: &Context, format: OutputFormat) -> Result<u8, Failure> {
    let cli = context.cli;
    let format = if cli.json { OutputFormat::Json } else { format };
    let target = match route::Server::find(&cli.db) {
        Some(server) => console::Target::Served(server),
        None => console::Target::Local(Arc::new(context.open(false)?.into_owned()?)),
    };
    console::run(target, format)
}
