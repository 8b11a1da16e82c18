//! Command lines forwarded to a running server: a CLI command on a served
//! store goes to the server's Unix socket (`POST /v1/cli`) and prints what
//! it would print without one.

use std::path::PathBuf;

use super::client::{Client, CommandOutput, CommandRequest};
use super::served::Served;
use crate::error::Result;

/// The Unix socket a server listens on, inside the store directory.
pub const SOCKET_FILE: &str = crate::engine::SOCKET_FILE;

/// Runs a command line of the `edudb` binary against the served store, for
/// `POST /v1/cli` (the binary supplies it, so that its commands go through
/// a running server and print what they print without one).
pub trait CommandRunner: Send + Sync + std::fmt::Debug {
    /// Runs `request` on `served`, the store or shard set the server holds.
    fn run(&self, served: &Served, request: CommandRequest) -> CommandOutput;
}

/// The socket of a live server of the store at `store`, if one answers.
pub fn live_socket(store: &std::path::Path) -> Option<PathBuf> {
    let socket = store.join(SOCKET_FILE);
    std::os::unix::net::UnixStream::connect(&socket)
        .ok()
        .map(|_| socket)
}

/// Sends `request` to the server listening on `socket` and returns what the
/// command printed.
pub fn forward(socket: &std::path::Path, request: &CommandRequest) -> Result<CommandOutput> {
    Client::over_socket(socket)?.run_command(request)
}
