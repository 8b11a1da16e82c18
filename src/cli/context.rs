//! A command line being run, and the store it runs on.

use edudb::{Db, OpenOptions};

use super::args::Cli;
use super::route;

/// A command line being run: here, or by a server on the store it holds
/// open (`served`), for a command forwarded to it.
pub(super) struct Context<'a> {
    pub(super) cli: &'a Cli,
    pub(super) served: Option<&'a Db>,
    /// Where `-` reads from.
    pub(super) stdin: route::Stdin<'a>,
}

impl<'a> Context<'a> {
    /// The store: the served one, or the one at `--db` opened (created when
    /// `create`) with the chosen embedder.
    pub(super) fn open(&self, create: bool) -> edudb::Result<route::Store<'a>> {
        if let Some(db) = self.served {
            return Ok(route::Store::Served(db));
        }
        Db::open_with(&self.cli.db, &self.open_options(create)?)
            .map(|db| route::Store::Owned(Box::new(db)))
    }

    /// How the store at `--db` is opened (created when `create`).
    pub(super) fn open_options(&self, create: bool) -> edudb::Result<OpenOptions> {
        let cli = self.cli;
        Ok(OpenOptions {
            create,
            embedder: cli.embedder.config()?,
            busy_timeout: cli.wait,
            chat: if cli.command.may_ask_a_model() {
                cli.llm.chat()?
            } else {
                None
            },
            to_remove: cli.command.removes(),
            ..Default::default()
        })
    }
}
