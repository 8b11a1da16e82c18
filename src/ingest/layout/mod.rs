//! Layout extraction: turns the bytes of one document into the text that is
//! stored and a flat list of layout blocks (headings, paragraphs, list items,
//! code, tables) addressed by byte ranges into that text.
//!
//! Every format module produces a [`Layout`]; segmentation and tree building
//! work on layouts only, so adding a format never touches them.

use std::ops::Range;

use crate::model::metadata::Metadata;

mod front_matter;
pub mod html;
pub mod markdown;
pub mod pdf;
pub mod plain;

/// What a layout block is; decides how it is segmented and where it hangs in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A heading of the given level (1 = top).
    Heading {
        /// Heading level, 1..=6 for Markdown/HTML, numbering depth for plain text.
        level: u8,
    },
    /// Running prose, split into sentence/clause EDUs.
    Paragraph,
    /// One list item's own text (nested items are separate blocks), kept whole.
    ListItem {
        /// List nesting depth, 0 for a top-level list.
        depth: u16,
    },
    /// A code block, kept whole.
    Code,
    /// A table, kept whole.
    Table,
}

/// One block: its kind and the byte range of its content in [`Layout::text`].
///
/// The range is trimmed of surrounding whitespace and markup (`#` markers,
/// list bullets, code fences), is non-empty and lies on `char` boundaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Kind of the block.
    pub kind: BlockKind,
    /// Byte range of the block's content in the layout text.
    pub range: Range<usize>,
}

/// The stored text of a document and its blocks in document order.
///
/// Blocks do not overlap and are sorted by `range.start`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layout {
    /// The text that is stored and that every coordinate points into.
    pub text: String,
    /// The blocks, in document order.
    pub blocks: Vec<Block>,
    /// The document's title where the source sets one apart (a PDF's
    /// cover), as written in `text`: the tree's root takes it.
    pub title: Option<String>,
    /// What the source says about itself (an HTML page's `<title>` and
    /// `<meta>`, a PDF's information dictionary, Markdown front matter):
    /// the document's metadata, under what the caller gives.
    pub metadata: Metadata,
}

/// Trims ASCII/Unicode whitespace off both ends of `range` within `text`.
pub(crate) fn trim_range(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    let start = range.start + (slice.len() - slice.trim_start().len());
    let end = range.end - (slice.len() - slice.trim_end().len());
    if start >= end {
        start..start
    } else {
        start..end
    }
}
