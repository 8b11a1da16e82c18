//! EDU coordinates: an [`Edu`] is `text[start..end]` of its document,
//! exactly; a [`Span`] is a closed range of EDU ids, the unit every tree
//! node, DAG node and result item is addressed by.

use rkyv::{Archive, Deserialize, Serialize};

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

    /// Whether `self` and `other` share an EDU.
    pub fn overlaps(&self, other: &Span) -> bool {
        self.first <= other.last && other.first <= self.last
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

#[cfg(test)]
mod tests {
    use super::Span;

    #[test]
    fn spans_overlap_when_they_share_an_edu() {
        let span = Span::new(3, 6);
        assert!(span.overlaps(&Span::new(6, 9)));
        assert!(span.overlaps(&Span::new(0, 3)));
        assert!(span.overlaps(&Span::new(4, 4)));
        assert!(span.overlaps(&Span::new(0, 10)));
        assert!(!span.overlaps(&Span::new(7, 9)));
        assert!(!span.overlaps(&Span::new(0, 2)));
    }
}
