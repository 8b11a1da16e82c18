//! Going through a running server. A command line whose store is served by
//! `edudb serve` (a live `serve.sock` in the store directory) is forwarded
//! to it (`POST /v1/cli`, [`forward`]) and prints what it would print
//! without one; the server runs it (`Runner` in the parent module) on the
//! store it holds open ([`Store::Served`]). Without a live server, or for a
//! command that cannot go through one (`init`, `serve`, `demo`, `eval`, and
//! anything reading standard input), the command opens the store itself,
//! as before. The console is not forwarded whole: it sends each statement
//! to the [`Server`] itself (`console::Target::Served`).

use std::io::Write;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use edudb::serve::{CommandOutput, CommandRequest};
use edudb::{Db, Error};

use super::failure::EXIT_INTERNAL;
use super::render;

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

/// A live server of a store, which runs `edudb` command lines on it.
pub struct Server {
    store: PathBuf,
    socket: PathBuf,
}

impl Server {
    /// The server of the store at `store`, when one answers on its socket.
    pub fn find(store: &Path) -> Option<Server> {
        Some(Server {
            store: store.to_owned(),
            socket: edudb::serve::live_socket(store)?,
        })
    }

    /// The store it serves.
    pub fn store(&self) -> &Path {
        &self.store
    }

    /// Runs the command line `args` (after the program name) there, its
    /// relative paths read from `cwd`; returns what it printed.
    pub fn run(&self, args: Vec<String>, cwd: PathBuf) -> edudb::Result<CommandOutput> {
        edudb::serve::forward(&self.socket, &CommandRequest { args, cwd })
    }
}

/// Forwards this process's command line to the server of the store at
/// `store` when one is live, prints what the command printed there and
/// returns its exit code; `None` to run the command here.
pub fn forward(store: &Path) -> Option<u8> {
    let server = Server::find(store)?;
    let args = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    Some(match server.run(args, std::env::current_dir().ok()?) {
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
    })
}
