//! Tests of the index as a whole: written by [`FullText`], read by
//! [`FullTextReader`](super::FullTextReader).

use std::path::Path;

use tantivy::index::SegmentId;

use super::reader::FullTextReader;
use super::set::FullTextSet;
use super::writer::{FullText, MERGED_SEGMENT_ENTRIES};
use crate::error::Error;
use crate::model::document::Format;
use crate::model::edu::Span;
use crate::model::rank::Target;

#[test]
fn one_commit_per_process_keeps_few_segments() {
    // As `session add` does it: open, write one document, commit, drop.
    let dir = tempfile::tempdir().unwrap();
    let writes = 30u64;
    for seq in 1..=writes {
        let mut index = FullText::open(dir.path()).unwrap();
        let text = format!("Turn number {seq} mentions the lighthouse.\n");
        let doc = crate::ingest::pipeline::analyze(&format!("d{seq}"), text, Format::Text).unwrap();
        index.replace(&doc).unwrap();
        index.commit(seq).unwrap();
    }
    let index = FullText::open(dir.path()).unwrap();
    let segments = index.segment_count();
    assert!(segments < 8, "{segments} segments after {writes} commits");
    assert_eq!(
        index.applied_seq().unwrap(),
        writes,
        "merges keep the payload"
    );
    let reader = index.reader();
    let hits = FullTextSet::of(&reader)
        .rank("lighthouse", Target::Edus, None, 100)
        .unwrap();
    assert_eq!(
        hits.len() as u64,
        writes,
        "every document survives the merges"
    );
}

/// Commits document `a`, "The lamp is lit.", as change 1 of a new
/// index in `dir`, and closes the index.
fn commit_one_document(dir: &Path) {
    let doc =
        crate::ingest::pipeline::analyze("a", "The lamp is lit.\n".into(), Format::Text).unwrap();
    let mut index = FullText::open(dir).unwrap();
    index.replace(&doc).unwrap();
    index.commit(1).unwrap();
}

#[test]
fn a_prepared_commit_shows_nothing_until_committed_and_dropped_stays_pending() {
    let dir = tempfile::tempdir().unwrap();
    commit_one_document(dir.path());
    let mut index = FullText::open(dir.path()).unwrap();
    let doc = |id: &str, text: &str| {
        crate::ingest::pipeline::analyze(id, format!("{text}\n"), Format::Text).unwrap()
    };
    let found = |index: &FullText, word: &str| {
        let hits = FullTextSet::of(&index.reader())
            .rank(word, Target::Edus, None, 10)
            .unwrap();
        hits.len()
    };
    index.replace(&doc("b", "The kettle sings.")).unwrap();
    drop(index.prepare_commit(2).unwrap());
    assert_eq!(found(&index, "kettle"), 0);
    assert_eq!(index.applied_seq().unwrap(), 1);
    // Dropped uncommitted, the change is still pending: the next
    // commit holds it...
    index.prepare_commit(2).unwrap().commit().unwrap();
    assert_eq!(found(&index, "kettle"), 1);
    assert_eq!(index.applied_seq().unwrap(), 2);
    // ...unless a rollback dropped it first.
    index.replace(&doc("c", "The kettle boils.")).unwrap();
    drop(index.prepare_commit(3).unwrap());
    index.rollback().unwrap();
    index.commit(3).unwrap();
    assert_eq!(found(&index, "kettle"), 1);
    assert_eq!(found(&index, "boils"), 0);
    drop(index);
    let index = FullText::open(dir.path()).unwrap();
    assert_eq!(found(&index, "kettle"), 1);
    assert_eq!(found(&index, "lamp"), 1);
    assert_eq!(index.applied_seq().unwrap(), 3);
}

#[test]
fn reading_never_makes_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    commit_one_document(dir.path());
    let mut index = FullText::open(dir.path()).unwrap();
    let hits = FullTextSet::of(&index.reader())
        .rank("lamp", Target::Edus, None, 10)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(index.applied_seq().unwrap(), 1);
    index.rollback().unwrap();
    assert!(index.writer.is_none(), "a read made the writer");
    index.start_writing().unwrap();
    assert!(index.writer.is_some());
}

#[test]
fn the_writers_lock_that_a_starting_child_still_holds_a_copy_of_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    commit_one_document(dir.path());
    let mut index = FullText::open(dir.path()).unwrap();
    // A child started while the last writer was open holds a copy of its
    // lock until it runs its program; here a file of its own plays it, let
    // go of half a second later.
    let copy = crate::storage::file_lock::leftover_copy(&dir.path().join(".tantivy-writer.lock"));
    let held = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let child = std::thread::spawn({
        let held = std::sync::Arc::clone(&held);
        move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            held.store(false, std::sync::atomic::Ordering::SeqCst);
            drop(copy);
        }
    });
    assert!(
        held.load(std::sync::atomic::Ordering::SeqCst),
        "let go too early"
    );
    index
        .start_writing()
        .expect("the writer waits out the copy");
    child.join().unwrap();
}

#[test]
fn a_writer_made_again_by_a_rollback_still_merges_small_segments() {
    // A rollback makes a fresh writer, with tantivy's default policy
    // until it is set again.
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    index.rollback().unwrap();
    let policy = format!("{:?}", index.writer().unwrap().get_merge_policy());
    assert!(policy.contains("max_docs_before_merge: 10000,"), "{policy}");
    let writes = 20u64;
    for seq in 1..=writes {
        let text = format!("Entry {seq} names the harbour.\n");
        let doc = crate::ingest::pipeline::analyze(&format!("d{seq}"), text, Format::Text).unwrap();
        index.replace(&doc).unwrap();
        index.commit(seq).unwrap();
    }
    // Dropping the index waits for its merges.
    drop(index);
    let index = FullText::open(dir.path()).unwrap();
    assert!(index.segment_count() < 8, "{}", index.segment_count());
    let hits = FullTextSet::of(&index.reader())
        .rank("harbour", Target::Edus, None, 100)
        .unwrap();
    assert_eq!(hits.len() as u64, writes);
    assert_eq!(
        index.applied_seq().unwrap(),
        writes,
        "merges keep the payload"
    );
}

#[test]
fn commits_write_no_list_of_files_and_leftovers_are_collected() {
    let dir = tempfile::tempdir().unwrap();
    commit_one_document(dir.path());
    let names = |dir: &Path| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    let committed = names(dir.path());
    assert!(committed.contains("meta.json"), "{committed:?}");
    assert!(!committed.contains(".managed.json"), "{committed:?}");
    // What a crash can leave: a segment file no commit names, the
    // temporary file of an atomic write, and an older store's list.
    let orphan = "0123456789abcdef0123456789abcdef.idx";
    for leftover in [orphan, ".tmpA1b2C3"] {
        std::fs::write(dir.path().join(leftover), b"partial").unwrap();
    }
    std::fs::write(dir.path().join(".managed.json"), b"[\"gone.idx\"]").unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    assert!(names(dir.path()).contains(orphan), "a reader deleted files");
    index.start_writing().unwrap();
    let left = names(dir.path());
    assert!(
        !left.contains(orphan) && !left.contains(".tmpA1b2C3"),
        "{left:?}"
    );
    assert!(committed.iter().all(|name| left.contains(name)), "{left:?}");
    assert_eq!(
        FullTextSet::of(&index.reader())
            .rank("lamp", Target::Edus, None, 10)
            .unwrap()
            .len(),
        1
    );
    index.remove("a").unwrap();
    index.commit(2).unwrap();
    assert_eq!(index.reader().entries(), 0);
}

#[test]
fn bulk_segments_are_not_merged_by_commit() {
    // Eight segments of a size would make tantivy's policy merge them;
    // above MERGED_SEGMENT_ENTRIES each, commit leaves them as written.
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let text: String = (0..=MERGED_SEGMENT_ENTRIES)
        .map(|i| format!("Line {i}.\n\n"))
        .collect();
    for seq in 1..=8u64 {
        let doc =
            crate::ingest::pipeline::analyze(&format!("bulk{seq}"), text.clone(), Format::Text)
                .unwrap();
        index.replace(&doc).unwrap();
        index.commit(seq).unwrap();
    }
    // Dropping the index waits for any merge it started.
    drop(index);
    let index = FullText::open(dir.path()).unwrap();
    assert_eq!(index.segment_count(), 8, "every bulk segment kept");
}

#[test]
fn the_rank_ceiling_keeps_a_common_word_match_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let docs = [
        (
            "a",
            "The oven bakes the loaf.\n\nThe garden is green.\n\nThe river runs fast.\n",
        ),
        ("b", "The sky is blue.\n\nThe dough rises slowly.\n"),
    ];
    for (id, text) in docs {
        let doc = crate::ingest::pipeline::analyze(id, text.into(), Format::Text).unwrap();
        index.replace(&doc).unwrap();
    }
    index.commit(docs.len() as u64).unwrap();
    let reader = index.reader();
    let query = "the oven loaf";
    let ceiling = FullTextSet::of(&reader)
        .rank_ceiling(query, Target::Edus, None)
        .unwrap();
    let hits = FullTextSet::of(&reader)
        .rank(query, Target::Edus, None, 10)
        .unwrap();
    assert_eq!(hits.len(), 5, "every EDU has 'the': {hits:?}");
    let (best, weakest) = (hits[0].score / ceiling, hits[4].score / ceiling);
    assert!(best > 0.6, "all terms once: {best}");
    assert!(weakest < 0.25, "only 'the': {weakest}");
    assert_eq!(
        FullTextSet::of(&reader)
            .rank_ceiling("", Target::Edus, None)
            .unwrap(),
        0.0
    );
    // A document scope filters without changing scores.
    let scoped = FullTextSet::of(&reader)
        .rank(query, Target::Edus, Some(&["a"]), 10)
        .unwrap();
    assert_eq!(scoped.len(), 3);
    for hit in &scoped {
        let unscoped = hits.iter().find(|h| h.span == hit.span && h.doc == "a");
        assert_eq!(unscoped.map(|h| h.score), Some(hit.score), "{hit:?}");
    }
}

#[test]
fn cached_columns_follow_replaced_documents() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let analyze =
        |text: &str| crate::ingest::pipeline::analyze("a", text.into(), Format::Text).unwrap();
    let first = analyze("The oven bakes the loaf.\n");
    index.replace(&first).unwrap();
    index.commit(1).unwrap();
    let reader = index.reader();
    let hits = FullTextSet::of(&reader)
        .rank("oven", Target::Edus, None, 10)
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].span, Span::new(0, 0));
    // The replacement puts the oven in the third EDU, in a new segment.
    let second = analyze("The sky is blue.\n\nThe river runs.\n\nThe oven is hot.\n");
    index.replace(&second).unwrap();
    index.commit(2).unwrap();
    let hits = FullTextSet::of(&reader)
        .rank("oven", Target::Edus, None, 10)
        .unwrap();
    assert_eq!(hits.len(), 1, "the old entry is deleted: {hits:?}");
    assert_eq!((hits[0].doc.as_str(), hits[0].span), ("a", Span::new(2, 2)));
    let searcher = reader.reader.searcher();
    let live: Vec<SegmentId> = searcher
        .segment_readers()
        .iter()
        .map(|s| s.segment_id())
        .collect();
    let cached = reader.columns.lock().unwrap();
    assert!(
        cached.keys().all(|id| live.contains(id)),
        "only live segments stay cached"
    );
}

#[test]
fn each_field_is_scored_with_its_own_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let analyze = |id: &str, text: &str| {
        crate::ingest::pipeline::analyze(id, text.into(), Format::Text).unwrap()
    };
    let doc = analyze(
        "a",
        "The oven bakes the loaf.\n\nThe garden is green and wide.\n\nThe river runs fast.\n",
    );
    index.replace(&doc).unwrap();
    index.commit(1).unwrap();
    let reader = index.reader();
    let query = "oven loaf river";
    let scores = |reader: &FullTextReader, target| -> Vec<f32> {
        let hits = FullTextSet::of(reader)
            .rank(query, target, None, 10)
            .unwrap();
        hits.iter().map(|h| h.score).collect()
    };
    let before = (
        scores(&reader, Target::Edus),
        scores(&reader, Target::Nodes),
    );
    let ceiling = FullTextSet::of(&reader)
        .rank_ceiling(query, Target::Edus, None)
        .unwrap();
    // Many session turns, one of them on the query's words.
    for n in 0..30 {
        let id = format!("@session/s/{n:06}");
        let text = if n == 7 {
            "The oven bakes the loaf by the river.".to_owned()
        } else {
            format!("Turn {n} talks about the weather, trains and the price of tea.")
        };
        index.replace(&analyze(&id, &text)).unwrap();
    }
    index.commit(2).unwrap();
    let after = (
        scores(&reader, Target::Edus),
        scores(&reader, Target::Nodes),
    );
    assert_eq!(before, after, "documents score as before the turns came");
    assert_eq!(
        FullTextSet::of(&reader)
            .rank_ceiling(query, Target::Edus, None)
            .unwrap(),
        ceiling
    );
    // A turn scope is scored against the turns' own statistics: an
    // average turn holding the terms scores near the ceiling, not a
    // sliver of it.
    let turns: Vec<String> = (0..30).map(|n| format!("@session/s/{n:06}")).collect();
    let scope: Vec<&str> = turns.iter().map(String::as_str).collect();
    let hits = FullTextSet::of(&reader)
        .rank(query, Target::Edus, Some(&scope), 5)
        .unwrap();
    let turn_ceiling = FullTextSet::of(&reader)
        .rank_ceiling(query, Target::Edus, Some(&scope))
        .unwrap();
    assert!(!hits.is_empty());
    assert!(
        hits.iter().all(|h| h.doc.starts_with("@session/s/")),
        "{hits:?}"
    );
    assert_eq!(hits[0].doc, "@session/s/000007");
    let share = hits[0].score / turn_ceiling;
    assert!(
        share > 0.8,
        "the matching turn scores {share} of the ceiling"
    );
}

#[test]
fn files_a_killed_writer_left_do_not_block_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let doc = crate::ingest::pipeline::analyze(
        "a",
        "One two three four. Five six seven eight.".into(),
        Format::Text,
    )
    .unwrap();
    {
        let mut index = FullText::open(dir.path()).unwrap();
        index.replace(&doc).unwrap();
        index.commit(1).unwrap();
        // What a writer killed mid-commit leaves behind: delete files,
        // registered but in no commit, under the names the next
        // commits will want.
        let tantivy_index = &index.reader.index;
        let segment = tantivy_index.searchable_segment_ids().unwrap()[0];
        for opstamp in 0..1_000 {
            let name = format!("{}.{opstamp}.del", segment.uuid_string());
            let file = tantivy::Directory::open_write(tantivy_index.directory(), Path::new(&name))
                .unwrap();
            tantivy::directory::TerminatingWrite::terminate(file).unwrap();
        }
    }
    let mut index = FullText::open(dir.path()).unwrap();
    index.remove("a").unwrap();
    index.commit(2).unwrap();
    assert_eq!(index.reader().entries(), 0);
    assert_eq!(index.applied_seq().unwrap(), 2);
}

#[test]
fn a_fast_field_file_overwritten_is_damage_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let text: String = (0..300)
        .map(|i| format!("The oven number {i} bakes loaf {i}.\n\n"))
        .collect();
    let doc = crate::ingest::pipeline::analyze("a", text, Format::Text).unwrap();
    index.replace(&doc).unwrap();
    index.commit(1).unwrap();
    drop(index);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "fast") {
            // Its middle overwritten, the footer intact.
            let mut bytes = std::fs::read(&path).unwrap();
            let len = bytes.len();
            bytes[len / 3..len / 3 + 200].fill(0x5a);
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let reader = FullText::open(dir.path()).unwrap().reader();
    for hits in [
        FullTextSet::of(&reader).search("oven", 5),
        FullTextSet::of(&reader).rank("oven", Target::Edus, None, 5),
    ] {
        let err = hits.unwrap_err();
        assert!(err.is_damage(), "{err:?}");
        assert!(err.to_string().contains("reindex"), "{err}");
    }
}

#[test]
fn a_damaged_index_fails_with_tantivys_error_as_the_source() {
    let dir = tempfile::tempdir().unwrap();
    drop(FullText::open(dir.path()).unwrap());
    std::fs::write(dir.path().join("meta.json"), b"{ not json").unwrap();
    let err = FullText::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::FullText { .. }), "{err:?}");
    let source = std::error::Error::source(&err).expect("tantivy's error is kept");
    assert!(err.to_string().contains(&source.to_string()), "{err}");
}

#[test]
fn a_document_scope_ranks_exactly_the_unscoped_hits_it_allows_narrow_or_wide() {
    // 240 documents over a small vocabulary, committed in four batches
    // (several segments); scopes of 1 and 3 documents take the
    // intersection, of 60 and 200 the filtered pruned walk.
    let words = [
        "oven", "loaf", "river", "garden", "lamp", "harbour", "kettle", "stone", "the", "of",
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    let mut seq = 0;
    for batch in 0..4u64 {
        for n in 0..60usize {
            let number = batch as usize * 60 + n;
            let sentences: Vec<String> = (0..4)
                .map(|s| {
                    let pick = |k: usize| words[(number * 7 + s * 3 + k * k * 5) % words.len()];
                    format!(
                        "The {} {} {} near the {}.",
                        pick(1),
                        pick(2),
                        pick(3),
                        pick(4 + s)
                    )
                })
                .collect();
            let text = sentences.join("\n\n") + "\n";
            let doc =
                crate::ingest::pipeline::analyze(&format!("d{number:03}"), text, Format::Text)
                    .unwrap();
            index.replace(&doc).unwrap();
        }
        seq += 1;
        index.commit(seq).unwrap();
    }
    let reader = index.reader();
    let ids: Vec<String> = (0..240).map(|n| format!("d{n:03}")).collect();
    for (query, target) in [
        ("oven river of the", Target::Edus),
        ("lamp kettle", Target::Nodes),
        ("stone", Target::Edus),
    ] {
        let all = FullTextSet::of(&reader)
            .rank(query, target, None, 100_000)
            .unwrap();
        for (take, step) in [(1, 1), (3, 7), (60, 4), (200, 1)] {
            let scope: Vec<&str> = ids
                .iter()
                .step_by(step)
                .take(take)
                .map(String::as_str)
                .collect();
            let allowed: Vec<_> = all
                .iter()
                .filter(|h| scope.contains(&h.doc.as_str()))
                .collect();
            for limit in [5, 40, 100_000] {
                let scoped = FullTextSet::of(&reader)
                    .rank(query, target, Some(&scope), limit)
                    .unwrap();
                assert_eq!(
                    scoped.len(),
                    allowed.len().min(limit),
                    "{query} in {take}, top {limit}"
                );
                for (got, want) in scoped.iter().zip(&allowed) {
                    assert!(
                        (got.score - want.score).abs() <= 1e-5 * want.score.abs().max(1.0),
                        "{query} in {take}, top {limit}: {got:?} against {want:?}"
                    );
                    assert!(
                        scope.contains(&got.doc.as_str()),
                        "{got:?} is outside the scope"
                    );
                }
                for got in &scoped {
                    let same = all
                        .iter()
                        .find(|h| h.doc == got.doc && h.span == got.span && h.node == got.node);
                    let unscoped = same.map_or(f32::NAN, |h| h.score);
                    assert!(
                        (unscoped - got.score).abs() <= 1e-5 * unscoped.abs().max(1.0),
                        "scored as unscoped: {got:?} against {unscoped}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_section_whose_heading_the_query_names_outranks_one_repeating_its_words() {
    let text = "# Report\n\n## Statement of Cash Flows\n\n| Item | 2018 |\n|---|---|\n| Net income | 5,363 |\n| Purchases of PP&E | (1,577) |\n\n## Liquidity\n\nThe cash flow statement of the parent shows cash flow from operations. Each cash flow statement of a subsidiary shows its cash flow too.\n";
    let doc = crate::ingest::pipeline::analyze("r", text.into(), Format::Markdown).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut index = FullText::open(dir.path()).unwrap();
    index.replace(&doc).unwrap();
    index.commit(1).unwrap();
    let reader = index.reader();
    let section = |title: &str| {
        (doc.tree.nodes.iter())
            .find(|n| n.title == title)
            .map(|n| n.id)
            .unwrap()
    };
    let (named, repeating) = (section("Statement of Cash Flows"), section("Liquidity"));
    let query = "cash flow statement";
    let hits = FullTextSet::of(&reader)
        .rank(query, Target::Nodes, None, 10)
        .unwrap();
    let position = |id: u32| hits.iter().position(|h| h.node == Some(id)).unwrap();
    assert!(position(named) < position(repeating), "{hits:?}");
    // The title's own match is part of the score, twice: the named
    // section scores more than twice its title alone.
    let titles = FullTextSet::of(&reader)
        .rank_titles(query, None, 10)
        .unwrap();
    let title_score = titles.iter().find(|h| h.node == Some(named)).unwrap().score;
    assert!(
        hits[position(named)].score > 2.0 * title_score,
        "{hits:?} {titles:?}"
    );
    // Scoped to the document, the same scores.
    let scoped = FullTextSet::of(&reader)
        .rank(query, Target::Nodes, Some(&["r"]), 10)
        .unwrap();
    for (got, want) in scoped.iter().zip(&hits) {
        assert!(
            (got.score - want.score).abs() <= 1e-5 * want.score,
            "{got:?} {want:?}"
        );
    }
    // The ceiling counts the title terms too: the named section's score
    // stays below one saturated match of every term in both fields.
    let ceiling = FullTextSet::of(&reader)
        .rank_ceiling(query, Target::Nodes, None)
        .unwrap();
    assert!(
        ceiling > 0.0 && hits[0].score < ceiling * (1.0 + 1.2),
        "{ceiling} {hits:?}"
    );
}

#[test]
fn rankings_do_not_depend_on_how_the_index_lies_and_a_set_ranks_as_one_index() {
    // Documents matching a many-term query in different ways, written into
    // one index in one order and one commit, into another in the opposite
    // order a commit each (other segments, other positions), and split
    // over three indexes ranked as a set.
    let words = [
        "harbour", "lamp", "keeper", "storm", "tide", "rock", "light", "ship",
    ];
    let docs: Vec<_> = (0..40)
        .map(|i| {
            let text: Vec<&str> = (0..6).map(|k| words[(i * 7 + k * 3 + i / 5) % 8]).collect();
            let text = format!("{}.\n", text.join(" "));
            crate::ingest::pipeline::analyze(&format!("d{i:02}"), text, Format::Text).unwrap()
        })
        .collect();
    let (dirs, indexes): (Vec<_>, Vec<FullText>) = (0..5)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let index = FullText::open(dir.path()).unwrap();
            (dir, index)
        })
        .unzip();
    let mut indexes = indexes;
    for doc in &docs {
        indexes[0].replace(doc).unwrap();
    }
    indexes[0].commit(1).unwrap();
    for (seq, doc) in docs.iter().rev().enumerate() {
        indexes[1].replace(doc).unwrap();
        indexes[1].commit(seq as u64 + 1).unwrap();
    }
    for (i, doc) in docs.iter().enumerate() {
        indexes[2 + i % 3].replace(doc).unwrap();
    }
    for index in &mut indexes[2..] {
        index.commit(1).unwrap();
    }
    let one = indexes[0].reader();
    let other = indexes[1].reader();
    let set = FullTextSet::new(indexes[2..].iter().map(FullText::reader).collect());
    let query = "lamp keeper storm tide rock light";
    for target in [Target::Edus, Target::Nodes] {
        for limit in [3, 10, 100] {
            let hits = FullTextSet::of(&one)
                .rank(query, target, None, limit)
                .unwrap();
            assert!(!hits.is_empty());
            assert_eq!(
                FullTextSet::of(&other)
                    .rank(query, target, None, limit)
                    .unwrap(),
                hits
            );
            assert_eq!(set.rank(query, target, None, limit).unwrap(), hits);
            let scope = ["d03", "d17", "d30"];
            assert_eq!(
                set.rank(query, target, Some(&scope), limit).unwrap(),
                FullTextSet::of(&one)
                    .rank(query, target, Some(&scope), limit)
                    .unwrap()
            );
        }
        assert_eq!(
            set.rank_ceiling(query, target, None).unwrap(),
            FullTextSet::of(&one)
                .rank_ceiling(query, target, None)
                .unwrap()
        );
    }
    drop(dirs);
}
