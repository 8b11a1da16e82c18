//! A command line being run, and the store it runs on.

use std::sync::Arc;

use edudb::serve::{Api, Served};
use edudb::{Db, Error, OpenOptions, ShardSet};

use super::args::Cli;
use super::route::{self, Held};

/// A command line being run: here, or by a server on the store or shard
/// set it holds open (`served`), for a command forwarded to it.
pub(super) struct Context<'a> {
    pub(super) cli: &'a Cli,
    pub(super) served: Option<&'a Served>,
    /// Where `-` reads from.
    pub(super) stdin: route::Stdin<'a>,
}

impl<'a> Context<'a> {
    /// The store: the served one, or the one at `--db` opened (created when
    /// `create`) with the chosen embedder.
    /// A shard set at `--db` is refused, naming the commands that take one.
    pub(super) fn open(&self, create: bool) -> edudb::Result<route::Store<'a>> {
        match self.served {
            Some(Served::Store(db)) => return Ok(route::Store::Served(db)),
            Some(Served::Set(_)) => return Err(self.one_store_only()),
            None if ShardSet::is_shard_set(&self.cli.db) => return Err(self.one_store_only()),
            None => {}
        }
        Db::open_with(&self.cli.db, &self.open_options(create)?)
            .map(|db| route::Store::Owned(Box::new(db)))
    }

    /// Why a command that works on one store refuses the shard set at
    /// `--db`.
    pub(super) fn one_store_only(&self) -> Error {
        Error::Usage(format!(
            "{} is a shard set: this command works on one store (run it on one of the set's stores); ingest, docs, query, search, ask, highlight, stats, check, reindex, backup, vacuum, rm, tree, dag, show and meta take a shard set",
            self.cli.db.display()
        ))
    }

    /// The store that holds document `doc`: the one at `--db`, or, when
    /// that is a shard set, the set's store for `doc`.
    pub(super) fn open_holding(&self, doc: &str) -> edudb::Result<route::Store<'a>> {
        if let Some(Served::Set(set)) = self.served {
            return Ok(route::Store::Served(set.shard_for(doc)));
        }
        if self.served.is_none() && ShardSet::is_shard_set(&self.cli.db) {
            let path = ShardSet::store_for(&self.cli.db, doc)?;
            return Db::open_with(path, &self.open_options(false)?)
                .map(|db| route::Store::Owned(Box::new(db)));
        }
        self.open(false)
    }

    /// The shard set at `--db`, when it is one: the served one, or one
    /// opened here.
    pub(super) fn shard_set(&self) -> edudb::Result<Option<Held<'a, ShardSet>>> {
        match self.served {
            Some(Served::Set(set)) => Ok(Some(Held::Served(set))),
            Some(Served::Store(_)) => Ok(None),
            None if ShardSet::is_shard_set(&self.cli.db) => {
                let set = ShardSet::open(&self.cli.db, &self.open_options(false)?)?;
                Ok(Some(Held::Owned(Box::new(set))))
            }
            None => Ok(None),
        }
    }

    /// What a command that takes a shard set as well as one store runs on:
    /// the served store or set, or what `--db` is, opened here.
    pub(super) fn target(&self) -> edudb::Result<Held<'a, Served>> {
        match self.served {
            Some(served) => Ok(Held::Served(served)),
            None => Ok(Held::Owned(Box::new(self.open_served(false)?))),
        }
    }

    /// What `--db` is, opened here to be served or used by this process
    /// alone: the shard set there, or the store (created when `create`).
    pub(super) fn open_served(&self, create: bool) -> edudb::Result<Served> {
        Served::open(&self.cli.db, &self.open_options(create)?)
    }

    /// The calls of what `--db` is (see [`Context::open_served`]), as `Api`
    /// answers them.
    pub(super) fn api(&self, create: bool) -> edudb::Result<Arc<dyn Api + Send + Sync>> {
        Ok(match self.open_served(create)? {
            Served::Set(set) => Arc::new(set),
            Served::Store(db) => Arc::new(*db),
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
