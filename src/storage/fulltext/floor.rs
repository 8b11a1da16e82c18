//! [`FlooredTop`]: the best `k` hits of a query, as tantivy's top-docs
//! collector finds them, with a score floor shared by every segment and
//! every index ranked for the same result. Each segment's block-max WAND
//! walk skips what cannot beat its own `k`-th best; on its own it starts
//! from nothing in every segment (and a shard set ranks several indexes),
//! so each segment and index would collect its own `k`. Any collector's
//! `k`-th best is a lower bound of the whole result's `k`-th best, so a
//! collector whose heap is full raises the shared floor to it, and every
//! walk skips what is under the floor. The floor is lowered by
//! [`FLOOR_SLACK`] before it prunes: the hits are scored again afterwards
//! in a fixed order (`rescore`), which may move a score by a rounding
//! step, and a hit that could tie the cut after that is kept.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, Ordering as Atomic};

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::Weight;
use tantivy::{DocAddress, DocId, Score, SegmentOrdinal, SegmentReader};

/// How far under the shared floor a hit is still collected, relative to
/// the floor: far above the rounding of a sum of a few dozen f32 terms.
const FLOOR_SLACK: f32 = 1e-4;

/// The best score that every hit of a result must reach, raised as
/// collectors fill: shared by the rankings that make one result.
#[derive(Debug)]
pub(crate) struct SharedFloor(AtomicU32);

impl SharedFloor {
    /// No floor yet.
    pub(crate) fn new() -> SharedFloor {
        SharedFloor(AtomicU32::new(Score::MIN.to_bits()))
    }

    /// What a walk may skip: scores at or under this.
    fn pruning(&self) -> Score {
        let floor = Score::from_bits(self.0.load(Atomic::Relaxed));
        if floor == Score::MIN {
            Score::MIN
        } else {
            floor - floor.abs() * FLOOR_SLACK
        }
    }

    /// Raises the floor to `score` when that is higher.
    fn raise(&self, score: Score) {
        let mut current = self.0.load(Atomic::Relaxed);
        while Score::from_bits(current) < score {
            match self.0.compare_exchange_weak(
                current,
                score.to_bits(),
                Atomic::Relaxed,
                Atomic::Relaxed,
            ) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }
}

/// The best `limit` hits by score (ties: the lower document id), each
/// segment's walk pruned by `floor`. Only a collector of the whole
/// result's count may raise the floor (`raises`): the `k`-th best of a
/// smaller heap (an index with fewer entries than the result asks for) is
/// no bound on the result's.
pub(crate) struct FlooredTop<'a> {
    pub(crate) limit: usize,
    pub(crate) raises: bool,
    pub(crate) floor: &'a SharedFloor,
}

impl Collector for FlooredTop<'_> {
    type Fruit = Vec<(Score, DocAddress)>;
    type Child = Unused;

    fn for_segment(&self, _: SegmentOrdinal, _: &SegmentReader) -> tantivy::Result<Unused> {
        Ok(Unused)
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(Score, DocAddress)>>) -> tantivy::Result<Self::Fruit> {
        let mut hits: Vec<(Score, DocAddress)> = fruits.into_iter().flatten().collect();
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        hits.truncate(self.limit);
        Ok(hits)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Vec<(Score, DocAddress)>> {
        let mut top = Heap::new(self.limit);
        let alive = reader.alive_bitset();
        weight.for_each_pruning(self.floor.pruning(), reader, &mut |doc, score| {
            if alive.is_none_or(|alive| alive.is_alive(doc)) {
                top.push(score, doc);
                if let Some(kth) = top.kth().filter(|_| self.raises) {
                    self.floor.raise(kth);
                }
            }
            top.kth().unwrap_or(Score::MIN).max(self.floor.pruning())
        })?;
        Ok(top
            .into_vec()
            .into_iter()
            .map(|(score, doc)| (score, DocAddress::new(segment_ord, doc)))
            .collect())
    }
}

/// The per-document path, never taken: [`FlooredTop`] collects whole
/// segments.
pub(crate) struct Unused;

impl SegmentCollector for Unused {
    type Fruit = Vec<(Score, DocAddress)>;

    fn collect(&mut self, _: DocId, _: Score) {}

    fn harvest(self) -> Self::Fruit {
        Vec::new()
    }
}

/// A hit in the heap: a higher score is greater, a lower document id wins
/// ties.
struct Entry(Score, DocId);

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// The best `limit` hits seen, in document order as a walk gives them (an
/// equal score does not displace an earlier, lower document).
struct Heap {
    entries: BinaryHeap<Reverse<Entry>>,
    limit: usize,
}

impl Heap {
    fn new(limit: usize) -> Heap {
        Heap {
            entries: BinaryHeap::with_capacity(limit),
            limit,
        }
    }

    fn push(&mut self, score: Score, doc: DocId) {
        if self.entries.len() < self.limit {
            self.entries.push(Reverse(Entry(score, doc)));
        } else if self.kth().is_some_and(|kth| score > kth)
            && let Some(mut least) = self.entries.peek_mut()
        {
            *least = Reverse(Entry(score, doc));
        }
    }

    /// The `limit`-th best score, once `limit` hits are in.
    fn kth(&self) -> Option<Score> {
        (self.entries.len() == self.limit && self.limit > 0)
            .then(|| self.entries.peek().map(|Reverse(entry)| entry.0))
            .flatten()
    }

    fn into_vec(self) -> Vec<(Score, DocId)> {
        (self.entries.into_vec().into_iter())
            .map(|Reverse(Entry(score, doc))| (score, doc))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_keeps_the_best_and_the_earlier_document_of_a_tie() {
        let mut heap = Heap::new(3);
        for (doc, score) in [(0, 1.0), (1, 5.0), (2, 3.0)] {
            heap.push(score, doc);
        }
        assert_eq!(heap.kth(), Some(1.0));
        heap.push(3.0, 3); // beats the third, ties the second: kept after it
        heap.push(3.0, 4); // ties the (new) third: the earlier one stays
        let mut kept = heap.into_vec();
        kept.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        assert_eq!(kept, vec![(5.0, 1), (3.0, 2), (3.0, 3)]);
        assert_eq!(Heap::new(0).kth(), None);
    }

    #[test]
    fn the_floor_only_rises_and_prunes_a_little_under_itself() {
        let floor = SharedFloor::new();
        assert_eq!(floor.pruning(), Score::MIN);
        floor.raise(8.0);
        floor.raise(2.0);
        let pruning = floor.pruning();
        assert!(
            pruning < 8.0 && pruning > 8.0 - 8.0 * 2.0 * FLOOR_SLACK,
            "{pruning}"
        );
        // A rescored score a rounding step under the floor is still above
        // what is pruned.
        assert!(8.0f32.next_down() > pruning);
    }
}
