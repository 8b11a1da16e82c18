//! The persistent record types of one document: its metadata, its EDU
//! coordinates and its structural tree.
//!
//! These types are archived with rkyv and read in place from the store, so
//! they are plain data: ids are dense `u32`s, spans are closed EDU ranges.

use rkyv::{Archive, Deserialize, Serialize};

/// The input format a document was parsed as.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[rkyv(compare(PartialEq), derive(Debug, Clone, Copy, PartialEq, Eq))]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Plain text; stored unchanged.
    Text,
    /// CommonMark/GFM Markdown; stored unchanged.
    Markdown,
    /// HTML; the extracted readable text is stored.
    Html,
}

impl Format {
    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Html => "html",
        }
    }
}

/// What layout block an EDU came from.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[rkyv(compare(PartialEq), derive(Debug, Clone, Copy, PartialEq, Eq))]
#[serde(rename_all = "lowercase")]
pub enum EduKind {
    /// A sentence or clause of running prose.
    Text,
    /// The text of a heading (also its section's title).
    Heading,
    /// One list item, kept whole.
    Item,
    /// A code block, kept whole.
    Code,
    /// A table, kept whole.
    Table,
}

/// One elementary discourse unit: `text[start..end]` of its document, exactly.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[rkyv(compare(PartialEq), derive(Debug))]
pub struct Edu {
    /// Dense id in document order, starting at 0.
    pub id: u32,
    /// First byte of the EDU in the stored text.
    pub start: u32,
    /// One past the last byte of the EDU in the stored text.
    pub end: u32,
    /// Length in o200k_base tokens.
    pub tokens: u32,
    /// The block kind it came from.
    pub kind: EduKind,
}

/// A closed range of EDU ids `[first, last]`.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(compare(PartialEq), derive(Debug, Clone, Copy, PartialEq, Eq))]
pub struct Span {
    /// First EDU id in the span.
    pub first: u32,
    /// Last EDU id in the span (inclusive).
    pub last: u32,
}

impl Span {
    /// A span covering `first..=last`.
    pub fn new(first: u32, last: u32) -> Span {
        Span { first, last }
    }

    /// Whether `other` lies entirely inside `self`.
    pub fn contains(&self, other: &Span) -> bool {
        self.first <= other.first && other.last <= self.last
    }

    /// Number of EDUs in the span.
    pub fn len(&self) -> u32 {
        self.last - self.first + 1
    }

    /// Always false: a span holds at least one EDU.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}-{}]", self.first, self.last)
    }
}

/// What a tree node stands for.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[rkyv(compare(PartialEq), derive(Debug, Clone, Copy, PartialEq, Eq))]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// The root; covers the whole document.
    Document,
    /// A headed section.
    Section,
    /// A segment found by lexical cohesion where the layout gave no structure.
    Segment,
    /// A paragraph of two or more EDUs.
    Paragraph,
    /// A list; its items are EDUs, nested lists are child nodes.
    List,
}

impl NodeKind {
    /// The lowercase name used in listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Document => "document",
            NodeKind::Section => "section",
            NodeKind::Segment => "segment",
            NodeKind::Paragraph => "paragraph",
            NodeKind::List => "list",
        }
    }
}

impl From<&ArchivedNodeKind> for NodeKind {
    fn from(kind: &ArchivedNodeKind) -> NodeKind {
        match kind {
            ArchivedNodeKind::Document => NodeKind::Document,
            ArchivedNodeKind::Section => NodeKind::Section,
            ArchivedNodeKind::Segment => NodeKind::Segment,
            ArchivedNodeKind::Paragraph => NodeKind::Paragraph,
            ArchivedNodeKind::List => NodeKind::List,
        }
    }
}

/// One node of the structural tree.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[rkyv(compare(PartialEq), derive(Debug))]
pub struct Node {
    /// Dense id in pre-order; the root is 0.
    pub id: u32,
    /// What the node stands for.
    pub kind: NodeKind,
    /// Depth in the tree; the root is 0.
    pub level: u16,
    /// A heading, or an extractive title (a short span of the node's own text).
    pub title: String,
    /// The EDUs the node covers.
    pub span: Span,
    /// Parent node id; `None` for the root.
    pub parent: Option<u32>,
    /// Child node ids, in document order.
    pub children: Vec<u32>,
}

/// Summary of one stored document, kept as its own small record so listings
/// never read texts or trees.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[rkyv(compare(PartialEq), derive(Debug))]
pub struct DocMeta {
    /// The document id.
    pub id: String,
    /// The root node's title.
    pub title: String,
    /// The format the document was parsed as.
    pub format: Format,
    /// Bytes of stored text.
    pub bytes: u64,
    /// Number of EDUs.
    pub edus: u32,
    /// Number of tree nodes.
    pub nodes: u32,
    /// Total o200k_base tokens over all EDUs.
    pub tokens: u64,
}

impl DocMeta {
    /// The listing form `{id, title, edus, nodes, tokens, bytes}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id, "title": self.title, "edus": self.edus,
            "nodes": self.nodes, "tokens": self.tokens, "bytes": self.bytes,
        })
    }
}

/// A fully analysed document, ready to be written in one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Summary record.
    pub meta: DocMeta,
    /// The stored text every coordinate points into.
    pub text: String,
    /// EDUs in document order.
    pub edus: Vec<Edu>,
    /// The structural tree, nodes in pre-order.
    pub tree: crate::model::tree::Tree,
}

/// The embedding vectors of one document, row-major: one row of
/// `dimension` values per tree node (in node id order) and per EDU (in EDU
/// id order). Stored beside the document in the same atomic batch, so the
/// vector index can be rebuilt without embedding anything again.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[rkyv(derive(Debug))]
pub struct DocVectors {
    /// Length of every row.
    pub dimension: u32,
    /// `nodes × dimension` values.
    pub nodes: Vec<f32>,
    /// `edus × dimension` values.
    pub edus: Vec<f32>,
}

/// Tokens of leading text in a node's representation.
pub const REPRESENTATIVE_TOKENS: u32 = 128;

/// What node-level ranking scores for `node`: its title, its children's
/// titles, and its leading non-heading EDUs up to [`REPRESENTATIVE_TOKENS`].
pub fn representation(doc: &Document, node: &Node) -> String {
    let mut text = node.title.clone();
    for &child in &node.children {
        text.push('\n');
        text.push_str(&doc.tree.nodes[child as usize].title);
    }
    let mut tokens = 0;
    for edu in &doc.edus[node.span.first as usize..=node.span.last as usize] {
        if tokens >= REPRESENTATIVE_TOKENS {
            break;
        }
        if edu.kind != EduKind::Heading {
            text.push('\n');
            text.push_str(&doc.text[edu.start as usize..edu.end as usize]);
            tokens += edu.tokens;
        }
    }
    text
}
