//! What a tree builder sees ([`StructureInput`]) and the [`TreeBuilder`]
//! trait every builder implements.

use crate::ingest::layout::BlockKind;
use crate::model::edu::Edu;

use crate::model::tree::Tree;

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
