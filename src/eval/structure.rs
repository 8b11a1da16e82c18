//! How well the tree builder recovers a document's hierarchy from text
//! alone: a Markdown document's heading tree is the reference; its heading
//! markers are stripped, the text is analysed as plain text, and the
//! recovered tree is scored against the reference by tree edit distance
//! (Zhang–Shasha) and exact match.
//!
//! The same reference scores a tree recovered from the document rendered
//! to PDF ([`recover_rendered`]): headings then come back through the PDF
//! path (its outline, or type size, weight and numbering).
//!
//! Both sides are compared as *outline trees*: the root, then every section
//! and cohesion segment (the builder's structure above paragraphs), each
//! labelled with its title's words, lower-cased (so Markdown's inline
//! markup and a renderer's spacing do not count as differences).

use std::collections::HashSet;

use serde::Serialize;

use crate::compute::embed::hashed::words;
use crate::error::Result;
use crate::model::document::{Document, Format};
use crate::model::edu::EduKind;
use crate::model::tree::NodeKind;
use crate::model::tree::Tree;

/// An ordered, labelled tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineTree {
    /// The node's label.
    pub label: String,
    /// Its children in order.
    pub children: Vec<OutlineTree>,
}

impl OutlineTree {
    /// Nodes in the tree.
    pub fn size(&self) -> usize {
        1 + self.children.iter().map(OutlineTree::size).sum::<usize>()
    }

    /// The outline of a structural tree: the root and its section and
    /// segment nodes, keeping their nesting.
    pub fn of(tree: &Tree) -> OutlineTree {
        fn build(tree: &Tree, id: u32) -> Vec<OutlineTree> {
            let node = &tree.nodes[id as usize];
            let children: Vec<OutlineTree> = node
                .children
                .iter()
                .flat_map(|&child| build(tree, child))
                .collect();
            match node.kind {
                NodeKind::Document | NodeKind::Section | NodeKind::Segment => vec![OutlineTree {
                    label: normalise(&node.title),
                    children,
                }],
                // Paragraphs and lists are below the outline; anything
                // outline-like inside them is lifted to their parent.
                NodeKind::Paragraph | NodeKind::List | NodeKind::Table => children,
            }
        }
        let mut roots = build(tree, tree.root().id);
        let mut root = roots.swap_remove(0);
        // The root's title is extractive on both sides: not part of the score.
        root.label = String::new();
        root
    }
}

fn normalise(title: &str) -> String {
    words(title).join(" ")
}

/// Postorder labels and leftmost-leaf descendants of a tree.
fn postorder(tree: &OutlineTree) -> (Vec<&str>, Vec<usize>) {
    fn visit<'a>(
        t: &'a OutlineTree,
        labels: &mut Vec<&'a str>,
        leftmost: &mut Vec<usize>,
    ) -> usize {
        let mut first_leaf = None;
        for child in &t.children {
            let leaf = visit(child, labels, leftmost);
            first_leaf.get_or_insert(leaf);
        }
        let index = labels.len();
        labels.push(&t.label);
        let leaf = first_leaf.unwrap_or(index);
        leftmost.push(leaf);
        leaf
    }
    let (mut labels, mut leftmost) = (Vec::new(), Vec::new());
    visit(tree, &mut labels, &mut leftmost);
    (labels, leftmost)
}

/// Zhang–Shasha tree edit distance: the fewest node insertions, deletions
/// (cost 1 each) and relabellings (cost `relabel` when labels differ) that
/// turn `a` into `b`. `relabel = 0` compares shape only.
pub fn tree_edit_distance(a: &OutlineTree, b: &OutlineTree, relabel: usize) -> usize {
    let (la, lla) = postorder(a);
    let (lb, llb) = postorder(b);
    let keyroots = |leftmost: &[usize]| -> Vec<usize> {
        (0..leftmost.len())
            .filter(|&i| !(i + 1..leftmost.len()).any(|j| leftmost[j] == leftmost[i]))
            .collect()
    };
    let mut tree_dist = vec![vec![0usize; lb.len()]; la.len()];
    for &i in &keyroots(&lla) {
        for &j in &keyroots(&llb) {
            let (li, lj) = (lla[i], llb[j]);
            let (m, n) = (i - li + 2, j - lj + 2);
            let mut forest = vec![vec![0usize; n]; m];
            for x in 1..m {
                forest[x][0] = forest[x - 1][0] + 1;
            }
            for y in 1..n {
                forest[0][y] = forest[0][y - 1] + 1;
            }
            for x in 1..m {
                for y in 1..n {
                    let (i1, j1) = (li + x - 1, lj + y - 1);
                    let delete = forest[x - 1][y] + 1;
                    let insert = forest[x][y - 1] + 1;
                    if lla[i1] == li && llb[j1] == lj {
                        let cost = if la[i1] == lb[j1] { 0 } else { relabel };
                        forest[x][y] = delete.min(insert).min(forest[x - 1][y - 1] + cost);
                        tree_dist[i1][j1] = forest[x][y];
                    } else {
                        let (p, q) = (lla[i1] - li, llb[j1] - lj);
                        forest[x][y] = delete.min(insert).min(forest[p][q] + tree_dist[i1][j1]);
                    }
                }
            }
        }
    }
    tree_dist[la.len() - 1][lb.len() - 1]
}

/// The document's text with its heading markup removed: ATX `#`s (and
/// closing `#`s), setext underlines, and anchor definitions such as
/// `[summary]: #summary` on the line after a heading, so each heading is a
/// bare line.
pub fn strip_heading_markers(doc: &Document) -> String {
    let text = &doc.text;
    let line_end = |from: usize| text[from..].find('\n').map_or(text.len(), |i| from + i);
    let is_markup = |line: &str| {
        let line = line.trim();
        let underline = !line.is_empty() && line.chars().all(|c| c == '=' || c == '-');
        let anchor = line.starts_with('[')
            && line
                .split_once("]:")
                .is_some_and(|(_, target)| target.trim().starts_with('#'));
        underline || anchor
    };
    let mut cuts: Vec<std::ops::Range<usize>> = Vec::new();
    for edu in doc.edus.iter().filter(|e| e.kind == EduKind::Heading) {
        let (start, end) = (edu.start as usize, edu.end as usize);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        cuts.push(line_start..start);
        let heading_end = line_end(end);
        cuts.push(end..heading_end);
        let mut next = (heading_end + 1).min(text.len());
        while next < text.len() && is_markup(&text[next..line_end(next)]) {
            cuts.push(next..line_end(next));
            next = (line_end(next) + 1).min(text.len());
        }
    }
    cuts.sort_by_key(|c| c.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for cut in cuts {
        if cut.start >= at {
            out.push_str(&text[at..cut.start]);
            at = cut.end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// The score of one document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovery {
    /// Document name.
    pub document: String,
    /// Nodes of the reference outline (root included).
    pub reference_nodes: usize,
    /// Nodes of the recovered outline.
    pub recovered_nodes: usize,
    /// Tree edit distance with titles.
    pub distance: usize,
    /// Tree edit distance of shape alone (relabelling free).
    pub shape_distance: usize,
    /// Share of reference headings found as a recovered title.
    pub heading_recall: f64,
}

impl Recovery {
    /// `distance` over the larger outline: 0 identical, 1 nothing shared.
    pub fn normalised_distance(&self) -> f64 {
        self.distance as f64 / self.reference_nodes.max(self.recovered_nodes) as f64
    }
}

/// Scores how the plain-text builder recovers `markdown`'s heading tree.
pub fn recover(name: &str, markdown: String) -> Result<Recovery> {
    let original = crate::ingest::pipeline::analyze("reference", markdown, Format::Markdown)?;
    let stripped = strip_heading_markers(&original);
    let rebuilt = crate::ingest::pipeline::analyze("recovered", stripped, Format::Text)?;
    Ok(score(name, &original.tree, &rebuilt.tree))
}

/// Scores how the PDF path recovers `markdown`'s heading tree from `pdf`,
/// the same document rendered to PDF.
pub fn recover_rendered(name: &str, markdown: String, pdf: Vec<u8>) -> Result<Recovery> {
    let original = crate::ingest::pipeline::analyze("reference", markdown, Format::Markdown)?;
    let rebuilt = crate::ingest::pipeline::analyze_pdf("recovered", pdf)?;
    Ok(score(name, &original.tree, &rebuilt.tree))
}

/// Scores `recovered` against `reference`.
fn score(name: &str, reference: &Tree, recovered: &Tree) -> Recovery {
    let reference = OutlineTree::of(reference);
    let recovered = OutlineTree::of(recovered);
    let titles = |t: &OutlineTree| -> Vec<String> {
        fn walk(t: &OutlineTree, out: &mut Vec<String>) {
            for child in &t.children {
                out.push(child.label.clone());
                walk(child, out);
            }
        }
        let mut out = Vec::new();
        walk(t, &mut out);
        out
    };
    let wanted = titles(&reference);
    let found: HashSet<String> = titles(&recovered).into_iter().collect();
    let heading_recall = if wanted.is_empty() {
        1.0
    } else {
        wanted.iter().filter(|t| found.contains(*t)).count() as f64 / wanted.len() as f64
    };
    Recovery {
        document: name.to_owned(),
        reference_nodes: reference.size(),
        recovered_nodes: recovered.size(),
        distance: tree_edit_distance(&reference, &recovered, 1),
        shape_distance: tree_edit_distance(&reference, &recovered, 0),
        heading_recall,
    }
}

/// Means over documents.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoverySummary {
    /// Documents scored.
    pub documents: usize,
    /// Share recovered exactly (distance 0).
    pub exact_match_rate: f64,
    /// Share whose shape was recovered exactly.
    pub shape_match_rate: f64,
    /// Mean tree edit distance.
    pub mean_distance: f64,
    /// Mean distance over the larger outline.
    pub mean_normalised_distance: f64,
    /// Mean shape distance.
    pub mean_shape_distance: f64,
    /// Mean heading recall.
    pub mean_heading_recall: f64,
}

/// Summarises per-document scores.
pub fn summarise_recovery(scores: &[Recovery]) -> RecoverySummary {
    let n = scores.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Recovery) -> f64| scores.iter().map(f).sum::<f64>() / n;
    RecoverySummary {
        documents: scores.len(),
        exact_match_rate: mean(&|r| f64::from(u8::from(r.distance == 0))),
        shape_match_rate: mean(&|r| f64::from(u8::from(r.shape_distance == 0))),
        mean_distance: mean(&|r| r.distance as f64),
        mean_normalised_distance: mean(&Recovery::normalised_distance),
        mean_shape_distance: mean(&|r| r.shape_distance as f64),
        mean_heading_recall: mean(&|r| r.heading_recall),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(label: &str, children: Vec<OutlineTree>) -> OutlineTree {
        OutlineTree {
            label: label.to_owned(),
            children,
        }
    }

    #[test]
    fn zhang_shasha_paper_example_is_two() {
        // f(d(a, c(b)), e) → f(c(d(a, b)), e): delete c under d... two edits.
        let a = t(
            "f",
            vec![
                t("d", vec![t("a", vec![]), t("c", vec![t("b", vec![])])]),
                t("e", vec![]),
            ],
        );
        let b = t(
            "f",
            vec![
                t("c", vec![t("d", vec![t("a", vec![]), t("b", vec![])])]),
                t("e", vec![]),
            ],
        );
        assert_eq!(tree_edit_distance(&a, &b, 1), 2);
        assert_eq!(tree_edit_distance(&b, &a, 1), 2);
    }

    #[test]
    fn relabelling_costs_one_unless_shape_only() {
        let a = t("r", vec![t("x", vec![])]);
        let b = t("r", vec![t("y", vec![])]);
        assert_eq!(tree_edit_distance(&a, &b, 1), 1);
        assert_eq!(tree_edit_distance(&a, &b, 0), 0);
        assert_eq!(tree_edit_distance(&a, &t("r", vec![]), 1), 1);
    }

    #[test]
    fn stripping_markers_leaves_heading_lines_and_recovery_scores_them() {
        let markdown = "# Summary\n[summary]: #summary\n\nA short text about things.\n\n## Details ##\n\nMore text here.\n\nSetext\n======\n\nLast words.\n";
        let doc =
            crate::ingest::pipeline::analyze("x", markdown.to_owned(), Format::Markdown).unwrap();
        let stripped = strip_heading_markers(&doc);
        assert_eq!(
            stripped,
            "Summary\n\n\nA short text about things.\n\nDetails\n\nMore text here.\n\nSetext\n\n\nLast words.\n"
        );
        let score = recover("x", markdown.to_owned()).unwrap();
        assert_eq!(score.reference_nodes, 4);
        // Headings come back as flat sections: "Details" loses its nesting.
        assert_eq!(score.recovered_nodes, 4);
        assert_eq!(score.heading_recall, 1.0);
        assert_eq!(score.distance, 2);
        assert_eq!(score.shape_distance, 2);
    }
}
