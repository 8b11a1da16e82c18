//! `edudb mcp`: the store as an MCP server on standard input and output,
//! through the store's server when one is live (so that an agent and a
//! person share the store), else on the store (or shard set) opened here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use edudb::serve::mcp::{McpOptions, serve_stdio};
use edudb::serve::{Api, Client};

use super::route;

/// What the MCP server lets a model do (`edudb mcp`'s flags; `edudb
/// serve`'s `--mcp-…` flags for `/mcp`).
#[derive(Debug, Clone, clap::Args)]
pub struct McpAccess {
    /// Only the reading tools (no remember, forget, ingest or remove).
    #[arg(long)]
    pub read_only: bool,
    /// A directory whose files `ingest` may read (repeatable); without
    /// one, only text is ingested.
    #[arg(long, value_name = "DIR")]
    pub allow_dir: Vec<PathBuf>,
    /// The largest token budget a call may ask for.
    #[arg(long, default_value_t = McpOptions::default().max_budget, value_name = "TOKENS")]
    pub max_budget: u64,
}

impl McpAccess {
    /// The options these flags give, their directories resolved.
    pub fn options(&self) -> edudb::Result<McpOptions> {
        McpOptions {
            read_only: self.read_only,
            allowed_dirs: self.allow_dir.clone(),
            max_budget: self.max_budget,
            ..McpOptions::default()
        }
        .resolved()
    }
}

/// Serves the store at `store` over stdio until the client closes it:
/// through its server when one is live, else on what `open` opens here (the
/// store, or a shard set).
pub fn run(
    store: &Path,
    open: impl FnOnce() -> edudb::Result<Arc<dyn Api + Send + Sync>>,
    access: &McpAccess,
) -> edudb::Result<()> {
    let options = access.options()?;
    let api: Arc<dyn Api + Send + Sync> = match route::Server::find(store) {
        Some(server) => Arc::new(Client::connect(&server.store().to_string_lossy(), None)?),
        None => open()?,
    };
    serve_stdio(api, options)
}
