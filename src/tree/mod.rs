//! The structural tree of a document: document → sections → segments /
//! paragraphs / lists → EDUs (leaves, addressed by span).
//!
//! Nodes are stored flat in pre-order, so no algorithm here recurses and
//! arbitrarily deep inputs cannot overflow the stack. [`Tree::validate`]
//! enforces the invariants every builder must meet.

use crate::layout::BlockKind;
use crate::model::edu::Edu;

mod cohesion;
mod layout_builder;
pub mod outline;
mod title;

pub use layout_builder::LayoutTreeBuilder;
pub use outline::OutlineTreeBuilder;

pub use crate::model::tree::Tree;

/// Most direct children (EDUs and nodes together) a builder leaves under one
/// node before grouping them into cohesion segments.
pub const MAX_FANOUT: usize = 16;

/// One layout block after segmentation: its kind and the EDUs it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEdus {
    /// The layout block kind.
    pub kind: BlockKind,
    /// The EDU ids of the block, `first..end`.
    pub edus: std::ops::Range<u32>,
}

/// Everything a tree builder may look at.
#[derive(Debug, Clone, Copy)]
pub struct StructureInput<'a> {
    /// The stored text.
    pub text: &'a str,
    /// The EDUs, in order.
    pub edus: &'a [Edu],
    /// The layout blocks with their EDUs, in order.
    pub blocks: &'a [BlockEdus],
}

/// Builds a tree over a segmented document. Implementations must return a
/// tree that passes [`Tree::validate`]; the ingest pipeline checks it.
pub trait TreeBuilder: Send + Sync {
    /// Builds the tree, or says why it cannot.
    fn build(&self, input: &StructureInput<'_>) -> Result<Tree, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::analyze;
    use crate::model::document::Format;

    fn sample() -> (Tree, u32) {
        let doc = analyze(
            "t",
            "# A\n\nOne two three four. Five six seven eight.\n\n## B\n\n- x\n- y\n".to_owned(),
            Format::Markdown,
        )
        .unwrap();
        (doc.tree, doc.edus.len() as u32)
    }

    #[test]
    fn valid_tree_passes_and_paths_descend() {
        let (tree, count) = sample();
        tree.validate(count).unwrap();
        let path = tree.path_to(count - 1);
        assert_eq!(path[0], 0);
        assert!(
            path.windows(2)
                .all(|w| tree.nodes[w[1] as usize].parent == Some(w[0]))
        );
    }

    #[test]
    fn validate_rejects_each_broken_invariant() {
        let (tree, count) = sample();
        type Breaker = Box<dyn Fn(&mut Tree)>;
        let broken: Vec<(&str, Breaker)> = vec![
            ("root span", Box::new(|t| t.nodes[0].span.last -= 1)),
            ("outside", Box::new(|t| t.nodes[1].span.last = 1000)),
            ("parent", Box::new(|t| t.nodes[4].span.first = 0)),
            ("level", Box::new(|t| t.nodes[1].level = 5)),
            ("id", Box::new(|t| t.nodes[1].id = 7)),
            (
                "overlap",
                Box::new(|t| {
                    let second = t.nodes[1].children[1] as usize;
                    t.nodes[second].span.first = t.nodes[2].span.first;
                }),
            ),
            (
                "orphan child list",
                Box::new(|t| t.nodes[0].children.clear()),
            ),
        ];
        for (what, breaker) in broken {
            let mut copy = tree.clone();
            breaker(&mut copy);
            assert!(copy.validate(count).is_err(), "{what} not detected");
        }
    }
}
