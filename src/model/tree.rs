//! A document's structural tree: document → sections → segments /
//! paragraphs / lists → EDUs (leaves, addressed by span).
//!
//! Nodes are stored flat in pre-order, so no algorithm here recurses and
//! arbitrarily deep inputs cannot overflow the stack. [`Tree::validate`]
//! enforces the invariants every builder must meet.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::edu::Span;

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
    /// A table; its rows are EDUs.
    Table,
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
            NodeKind::Table => "table",
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
            ArchivedNodeKind::Table => NodeKind::Table,
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

/// A document's structural tree; `nodes[i].id == i` and `nodes[0]` is the root.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
#[rkyv(derive(Debug))]
pub struct Tree {
    /// All nodes in pre-order.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// The root node.
    ///
    /// # Panics
    /// Never for a validated tree, which always has a root.
    pub fn root(&self) -> &Node {
        &self.nodes[0]
    }

    /// Checks every structural invariant against a document of `edu_count`
    /// EDUs: dense pre-order ids; the root is a document node covering
    /// `[0, edu_count)`; spans lie in range; parents and children agree;
    /// each child's span lies in its parent's; siblings are in order and do
    /// not overlap; levels increase by one per generation.
    pub fn validate(&self, edu_count: u32) -> Result<(), String> {
        let root = self.nodes.first().ok_or("tree has no nodes")?;
        if edu_count == 0 {
            return Err("document has no EDUs".into());
        }
        if root.kind != NodeKind::Document || root.parent.is_some() || root.level != 0 {
            return Err("node 0 must be a parentless document node at level 0".into());
        }
        if root.span != Span::new(0, edu_count - 1) {
            return Err(format!(
                "root span {} must be [0-{}]",
                root.span,
                edu_count - 1
            ));
        }
        let mut child_refs = 0usize;
        for (index, node) in self.nodes.iter().enumerate() {
            let at = |message: String| format!("node {index}: {message}");
            if node.id as usize != index {
                return Err(at(format!("id {} is not its position", node.id)));
            }
            if node.span.first > node.span.last || node.span.last >= edu_count {
                return Err(at(format!(
                    "span {} outside [0-{}]",
                    node.span,
                    edu_count - 1
                )));
            }
            if let Some(parent_id) = node.parent {
                let parent = self
                    .nodes
                    .get(parent_id as usize)
                    .filter(|p| p.id < node.id)
                    .ok_or_else(|| at(format!("parent {parent_id} does not precede it")))?;
                if !parent.children.contains(&node.id) {
                    return Err(at(format!(
                        "parent {parent_id} does not list it as a child"
                    )));
                }
                if !parent.span.contains(&node.span) {
                    return Err(at(format!(
                        "span {} not inside parent span {}",
                        node.span, parent.span
                    )));
                }
                if node.level != parent.level + 1 {
                    return Err(at(format!(
                        "level {} under a parent at level {}",
                        node.level, parent.level
                    )));
                }
            } else if index != 0 {
                return Err(at("only the root may lack a parent".into()));
            }
            let mut previous: Option<&Node> = None;
            for &child_id in &node.children {
                let child = self
                    .nodes
                    .get(child_id as usize)
                    .ok_or_else(|| at(format!("child {child_id} does not exist")))?;
                if child.parent != Some(node.id) {
                    return Err(at(format!("child {child_id} names another parent")));
                }
                if let Some(prev) = previous
                    && (prev.id >= child.id || prev.span.last >= child.span.first)
                {
                    return Err(at(format!(
                        "children {} {} and {} {} overlap or are out of order",
                        prev.id, prev.span, child.id, child.span
                    )));
                }
                previous = Some(child);
            }
            child_refs += node.children.len();
        }
        if child_refs != self.nodes.len() - 1 {
            return Err("some node is listed as a child twice or never".into());
        }
        Ok(())
    }

    /// The tree as nested `{id, kind, level, title, span: [a, b], children}`
    /// down to `depth` (all when `None`), built bottom-up without recursion.
    pub fn to_json(&self, depth: Option<u16>) -> serde_json::Value {
        let tree = self;
        let max_level = depth.unwrap_or(u16::MAX);
        let mut built: Vec<Option<serde_json::Value>> = vec![None; tree.nodes.len()];
        for node in tree.nodes.iter().rev() {
            if node.level > max_level {
                continue;
            }
            let children: Vec<serde_json::Value> = if node.level == max_level {
                Vec::new()
            } else {
                node.children
                    .iter()
                    .filter_map(|&c| built[c as usize].take())
                    .collect()
            };
            built[node.id as usize] = Some(serde_json::json!({
                "id": node.id,
                "kind": node.kind.name(),
                "level": node.level,
                "title": node.title,
                "span": [node.span.first, node.span.last],
                "children": children,
            }));
        }
        built
            .first_mut()
            .and_then(Option::take)
            .unwrap_or(serde_json::Value::Null)
    }

    /// Ids of the nodes on the path from the root to the deepest node whose span holds `edu`.
    pub fn path_to(&self, edu: u32) -> Vec<u32> {
        let mut path = Vec::new();
        let mut current = self.nodes.first();
        while let Some(node) = current {
            path.push(node.id);
            current = node
                .children
                .iter()
                .map(|&c| &self.nodes[c as usize])
                .find(|c| c.span.first <= edu && edu <= c.span.last);
        }
        path
    }
}
