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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_allowed_only_where_it_really_lies() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir(&allowed).unwrap();
        std::fs::write(allowed.join("in.md"), "in").unwrap();
        std::fs::write(dir.path().join("out.md"), "out").unwrap();
        std::os::unix::fs::symlink(dir.path().join("out.md"), allowed.join("link.md")).unwrap();
        let options = McpOptions {
            allowed_dirs: vec![allowed.clone()],
            ..McpOptions::default()
        }
        .resolved()
        .unwrap();
        assert!(options.allowed(&allowed.join("in.md")).is_ok());
        for outside in [
            dir.path().join("out.md"),
            allowed.join("link.md"),
            allowed.join("../out.md"),
        ] {
            let refusal = options.allowed(&outside).unwrap_err().to_string();
            assert!(refusal.contains("outside the directories"), "{refusal}");
        }
        let none = McpOptions::default().allowed(&allowed.join("in.md"));
        assert!(none.unwrap_err().to_string().contains("--allow-dir"));
    }

    #[test]
    fn an_allowed_directory_must_exist_and_budgets_and_texts_are_capped() {
        let missing = McpOptions {
            allowed_dirs: vec!["/no/such/dir".into()],
            ..McpOptions::default()
        };
        assert!(
            missing
                .resolved()
                .unwrap_err()
                .to_string()
                .contains("/no/such/dir")
        );
        let options = McpOptions {
            max_budget: 100,
            max_text_bytes: 4,
            ..McpOptions::default()
        };
        assert_eq!(options.budget(100).unwrap(), 100);
        assert!(options.budget(101).is_err() && options.budget(0).is_err());
        assert!(options.text_fits("four").is_ok() && options.text_fits("five!").is_err());
    }
}
