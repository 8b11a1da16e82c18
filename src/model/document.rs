//! The persistent record types of one document: its metadata, its EDU
//! coordinates and its structural tree.
//!
//! These types are archived with rkyv and read in place from the store, so
//! they are plain data: ids are dense `u32`s, spans are closed EDU ranges.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::edu::{Edu, EduKind};
use crate::model::metadata::Metadata;
use crate::model::pages::PageLayout;
use crate::model::tree::{Node, Tree};

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
    /// PDF; the extracted text is stored, with where each line of it lies
    /// on its page ([`PageLayout`]).
    Pdf,
}

impl Format {
    /// The lowercase name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Markdown => "markdown",
            Format::Html => "html",
            Format::Pdf => "pdf",
        }
    }

    /// The format [`Format::name`] calls `name`.
    pub fn from_name(name: &str) -> Option<Format> {
        [Format::Text, Format::Markdown, Format::Html, Format::Pdf]
            .into_iter()
            .find(|format| format.name() == name)
    }
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
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Summary record.
    pub meta: DocMeta,
    /// The stored text every coordinate points into.
    pub text: String,
    /// EDUs in document order.
    pub edus: Vec<Edu>,
    /// The structural tree, nodes in pre-order.
    pub tree: Tree,
    /// Where the text lies on the pages of the file (PDFs only).
    pub pages: Option<PageLayout>,
    /// The caller's (and the source's) facts about the document, that
    /// queries filter on.
    pub metadata: Metadata,
}

impl Document {
    /// Checks that its parts agree: EDUs are dense, ordered,
    /// non-overlapping and slice the text on char boundaries; the tree
    /// passes [`Tree::validate`]; a PDF's pages pass
    /// [`PageLayout::validate`]; the counts in the metadata match. Says
    /// what is wrong otherwise.
    pub fn validate(&self) -> Result<(), String> {
        let mut previous_end = 0u32;
        for (index, edu) in self.edus.iter().enumerate() {
            let ok = edu.id as usize == index
                && edu.start < edu.end
                && edu.start >= previous_end
                && (edu.end as usize) <= self.text.len()
                && self.text.is_char_boundary(edu.start as usize)
                && self.text.is_char_boundary(edu.end as usize);
            if !ok {
                return Err(format!(
                    "EDU {index} has bad coordinates {}..{}",
                    edu.start, edu.end
                ));
            }
            previous_end = edu.end;
        }
        self.tree.validate(self.edus.len() as u32)?;
        if let Some(pages) = &self.pages {
            (pages.validate(self.text.len() as u32)).map_err(|m| format!("pages: {m}"))?;
        }
        let counts_match = self.meta.edus as usize == self.edus.len()
            && self.meta.nodes as usize == self.tree.nodes.len()
            && self.meta.bytes as usize == self.text.len();
        if !counts_match {
            return Err("metadata counts disagree with the records".into());
        }
        Ok(())
    }
}

/// The embedding vectors of one document, row-major: one row of
/// `dimension` values per tree node (in node id order) and per EDU (in EDU
/// id order). Stored beside the document in the same atomic batch, so the
/// vector index can be rebuilt without embedding anything again: as
/// [`PackedVectors`] since store format 7 (older stores hold this form
/// until the document is written again).
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

/// A document's vectors as ingest holds them and the store keeps them:
/// [`DocVectors`] with every row in 8 bits, a quarter of the size. Ingest
/// quantises each row as it is embedded (`compute::quantize::push_row`),
/// so what a document was built from and what the store gives back are the
/// same numbers.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[rkyv(derive(Debug))]
pub struct PackedVectors {
    /// Length of every row.
    pub dimension: u32,
    /// One row per tree node, in node id order.
    pub nodes: QuantizedRows,
    /// One row per EDU, in EDU id order.
    pub edus: QuantizedRows,
}

/// Rows of 8-bit codes: value `j` of row `i` is
/// `codes[i × dimension + j] × scales[i]`. Every scale is zero (a zero row)
/// or a power of two, so these values are exact in `f32` and quantising
/// them again gives the same codes.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[rkyv(derive(Debug))]
pub struct QuantizedRows {
    /// `rows × dimension` codes, row-major.
    pub codes: Vec<i8>,
    /// One scale per row.
    pub scales: Vec<f32>,
}

impl QuantizedRows {
    /// Row `i`'s codes (of `dimension` columns) and scale, if it is there.
    pub fn row(&self, i: usize, dimension: usize) -> Option<(&[i8], f32)> {
        let codes = self.codes.get(i * dimension..(i + 1) * dimension)?;
        Some((codes, *self.scales.get(i)?))
    }

    /// Every whole row's values, row-major.
    pub fn to_f32(&self, dimension: usize) -> Vec<f32> {
        let mut values = Vec::with_capacity(self.codes.len());
        for (i, &scale) in self.scales.iter().enumerate() {
            if let Some((codes, _)) = self.row(i, dimension) {
                values.extend(codes.iter().map(|&c| f32::from(c) * scale));
            }
        }
        values
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::edu::{EduKind, Span};
    use crate::model::tree::{Node, NodeKind};

    /// "One. Two." as two EDUs under a root.
    fn two_sentences() -> Document {
        let edu = |id, start, end| Edu {
            id,
            start,
            end,
            tokens: 2,
            kind: EduKind::Text,
        };
        Document {
            meta: DocMeta {
                id: "d".into(),
                title: "d".into(),
                format: Format::Text,
                bytes: 9,
                edus: 2,
                nodes: 1,
                tokens: 4,
            },
            text: "One. Two.".into(),
            edus: vec![edu(0, 0, 4), edu(1, 5, 9)],
            tree: Tree {
                nodes: vec![Node {
                    id: 0,
                    kind: NodeKind::Document,
                    level: 0,
                    title: "d".into(),
                    span: Span::new(0, 1),
                    parent: None,
                    children: Vec::new(),
                }],
            },
            pages: None,
            metadata: Metadata::default(),
        }
    }

    #[test]
    fn a_document_whose_parts_agree_is_valid_and_each_disagreement_is_named() {
        assert_eq!(two_sentences().validate(), Ok(()));
        let mut overlapping = two_sentences();
        overlapping.edus[1].start = 3;
        assert_eq!(
            overlapping.validate(),
            Err("EDU 1 has bad coordinates 3..9".into())
        );
        let mut past_the_text = two_sentences();
        past_the_text.text.truncate(7);
        past_the_text.meta.bytes = 7;
        assert!(past_the_text.validate().unwrap_err().contains("EDU 1"));
        let mut miscounted = two_sentences();
        miscounted.meta.edus = 3;
        assert_eq!(
            miscounted.validate(),
            Err("metadata counts disagree with the records".into())
        );
        let mut bad_tree = two_sentences();
        bad_tree.tree.nodes[0].span = Span::new(0, 5);
        assert!(bad_tree.validate().is_err());
    }
}
