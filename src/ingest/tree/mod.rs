//! Building the structural tree ([`Tree`]: document → sections → segments /
//! paragraphs / lists → EDUs) over a segmented document: the
//! [`TreeBuilder`] trait, the default [`LayoutTreeBuilder`] (headings,
//! blocks, cohesion segments for wide runs, extractive titles) and
//! LingoEDU's outline format ([`outline`]) and its structurer through a
//! chat model ([`llm`]). Every builder's tree must pass
//! [`Tree::validate`], which the pipeline checks.

mod builder;
mod cohesion;
mod layout_builder;
pub mod llm;
pub mod outline;
mod title;

pub use crate::model::tree::Tree;
pub use builder::{BlockEdus, MAX_FANOUT, StructureInput, TreeBuilder};
pub use layout_builder::LayoutTreeBuilder;
pub use outline::OutlineTreeBuilder;
