//! [`McpOptions`]: what an MCP server lets a model do, and the checks
//! that hold a call to it.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What an MCP server lets a model do.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Only the reading tools: `remember`, `forget`, `ingest` and `remove`
    /// are hidden and refused.
    pub read_only: bool,
    /// Directories `ingest` may read files from (with everything under
    /// them); empty: text ingest only.
    pub allowed_dirs: Vec<PathBuf>,
    /// The largest token budget a call may ask for (`search`, `recall`,
    /// `query`'s BUDGET is the statement's own) and the most tokens `read`
    /// returns at once.
    pub max_budget: u64,
    /// The largest text `ingest` or `remember` takes, in bytes.
    pub max_text_bytes: usize,
}

impl Default for McpOptions {
    fn default() -> McpOptions {
        McpOptions {
            read_only: false,
            allowed_dirs: Vec::new(),
            max_budget: 16_384,
            max_text_bytes: 8 << 20,
        }
    }
}

impl McpOptions {
    /// The options with every allowed directory made absolute and free of
    /// links, so that a path is allowed by where it really is; fails naming
    /// a directory that does not exist.
    pub fn resolved(mut self) -> Result<McpOptions> {
        for dir in &mut self.allowed_dirs {
            *dir = std::fs::canonicalize(&*dir)
                .ok()
                .filter(|d| d.is_dir())
                .ok_or_else(|| {
                    Error::Usage(format!("--allow-dir {}: no such directory", dir.display()))
                })?;
        }
        Ok(self)
    }

    /// `path`, made absolute (from the current directory) and free of
    /// links, when it lies under an allowed directory; else the refusal.
    pub(super) fn allowed(&self, path: &Path) -> Result<PathBuf> {
        if self.allowed_dirs.is_empty() {
            return Err(Error::Usage(
                "this MCP server reads no files (start it with --allow-dir DIR); give the document's text instead".into(),
            ));
        }
        let real = std::fs::canonicalize(path)
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        if self.allowed_dirs.iter().any(|dir| real.starts_with(dir)) {
            Ok(real)
        } else {
            Err(Error::Usage(format!(
                "{} is outside the directories this MCP server may read ({})",
                path.display(),
                (self.allowed_dirs.iter())
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }

    /// `budget`, or the refusal when it is over [`McpOptions::max_budget`]
    /// or zero.
    pub(super) fn budget(&self, budget: u64) -> Result<u64> {
        if budget == 0 || budget > self.max_budget {
            return Err(Error::Usage(format!(
                "budget {budget} is outside 1..={} tokens (this server's --max-budget)",
                self.max_budget
            )));
        }
        Ok(budget)
    }

    /// Refuses a text over [`McpOptions::max_text_bytes`].
    pub(super) fn text_fits(&self, text: &str) -> Result<()> {
        if text.len() > self.max_text_bytes {
            return Err(Error::Usage(format!(
                "the text is {} bytes, over this server's limit of {} bytes",
                text.len(),
                self.max_text_bytes
            )));
        }
        Ok(())
    }
}
