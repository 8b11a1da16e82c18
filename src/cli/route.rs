//! Going through a running server. A command line whose store is served by
//! `edudb serve` (a live `serve.sock` in the store directory) is forwarded
//! to it (`POST /v1/cli`) and prints what it would print without one; the
//! server runs it ([`Runner`]) on the store it holds open. Without a live
//! server, or for a command that cannot go through one (`init`, `console`,
//! `serve`, `demo`, `eval`, and anything reading standard input), the
//! command opens the store itself, as before.

use std::io::Write;
use std::ops::Deref;
use std::process::ExitCode;

use clap::Parser;
use edudb::serve::{CommandOutput, CommandRequest, CommandRunner};
use edudb::{Db, Error};

use super::failure::{EXIT_INTERNAL, EXIT_USER};
use super::{Cli, Context, finish, render, run};

/// The store a command works on: opened by the command, or the one a
/// server holds.
pub enum Store<'a> {
    /// Opened here.
    Owned(Box<Db>),
    /// The server's, for a forwarded command.
    Served(&'a Db),
}

impl Deref for Store<'_> {
    type Target = Db;

    fn deref(&self) -> &Db {
        match self {
            Store::Owned(db) => db,
            Store::Served(db) => db,
        }
    }
}

impl Store<'_> {
    /// The store as a value, for the commands that keep it (`console`,
    /// `serve`); those never run through a server.
    pub fn into_owned(self) -> edudb::Result<Db> {
        match self {
            Store::Owned(db) => Ok(*db),
            Store::Served(_) => Err(Error::Usage(
                "this command cannot run through a server".into(),
            )),
        }
    }
}

/// Forwards the command line to the server of `cli`'s store when one is
/// live and the command can go through it: the exit code, or `None` to run
/// the command here.
pub fn forward_if_served(cli: &Cli) -> Option<ExitCode> {
    if !cli.command.routable() {
        return None;
    }
    let socket = edudb::serve::live_socket(&cli.db)?;
    let request = CommandRequest {
        args: std::env::args_os()
            .skip(1)
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect(),
        cwd: std::env::current_dir().ok()?,
    };
    let code = match edudb::serve::forward(&socket, &request) {
        Ok(output) => {
            let printed = anstream::stdout()
                .write_all(output.stdout.as_bytes())
                .and_then(|()| anstream::stderr().write_all(output.stderr.as_bytes()));
            match printed {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => EXIT_INTERNAL,
                _ => output.code,
            }
        }
        Err(err) => {
            let _ = render::error(&mut anstream::stderr(), &err);
            EXIT_INTERNAL
        }
    };
    Some(ExitCode::from(code))
}

/// Runs forwarded command lines on the served store (the server side of
/// [`forward_if_served`]): parsed as here, relative paths read from the
/// caller's directory, progress bars off.
#[derive(Debug)]
pub struct Runner;

impl CommandRunner for Runner {
    fn run(&self, db: &Db, request: CommandRequest) -> CommandOutput {
        let args = std::iter::once("edudb".to_owned()).chain(request.args);
        let mut cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(err) => {
                return CommandOutput {
                    stdout: String::new(),
                    stderr: err.render().to_string(),
                    code: EXIT_USER,
                };
            }
        };
        if !cli.command.routable() {
            return CommandOutput {
                stdout: String::new(),
                stderr: "error: this command cannot run through a server\n".into(),
                code: EXIT_USER,
            };
        }
        cli.command.resolve_paths(&request.cwd);
        cli.quiet = true;
        let (mut out, mut errors) = (Vec::new(), Vec::new());
        let context = Context {
            cli: &cli,
            served: Some(db),
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
