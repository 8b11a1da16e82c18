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

/// What a command works on (a store, a shard set, either): opened by the
/// command, or the one a server holds.
pub enum Held<'a, T> {
    /// Opened here.
    Owned(Box<T>),
    /// The server's, for a forwarded command.
    Served(&'a T),
}

/// The store a command works on.
pub type Store<'a> = Held<'a, Db>;

impl<T> Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Held::Owned(held) => held,
            Held::Served(held) => held,
        }
    }
}

impl<T> Held<'_, T> {
    /// It as a value, for the commands that keep it (`console`, `serve`);
    /// those never run through a server.
    pub fn into_owned(self) -> edudb::Result<T> {
        match self {
            Held::Owned(held) => Ok(*held),
            Held::Served(_) => Err(Error::Usage(
                "this command cannot run through a server".into(),
            )),
        }
    }
}

/// Where a command's standard input (`-`) comes from.
#[derive(Debug, Clone, Copy)]
pub enum Stdin<'a> {
    /// This process's.
    Own,
    /// The bytes the caller of a forwarded command sent (`None`: it sent
    /// none).
    Forwarded(Option<&'a [u8]>),
}

impl Stdin<'_> {
    /// All of it.
    pub fn read(self) -> edudb::Result<Vec<u8>> {
        match self {
            Stdin::Own => edudb::ingest::sources::read_stdin(),
            Stdin::Forwarded(Some(bytes)) => Ok(bytes.to_vec()),
            Stdin::Forwarded(None) => Err(Error::Usage(
                "the command reads standard input, and its caller sent none to the server".into(),
            )),
        }
    }

    /// All of it, as UTF-8 text.
    pub fn read_text(self) -> edudb::Result<String> {
        String::from_utf8(self.read()?).map_err(|e| Error::Input {
            path: "<stdin>".into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
        })
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
    /// relative paths read from `cwd` and its standard input `stdin` when
    /// it reads one; returns what it printed.
    pub fn run(
        &self,
        args: Vec<String>,
        cwd: PathBuf,
        stdin: Option<&[u8]>,
    ) -> edudb::Result<CommandOutput> {
        use base64::Engine as _;
        let stdin_base64 =
            stdin.map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
        edudb::serve::forward(
            &self.socket,
            &CommandRequest {
                args,
                cwd,
                stdin_base64,
            },
        )
    }
}

/// Forwards this process's command line to the server of the store at
/// `store` when one is live, with all of standard input when the command
/// `reads_stdin`, prints what the command printed there and returns its
/// exit code; `None` to run the command here.
pub fn forward(store: &Path, reads_stdin: bool) -> Option<u8> {
    let server = Server::find(store)?;
    let args = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let cwd = std::env::current_dir().ok()?;
    let forwarded = match reads_stdin.then(|| Stdin::Own.read()).transpose() {
        Ok(stdin) => server.run(args, cwd, stdin.as_deref()),
        Err(err) => Err(err),
    };
    Some(match forwarded {
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
