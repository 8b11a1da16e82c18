//! Helpers shared by the store's tests.

pub(super) use super::handle::Store;
pub(super) use super::records::*;
pub(super) use crate::compute::quantize::pack;
pub(super) use crate::ingest::pipeline::analyze;
pub(super) use crate::model::cost::LlmCost;
pub(super) use crate::model::dag::Dag;
pub(super) use crate::model::dialogue::Dialogue;
pub(super) use crate::model::document::Format;
pub(super) use crate::model::document::{DocVectors, Document, PackedVectors};
pub(super) use crate::model::ids::turn_doc_id;
pub(super) use crate::model::rank::Target;
pub(super) use crate::storage::vector_record::VectorRecord;

pub(super) fn doc(id: &str, text: &str) -> Document {
    analyze(id, text.to_owned(), Format::Markdown).unwrap()
}

/// Vectors of the right shape for `doc` (dimension 2).
pub(super) fn vectors(doc: &Document) -> PackedVectors {
    pack(&DocVectors {
        dimension: 2,
        nodes: vec![0.5; doc.tree.nodes.len() * 2],
        edus: vec![0.25; doc.edus.len() * 2],
    })
}

/// A one-chunk DAG for `doc`.
pub(super) fn dag(doc: &Document) -> Dag {
    Dag::from_edges(
        vec![crate::model::dag::DagNode {
            level: 1,
            span: crate::model::edu::Span::new(0, doc.edus.len() as u32 - 1),
            points: Vec::new(),
            window: None,
            text: None,
        }],
        Vec::new(),
    )
}

pub(super) fn put(store: &Store, doc: &Document) -> u64 {
    store
        .put(doc, &vectors(doc), &dag(doc), &LlmCost::default())
        .unwrap()
}

pub(super) fn keys_of(store: &Store, id: &str) -> usize {
    RECORDS
        .iter()
        .filter(|&&kind| store.holds(&key(kind, id)).unwrap())
        .count()
}

/// How many keys name document `id`: whole records, manifests, pieces.
pub(super) fn stored_keys(store: &Store, id: &str) -> usize {
    store
        .scan(&[])
        .unwrap()
        .filter(|entry| {
            let (k, _) = entry.as_ref().unwrap();
            k.windows(id.len()).any(|w| w == id.as_bytes())
        })
        .count()
}

/// A Markdown document of about `bytes` bytes of prose.
pub(super) fn large(id: &str, bytes: usize) -> Document {
    let paragraph = "Pieces keep every sled page small, whatever the size of a document. \
                     Listing reads metadata pages only, never a record's megabytes.\n\n";
    doc(id, &paragraph.repeat(bytes / paragraph.len() + 1))
}

/// The record files present, sorted.
pub(super) fn files_present(store: &Store) -> Vec<String> {
    let mut names = store.files.names().unwrap();
    names.sort();
    names
}

/// Removes document `id` and checks nothing of it is left: no key, and
/// (once the removal is flushed) no record file.
pub(super) fn remove_whole(store: &Store, id: &str) {
    store.remove(id).unwrap();
    store.flush().unwrap();
    assert_eq!(stored_keys(store, id), 0);
    assert_eq!(files_present(store), Vec::<String>::new());
}

/// A one-turn dialogue for session `session` naming `doc`.
pub(super) fn dialogue(session: &str, doc: &Document) -> Dialogue {
    use crate::model::dialogue::{Branch, Role, SummaryPick, Topic, Turn};
    let pick = SummaryPick {
        turn: 0,
        edus: crate::model::edu::Span::new(0, 0),
        bytes: [doc.edus[0].start, doc.edus[0].end],
        tokens: doc.edus[0].tokens,
    };
    Dialogue {
        id: session.to_owned(),
        turns: vec![Turn {
            number: 0,
            role: Role::User,
            doc: doc.meta.id.clone(),
            parent: None,
            topic: 0,
            branch: 0,
            summary: pick,
            edus: doc.meta.edus,
            bytes: [doc.edus[0].start, doc.edus[doc.edus.len() - 1].end],
            tokens: doc.meta.tokens,
            at: None,
        }],
        topics: vec![Topic {
            id: 0,
            branches: vec![0],
            last_turn: 0,
            turns: 1,
            summary: vec![pick],
            vector_sum: vec![1.0, 0.0],
        }],
        branches: vec![Branch {
            id: 0,
            topic: 0,
            fork: None,
            turns: vec![0],
            summary: vec![pick],
        }],
        current: 0,
    }
}

/// What [`Store::put_turns`] writes for one turn document.
pub(super) fn written(doc: &Document) -> (Document, PackedVectors, Dag) {
    (doc.clone(), vectors(doc), dag(doc))
}

pub(super) fn turn(session: &str, number: u32) -> Document {
    let id = crate::model::ids::turn_doc_id(session, number);
    analyze(
        &id,
        "Plan a winter trip. Pack warm clothes.".into(),
        Format::Text,
    )
    .unwrap()
}
