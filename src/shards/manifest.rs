//! A shard set's manifest (`shards.json`): what the directory is, how it
//! places documents, and which stores it is made of; read checked, written
//! whole or not at all.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, io_error};

/// The manifest's file name in a shard set's directory.
pub const MANIFEST_FILE: &str = "shards.json";

/// What the manifest's `kind` says.
const MANIFEST_KIND: &str = "edudb shard set";

/// The manifest's format version.
const MANIFEST_FORMAT: u32 = 1;

/// The placement rule the manifest records (the only one so far).
const PLACEMENT: &str = "crc32(id) mod shards";

/// Most stores a shard set may have.
pub const MAX_SHARDS: usize = 4096;

/// The manifest: what the directory is and which stores it is made of.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    kind: String,
    format: u32,
    placement: String,
    /// The stores, in placement order: relative to the set's directory,
    /// or absolute.
    pub(super) shards: Vec<PathBuf>,
}

impl Manifest {
    /// The manifest of a shard set made of `shards`, in placement order.
    pub(super) fn new(shards: Vec<PathBuf>) -> Manifest {
        Manifest {
            kind: MANIFEST_KIND.to_owned(),
            format: MANIFEST_FORMAT,
            placement: PLACEMENT.to_owned(),
            shards,
        }
    }
}

/// The manifest at `dir`, checked.
pub(super) fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST_FILE);
    let bad = |message: String| Error::BadShardSet {
        path: dir.to_owned(),
        message,
    };
    let bytes = std::fs::read(&path).map_err(io_error(&path))?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("{MANIFEST_FILE} does not read: {e}")))?;
    if manifest.kind != MANIFEST_KIND {
        return Err(bad(format!(
            "{MANIFEST_FILE} says it is {:?}, not {MANIFEST_KIND:?}",
            manifest.kind
        )));
    }
    if manifest.format != MANIFEST_FORMAT {
        return Err(bad(format!(
            "{MANIFEST_FILE} is format {}; this edudb reads format {MANIFEST_FORMAT}",
            manifest.format
        )));
    }
    if manifest.placement != PLACEMENT {
        return Err(bad(format!(
            "{MANIFEST_FILE} places documents by {:?}; this edudb places them by {PLACEMENT:?}",
            manifest.placement
        )));
    }
    if !(1..=MAX_SHARDS).contains(&manifest.shards.len()) {
        return Err(bad(format!(
            "{MANIFEST_FILE} names {} stores; a shard set has 1 to {MAX_SHARDS}",
            manifest.shards.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for shard in &manifest.shards {
        if !seen.insert(dir.join(shard)) {
            return Err(bad(format!(
                "{MANIFEST_FILE} names {} twice",
                shard.display()
            )));
        }
    }
    Ok(manifest)
}

/// Writes `manifest` into `dir` whole or not at all (a temporary file,
/// synced, renamed over, the directory synced).
pub(super) fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    use std::io::Write;
    let path = dir.join(MANIFEST_FILE);
    let partial = dir.join(format!("{MANIFEST_FILE}.partial"));
    let json = serde_json::to_vec_pretty(manifest).expect("a manifest serialises");
    let written = (|| {
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(&json)?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    written.map_err(io_error(&path))
}
