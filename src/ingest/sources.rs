//! Where ingest inputs come from: files, directories walked recursively,
//! standard input, or text handed over by the caller; and which document id
//! each one gets.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::document::Format;
use crate::model::ids::validate_id;

/// The file extensions edudb reads, each with the format it names: a
/// directory ingests the files that have one, and a file named with any
/// other extension is refused the same way ([`check_extension`]).
pub const EXTENSIONS: &[(&str, Format)] = &[
    ("md", Format::Markdown),
    ("markdown", Format::Markdown),
    ("mdown", Format::Markdown),
    ("mkd", Format::Markdown),
    ("html", Format::Html),
    ("htm", Format::Html),
    ("xhtml", Format::Html),
    ("txt", Format::Text),
    ("text", Format::Text),
    ("pdf", Format::Pdf),
];

/// The format a file's extension names, if it is one of [`EXTENSIONS`].
pub fn format_of_extension(path: Option<&Path>) -> Option<Format> {
    let extension = extension(path)?.to_ascii_lowercase();
    (EXTENSIONS.iter())
        .find(|(name, _)| *name == extension)
        .map(|&(_, format)| format)
}

/// Refuses a file whose extension is not one of [`EXTENSIONS`] when no
/// `format` is given, as a directory walk leaves such files out (a file
/// without an extension, or standard input, is sniffed instead).
pub fn check_extension(format: Option<Format>, path: Option<&Path>) -> Result<()> {
    match (format, extension(path)) {
        (None, Some(extension)) if format_of_extension(path).is_none() => {
            Err(Error::UnreadExtension {
                source_name: path.map(|p| p.display().to_string()).unwrap_or_default(),
                extension: extension.to_owned(),
                known: (EXTENSIONS.iter())
                    .map(|(name, _)| format!(".{name}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
        _ => Ok(()),
    }
}

/// A path's extension, when it has one in UTF-8.
fn extension(path: Option<&Path>) -> Option<&str> {
    path.and_then(Path::extension).and_then(|e| e.to_str())
}

/// Where one input's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file on disk.
    File(PathBuf),
    /// Standard input.
    Stdin,
    /// Bytes supplied by the caller.
    Bytes(Vec<u8>),
}

/// One input to ingest: the id it is stored under and where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The document id.
    pub id: String,
    /// Where to read it from.
    pub origin: Origin,
}

impl Source {
    /// A name for messages: the path, `<stdin>`, or the id.
    pub fn name(&self) -> String {
        match &self.origin {
            Origin::File(path) => path.display().to_string(),
            Origin::Stdin => "<stdin>".to_owned(),
            Origin::Bytes(_) => self.id.clone(),
        }
    }

    /// The path, for format detection by extension.
    pub fn path(&self) -> Option<&Path> {
        match &self.origin {
            Origin::File(path) => Some(path),
            _ => None,
        }
    }

    /// Size in bytes when known up front (for progress).
    pub fn len_hint(&self) -> u64 {
        match &self.origin {
            Origin::File(path) => std::fs::metadata(path).map_or(0, |m| m.len()),
            Origin::Stdin => 0,
            Origin::Bytes(bytes) => bytes.len() as u64,
        }
    }

    /// Reads all of the input's bytes.
    pub fn read(&self) -> Result<Vec<u8>> {
        match &self.origin {
            Origin::File(path) => std::fs::read(path).map_err(|source| Error::Input {
                path: path.clone(),
                source,
            }),
            Origin::Stdin => read_stdin(),
            Origin::Bytes(bytes) => Ok(bytes.clone()),
        }
    }
}

/// All of this process's standard input.
pub fn read_stdin() -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Input {
            path: "<stdin>".into(),
            source,
        })?;
    Ok(bytes)
}

/// Expands command-line inputs into sources. `-` is standard input; a
/// directory contributes every file with one of [`EXTENSIONS`]
/// below it, with ids `sub/dir/name`; a file's id is its name without the
/// extension. `id` overrides the id and is only allowed with one input that
/// is not a directory. Ids are checked and must be unique.
pub fn expand(inputs: &[PathBuf], id: Option<&str>) -> Result<Vec<Source>> {
    expand_listing_skipped(inputs, id).map(|(sources, _)| sources)
}

/// [`expand`], also returning the files found in directories that were
/// skipped because their extension is not one of [`EXTENSIONS`]
/// (sorted), so a caller can say what it left out.
pub fn expand_listing_skipped(
    inputs: &[PathBuf],
    id: Option<&str>,
) -> Result<(Vec<Source>, Vec<PathBuf>)> {
    let mut sources = Vec::new();
    let mut skipped = Vec::new();
    for input in inputs {
        if input.as_os_str() == "-" {
            sources.push(Source {
                id: "stdin".to_owned(),
                origin: Origin::Stdin,
            });
            continue;
        }
        let metadata = std::fs::metadata(input).map_err(|source| Error::Input {
            path: input.clone(),
            source,
        })?;
        if metadata.is_dir() {
            if id.is_some() {
                return Err(Error::Usage(
                    "--id cannot be used when ingesting a directory".into(),
                ));
            }
            walk(input, &mut sources, &mut skipped)?;
        } else {
            sources.push(Source {
                id: file_stem(input),
                origin: Origin::File(input.clone()),
            });
        }
    }
    if let Some(id) = id {
        match sources.as_mut_slice() {
            [only] => only.id = id.to_owned(),
            _ => return Err(Error::Usage("--id needs exactly one input".into())),
        }
    }
    let mut seen = std::collections::HashSet::new();
    for source in &sources {
        validate_id(&source.id)?;
        if !seen.insert(source.id.as_str()) {
            return Err(Error::Usage(format!(
                "two inputs map to the id {:?}; ingest them separately with --id",
                source.id
            )));
        }
    }
    skipped.sort();
    Ok((sources, skipped))
}

/// The file name without its extension.
fn file_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Collects the known files under `root`, sorted, without recursion, and
/// the other files into `skipped`.
fn walk(root: &Path, sources: &mut Vec<Source>, skipped: &mut Vec<PathBuf>) -> Result<()> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| Error::Input {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| Error::Input {
                path: dir.clone(),
                source,
            })?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|source| Error::Input {
                path: path.clone(),
                source,
            })?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && has_known_extension(&path) {
                found.push(path);
            } else if kind.is_file() {
                skipped.push(path);
            }
        }
    }
    found.sort();
    for path in found {
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let mut id: Vec<String> = relative
            .parent()
            .into_iter()
            .flat_map(|p| p.components())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        id.push(file_stem(&path));
        sources.push(Source {
            id: id.join("/"),
            origin: Origin::File(path),
        });
    }
    Ok(())
}

fn has_known_extension(path: &Path) -> bool {
    format_of_extension(Some(path)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_give_relative_ids_and_skip_unknown_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        for name in ["a.md", "sub/b.txt", "sub/deeper/c.html", "image.png"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let ids: Vec<String> = expand(&[dir.path().to_owned()], None)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["a", "sub/b", "sub/deeper/c"]);
        let (_, skipped) = expand_listing_skipped(&[dir.path().to_owned()], None).unwrap();
        assert_eq!(skipped, [dir.path().join("image.png")]);
    }

    #[test]
    fn id_override_needs_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.md");
        let b = dir.path().join("b.md");
        std::fs::write(&a, "x").unwrap();
        std::fs::write(&b, "y").unwrap();
        assert_eq!(
            expand(std::slice::from_ref(&a), Some("mine")).unwrap()[0].id,
            "mine"
        );
        assert!(matches!(
            expand(&[a.clone(), b], Some("mine")),
            Err(Error::Usage(_))
        ));
        assert!(matches!(
            expand(&[dir.path().to_owned()], Some("mine")),
            Err(Error::Usage(_))
        ));
        assert!(matches!(
            expand(&[dir.path().join("missing.md")], None),
            Err(Error::Input { .. })
        ));
    }

    #[test]
    fn duplicate_ids_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "x").unwrap();
        std::fs::write(dir.path().join("a.txt"), "y").unwrap();
        let err = expand(&[dir.path().to_owned()], None).unwrap_err();
        assert!(err.to_string().contains("\"a\""), "{err}");
    }
}
