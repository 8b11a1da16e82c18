//! The ingest pipeline, bytes to an analysed [`Document`]: decode, pick the
//! format, extract layout, segment into EDUs, count tokens, build and
//! validate the tree. Pure: nothing here touches the store.

use std::path::Path;

use crate::error::{Error, Result};
use crate::layout::{self, BlockKind, Layout};
use crate::model::document::{DocMeta, Document, Format};
use crate::model::edu::{Edu, EduKind};
use crate::model::tokens;
use crate::segment;
use crate::tree::{BlockEdus, LayoutTreeBuilder, StructureInput, TreeBuilder};

/// Largest document accepted: coordinates are 32-bit.
pub const MAX_DOCUMENT_BYTES: usize = u32::MAX as usize;
/// Longest accepted document id, in bytes.
/// How far into a file binary sniffing looks.
const SNIFF_BYTES: usize = 8192;

/// How to read one input.
#[derive(Debug, Clone, Copy, Default)]
pub struct IngestOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// Replace invalid UTF-8 with U+FFFD instead of rejecting the input.
    pub lossy: bool,
}

impl std::str::FromStr for Format {
    type Err = Error;

    fn from_str(name: &str) -> Result<Format> {
        match name.to_ascii_lowercase().as_str() {
            "text" | "txt" | "plain" => Ok(Format::Text),
            "markdown" | "md" => Ok(Format::Markdown),
            "html" | "htm" => Ok(Format::Html),
            _ => Err(Error::UnknownFormat(name.to_owned())),
        }
    }
}

/// The format for a file: from its extension, else sniffed from its text.
pub fn detect_format(path: Option<&Path>, text: &str) -> Format {
    let by_extension = path
        .and_then(|p| p.extension())
        .and_then(|e| e.to_str())
        .and_then(|e| match e.to_ascii_lowercase().as_str() {
            "md" | "markdown" | "mdown" | "mkd" => Some(Format::Markdown),
            "html" | "htm" | "xhtml" => Some(Format::Html),
            "txt" | "text" => Some(Format::Text),
            _ => None,
        });
    by_extension.unwrap_or_else(|| sniff_format(text))
}

/// Guesses the format of text with no telling extension.
fn sniff_format(text: &str) -> Format {
    let head: String = text
        .chars()
        .take(SNIFF_BYTES)
        .collect::<String>()
        .to_ascii_lowercase();
    let start = head.trim_start();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || head.contains("<body") {
        return Format::Html;
    }
    let markdown_lines = head
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("# ")
                || l.starts_with("## ")
                || l.starts_with("```")
                || l.starts_with("- [")
        })
        .count();
    if markdown_lines > 0 {
        Format::Markdown
    } else {
        Format::Text
    }
}

/// Decodes input bytes into text: rejects what [`check_bytes`] rejects, and
/// invalid UTF-8 unless `lossy`. A leading byte-order mark is kept
/// (coordinates stay exact).
pub fn decode(source_name: &str, bytes: Vec<u8>, lossy: bool) -> Result<String> {
    check_bytes(source_name, &bytes)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(err) if lossy => Ok(String::from_utf8_lossy(err.as_bytes()).into_owned()),
        Err(err) => {
            let offset = err.utf8_error().valid_up_to();
            let before = &err.as_bytes()[..offset];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = offset
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1)
                + 1;
            Err(Error::InvalidUtf8 {
                source_name: source_name.to_owned(),
                offset,
                line,
                column,
            })
        }
    }
}

/// Checks input bytes before decoding: at most [`MAX_DOCUMENT_BYTES`], and
/// no NUL byte near the start (a binary file).
pub fn check_bytes(source_name: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::TooLarge {
            source_name: source_name.to_owned(),
            bytes: bytes.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    if let Some(offset) = bytes[..bytes.len().min(SNIFF_BYTES)]
        .iter()
        .position(|&b| b == 0)
    {
        return Err(Error::Binary {
            source_name: source_name.to_owned(),
            offset,
        });
    }
    Ok(())
}

/// Analyses decoded text into a complete, validated document.
pub fn analyze(id: &str, text: String, format: Format) -> Result<Document> {
    analyze_with(id, text, format, &LayoutTreeBuilder)
}

/// Like [`analyze`], with a caller-chosen tree builder.
pub fn analyze_with(
    id: &str,
    text: String,
    format: Format,
    builder: &dyn TreeBuilder,
) -> Result<Document> {
    crate::model::ids::check_id(id)?;
    let layout = match format {
        Format::Text => layout::plain::parse(&text),
        Format::Markdown => layout::markdown::parse(&text),
        Format::Html => layout::html::parse(&text),
    };
    let Layout { text, blocks } = layout;
    let mut edus: Vec<Edu> = Vec::new();
    let mut block_edus: Vec<BlockEdus> = Vec::with_capacity(blocks.len());
    for block in &blocks {
        let first = edus.len() as u32;
        let (ranges, kind) = match block.kind {
            BlockKind::Paragraph => (
                segment::split_edus(&text, block.range.clone()),
                EduKind::Text,
            ),
            BlockKind::Heading { .. } => (vec![block.range.clone()], EduKind::Heading),
            BlockKind::ListItem { .. } => (vec![block.range.clone()], EduKind::Item),
            BlockKind::Code => (vec![block.range.clone()], EduKind::Code),
            BlockKind::Table => (vec![block.range.clone()], EduKind::Table),
        };
        for range in ranges {
            edus.push(Edu {
                id: edus.len() as u32,
                start: range.start as u32,
                end: range.end as u32,
                tokens: tokens::count(&text[range]),
                kind,
            });
        }
        let end = edus.len() as u32;
        if end > first {
            block_edus.push(BlockEdus {
                kind: block.kind,
                edus: first..end,
            });
        }
    }
    if edus.is_empty() {
        return Err(Error::EmptyDocument {
            source_name: id.to_owned(),
        });
    }
    let input = StructureInput {
        text: &text,
        edus: &edus,
        blocks: &block_edus,
    };
    let tree = builder.build(&input).map_err(|message| Error::Invariant {
        doc: id.to_owned(),
        message,
    })?;
    tree.validate(edus.len() as u32)
        .map_err(|message| Error::Invariant {
            doc: id.to_owned(),
            message,
        })?;
    let meta = DocMeta {
        id: id.to_owned(),
        title: tree.root().title.clone(),
        format,
        bytes: text.len() as u64,
        edus: edus.len() as u32,
        nodes: tree.nodes.len() as u32,
        tokens: edus.iter().map(|e| u64::from(e.tokens)).sum(),
    };
    Ok(Document {
        meta,
        text,
        edus,
        tree,
    })
}
