//! A command line being run, and the store it runs on.

use std::sync::Arc;

use edudb::serve::Api;
use edudb::{Db, Error, OpenOptions, ShardSet};

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
    /// A shard set at `--db` is refused, naming the commands that take one.
    pub(super) fn open(&self, create: bool) -> edudb::Result<route::Store<'a>> {
        if let Some(db) = self.served {
            return Ok(route::Store::Served(db));
        }
        if ShardSet::is_shard_set(&self.cli.db) {
            return Err(Error::Usage(format!(
                "{} is a shard set: this command works on one store (run it on one of the set's stores); ingest, docs, query, rm, tree, dag, show and meta take a shard set",
                self.cli.db.display()
            )));
        }
        Db::open_with(&self.cli.db, &self.open_options(create)?)
            .map(|db| route::Store::Owned(Box::new(db)))
    }

    /// The store that holds document `doc`: the one at `--db`, or, when
    /// that is a shard set, the set's store for `doc`.
    pub(super) fn open_holding(&self, doc: &str) -> edudb::Result<route::Store<'a>> {
        if self.served.is_none() && ShardSet::is_shard_set(&self.cli.db) {
            let path = ShardSet::store_for(&self.cli.db, doc)?;
            return Db::open_with(path, &self.open_options(false)?)
                .map(|db| route::Store::Owned(Box::new(db)));
        }
        self.open(false)
    }

    /// The shard set at `--db`, when it is one (never for a served store).
    pub(super) fn shard_set(&self) -> edudb::Result<Option<ShardSet>> {
        if self.served.is_some() || !ShardSet::is_shard_set(&self.cli.db) {
            return Ok(None);
        }
        ShardSet::open(&self.cli.db, &self.open_options(false)?).map(Some)
    }

    /// The calls of the store at `--db` (created when `create`), or of the
    /// shard set there, as `Api` answers them.
    pub(super) fn api(&self, create: bool) -> edudb::Result<Arc<dyn Api + Send + Sync>> {
        Ok(match self.shard_set()? {
            Some(set) => Arc::new(set),
            None => Arc::new(self.open(create)?.into_owned()?),
        })
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
