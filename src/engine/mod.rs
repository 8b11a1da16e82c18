//! The engine: one open store directory and everything that keeps it
//! consistent. It owns the directory and the process lock, the store (the
//! source of truth), the full-text and vector indexes (derived state) and
//! their catch-up, the write protocol, the document cache, the reads, the
//! store's embedder and device, and the store-wide DAG index. Crate-private:
//! [`crate::Db`] is its public face, `query` and `memory` run over it.
//!
//! Directory layout: `LOCK` (held exclusively while open, [`lock`]), `sled/` (the
//! [`Store`]), `fulltext/` (the [`FullText`] index), `vectors/` (the
//! [`VectorIndex`] dumps).

pub(crate) mod backup;
pub(crate) mod cache;
pub(crate) mod dag_index;
mod graph_build;
mod indexes;
mod leftover;
mod lock;
mod metadata;
pub(crate) mod reads;
pub(crate) mod salvage;
pub(crate) mod vacuum;
mod vector_graph;
pub(crate) mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::compute::chat::ChatModel;
use crate::compute::dag_index::DagIndex;
use crate::compute::device::Device;
use crate::compute::embed::{Embedder, EmbedderConfig};
use crate::engine::cache::{
    CENTROID_CACHE_BYTES, CentroidCache, DEFAULT_CACHE_BYTES, DocumentCache, SESSION_CACHE_BYTES,
    SessionCache,
};
use crate::engine::graph_build::{GraphBuild, VectorSlot};
use crate::engine::lock::{LOCK_FILE, StoreLock};
use crate::error::{Error, Result};
use crate::storage::fulltext::{FullText, FullTextReader};
use crate::storage::store::{ENGINE_DIR, Store};
use crate::storage::vectors::VectorIndex;

const FULLTEXT_DIR: &str = "fulltext";
pub(crate) const VECTORS_DIR: &str = "vectors";
/// The socket a server of the store listens on (`serve`); whoever holds
/// the lock owns it, so one found at open is a dead server's.
pub(crate) const SOCKET_FILE: &str = "serve.sock";

/// An open store: everything below the public [`crate::Db`].
#[derive(Debug)]
pub(crate) struct Engine {
    dir: PathBuf,
    /// Shared with a background build of the vector graph.
    store: Arc<Store>,
    fulltext: Mutex<FullText>,
    /// Searches run on this handle, never waiting for the writer.
    reader: FullTextReader,
    /// Documents queries read, kept between queries.
    cache: DocumentCache,
    /// Documents' centroids, kept between session appends.
    centroids: CentroidCache,
    /// Sessions' dialogues, kept between appends and contexts.
    sessions: SessionCache,
    /// The store's embedder and the configuration it was built from.
    embedder: Arc<dyn Embedder>,
    embedder_config: EmbedderConfig,
    /// The chat model the language-model steps ask, if one was given.
    chat: Option<Arc<dyn ChatModel>>,
    /// The vector index, loaded on first use (see [`Engine::vector_index`]).
    vectors: VectorSlot,
    /// Searches answered exactly while no graph was loaded (see
    /// [`Engine::vector_search`]).
    flat_searches: std::sync::atomic::AtomicUsize,
    /// The vector graph's build on a thread of its own, while one runs.
    graph_build: Mutex<Option<GraphBuild>>,
    /// The change the log is kept from while that build runs (`u64::MAX`
    /// when none does).
    build_floor: Arc<std::sync::atomic::AtomicU64>,
    /// Where attention aggregation and propagation run, detected on first
    /// use (opening a GPU compiles its kernels, which plain commands skip).
    device: std::sync::OnceLock<Device>,
    /// Every document's DAG as one graph, built on first use and rebuilt
    /// after a change (see [`Engine::dag_index`]).
    dag_index: Mutex<Option<Arc<DagIndex>>>,
    /// Set when a change reached the store but not the full-text writer (it
    /// failed after the store write): the next commit first drops the
    /// writer's uncommitted changes and replays the change log from the
    /// index's last commit, so no later commit can mark a missed change as
    /// applied.
    fulltext_behind: std::sync::atomic::AtomicBool,
    /// The change the log is kept from while a backup runs (`u64::MAX`
    /// when none does): its second pass reads every change after it.
    log_floor: std::sync::atomic::AtomicU64,
    /// Held for the lifetime of the `Engine`; the OS releases it on exit or crash.
    _lock: StoreLock,
}

pub(crate) use crate::error::io_error;

/// How [`crate::Db::open_with`] opens a store.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Create the store when the directory is absent or empty.
    pub create: bool,
    /// The embedder: for a new store, the one it is built with (default:
    /// the hashed n-gram embedder); for an existing store, it must have the
    /// identity the store was built with (`None`: the recorded one).
    pub embedder: Option<EmbedderConfig>,
    /// An embedder of the application's own, used instead of a configured
    /// one: a new store records its identity and dimension
    /// ([`EmbedderConfig::Custom`]), and a store built with it must be
    /// opened with an embedder of the same identity each time. Setting
    /// both this and `embedder` is an error.
    pub custom_embedder: Option<Arc<dyn Embedder>>,
    /// How long to wait for another process to release the store before
    /// failing with [`Error::Locked`], polling its lock (SQLite's busy
    /// timeout). Zero, the default, fails at once; only a lock left to a
    /// child process this process is starting (which holds copies of its
    /// open files until it runs its program) is waited for a moment
    /// regardless.
    pub busy_timeout: Duration,
    /// The chat model for the language-model steps (the LLM structurer,
    /// `IngestOptions::structurer`; `Db::ask`; `Placement::Llm`); not
    /// recorded in the store, so each open may give another or none.
    pub chat: Option<Arc<dyn ChatModel>>,
    /// The store is opened to remove documents or sessions. The storage
    /// engine writes as it opens, and on a disk too full for that an open
    /// fails with [`Error::DiskFull`]; this one may spend the room the
    /// store keeps for removals on it (the removal needs the rest). Other
    /// opens leave that room alone, so reads tried on a full disk never
    /// use up the room a later removal needs.
    pub to_remove: bool,
}

impl Engine {
    /// Opens (or creates) the store at `dir`: see [`crate::Db::open_with`].
    pub(crate) fn open(dir: impl AsRef<Path>, options: &OpenOptions) -> Result<Engine> {
        let dir = dir.as_ref();
        let create = options.create;
        // The lock file is written first when a store is created, so a
        // directory holding it is a store, possibly one whose creation was
        // interrupted; opening it completes the creation (it has no
        // documents yet).
        let is_store = dir.join(ENGINE_DIR).is_dir() || dir.join(LOCK_FILE).is_file();
        if dir.exists() && !dir.is_dir() {
            return Err(Error::NotAStore(dir.to_owned()));
        }
        if !is_store {
            let empty = !dir.exists()
                || std::fs::read_dir(dir)
                    .map_err(io_error(dir))?
                    .next()
                    .is_none();
            if !empty {
                return Err(Error::NotAStore(dir.to_owned()));
            }
            if !create {
                return Err(Error::NoStore(dir.to_owned()));
            }
            std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        }
        let lock = StoreLock::take(dir, options.busy_timeout)?;
        // A dead server's socket: remove it, so that no client tries it. A
        // live one is a server's that closed the store to vacuum it, and
        // that serves it again once vacuumed.
        let socket = dir.join(SOCKET_FILE);
        if std::os::unix::net::UnixStream::connect(&socket).is_err() {
            match std::fs::remove_file(&socket) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!("a stale {SOCKET_FILE} could not be removed: {e}")
                }
                _ => {}
            }
        }
        let engine_dir = dir.join(ENGINE_DIR);
        let opened = if options.to_remove {
            Store::open_to_remove(&engine_dir)
        } else {
            Store::open(&engine_dir)
        };
        let store = opened.map_err(|e| match e {
            Error::FormatVersion {
                found, expected, ..
            } => Error::FormatVersion {
                path: dir.to_owned(),
                found,
                expected,
            },
            other => other,
        })?;
        let fulltext_dir = dir.join(FULLTEXT_DIR);
        let (fulltext, rebuild) = match FullText::open(&fulltext_dir) {
            Ok(index) => (index, false),
            Err(err) => {
                tracing::warn!("full-text index unreadable ({err}); rebuilding it from the store");
                std::fs::remove_dir_all(&fulltext_dir).map_err(io_error(&fulltext_dir))?;
                (FullText::open(&fulltext_dir)?, true)
            }
        };
        let (embedder, embedder_config) = store_embedder(&store, options)?;
        let engine = Engine {
            dir: dir.to_owned(),
            store: Arc::new(store),
            reader: fulltext.reader(),
            fulltext: Mutex::new(fulltext),
            cache: DocumentCache::new(DEFAULT_CACHE_BYTES),
            centroids: CentroidCache::new(CENTROID_CACHE_BYTES),
            sessions: SessionCache::new(SESSION_CACHE_BYTES),
            embedder,
            embedder_config,
            chat: options.chat.clone(),
            vectors: Arc::new(RwLock::new(None)),
            flat_searches: Default::default(),
            graph_build: Mutex::new(None),
            build_floor: Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
            device: std::sync::OnceLock::new(),
            dag_index: Mutex::new(None),
            fulltext_behind: Default::default(),
            log_floor: std::sync::atomic::AtomicU64::new(u64::MAX),
            _lock: lock,
        };
        engine.catch_up(rebuild)?;
        Ok(engine)
    }

    /// The work of [`crate::Db::path`].
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// The document store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The full-text read handle: searches never wait on the writer.
    pub(crate) fn fulltext_reader(&self) -> &FullTextReader {
        &self.reader
    }

    /// The full-text writer, held by whoever changes the store (see the
    /// lock order in docs/architecture.md).
    pub(super) fn fulltext_writer(&self) -> std::sync::MutexGuard<'_, FullText> {
        self.fulltext
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The chat model given at open, if any.
    pub(crate) fn chat(&self) -> Option<&dyn ChatModel> {
        self.chat.as_deref()
    }

    /// The work of [`crate::Db::embedder`].
    pub(crate) fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// The work of [`crate::Db::embedder_config`].
    pub(crate) fn embedder_config(&self) -> &EmbedderConfig {
        &self.embedder_config
    }

    /// The work of [`crate::Db::device`].
    pub(crate) fn device(&self) -> &Device {
        self.device.get_or_init(Device::detect)
    }
}

impl Drop for Engine {
    /// Stops a background build of the vector graph, then persists
    /// vector-index changes not yet written (see
    /// [`Engine::apply_to_vectors`]); a failure only costs a replay next time.
    /// The loaded graph is then freed on a thread of its own: freeing its
    /// hundred thousand small allocations took about a third of a CLI
    /// vector search, and a process that is exiting need not wait for it.
    fn drop(&mut self) {
        drop(self.take_over_vector_graph(true));
        let mut vectors = self.vectors_write();
        if let Some(Err(err)) = vectors
            .as_mut()
            .filter(|index| index.is_dirty())
            .map(VectorIndex::persist)
        {
            tracing::warn!("vector index not persisted ({err}); it will catch up on open");
        }
        if let Some(index) = vectors.take() {
            let freeing = std::thread::Builder::new()
                .name("edudb-free-vectors".into())
                .spawn(move || drop(index));
            // Without a thread the graph is freed here, as before.
            drop(freeing);
        }
    }
}

/// The embedder for `store`: the one recorded in it, or the one `options`
/// give (which must have the recorded identity); a new store records the
/// given one or the default.
fn store_embedder(
    store: &Store,
    options: &OpenOptions,
) -> Result<(Arc<dyn Embedder>, EmbedderConfig)> {
    let recorded: Option<EmbedderConfig> = store
        .embedder_config()?
        .map(|json| {
            serde_json::from_str(&json).map_err(|e| Error::Corrupt {
                key: "embedder".into(),
                message: e.to_string(),
            })
        })
        .transpose()?;
    let (embedder, mut config): (Arc<dyn Embedder>, EmbedderConfig) = match (
        &options.custom_embedder,
        &options.embedder,
    ) {
        (Some(_), Some(_)) => {
            return Err(Error::Usage(
                "open a store with either an embedder configuration or a custom embedder, not both"
                    .into(),
            ));
        }
        (Some(custom), None) => (custom.clone(), EmbedderConfig::custom(custom.as_ref())),
        (None, Some(EmbedderConfig::Custom { .. })) => {
            return Err(Error::Usage(
                    "an application's own embedder is given as OpenOptions::custom_embedder, not as a configuration"
                        .into(),
                ));
        }
        (None, given) => {
            let config = given
                .as_ref()
                .or(recorded.as_ref())
                .cloned()
                .unwrap_or_default();
            (Arc::from(config.build()?), config)
        }
    };
    if let EmbedderConfig::Http(http) = &mut config {
        http.dimension = Some(embedder.dimension());
    }
    // A given configuration equal to the recorded one builds the same
    // embedder: building the recorded one again (for a local model, a
    // second load of its weights) could not find a difference.
    let given = options.custom_embedder.is_some()
        || options
            .embedder
            .as_ref()
            .is_some_and(|given| Some(given) != recorded.as_ref());
    match recorded {
        None => {
            let json = serde_json::to_string(&config).map_err(|e| Error::Storage(e.to_string()))?;
            store.set_embedder_config(&json)?;
        }
        Some(recorded) if given => {
            let stored = recorded.build()?;
            if stored.identity() != embedder.identity()
                || stored.dimension() != embedder.dimension()
            {
                let stored = format!("{} (dimension {})", stored.identity(), stored.dimension());
                return Err(Error::EmbedderMismatch {
                    stored,
                    given: format!(
                        "{} (dimension {})",
                        embedder.identity(),
                        embedder.dimension()
                    ),
                });
            }
        }
        Some(_) => {}
    }
    Ok((embedder, config))
}

/// A new store in a temporary directory holding three small Markdown
/// documents (`apples`, `pears`, `plums`), for the engine's unit tests.
#[cfg(test)]
pub(crate) fn three_fruit_store() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        create: true,
        ..Default::default()
    };
    let engine = Engine::open(dir.path().join("db"), &options).unwrap();
    for (id, text) in [
        ("apples", "# Apples\n\nApples grow in orchards."),
        ("pears", "# Pears\n\nPears ripen after picking."),
        ("plums", "# Plums\n\nPlums dry into prunes."),
    ] {
        let markdown = crate::ingest::pipeline::IngestOptions {
            format: Some(crate::model::document::Format::Markdown),
            ..Default::default()
        };
        engine
            .ingest_bytes(id, text.as_bytes().to_vec(), markdown)
            .unwrap();
    }
    (dir, engine)
}
