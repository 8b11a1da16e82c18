//! Documents: each written as its records (listing, text, EDUs, tree,
//! pages, vectors, DAG, build cost, the caller's metadata) and one change-log entry in one batch,
//! and read back in place.

use rkyv::rancor::BoxedError;
use rkyv::vec::ArchivedVec;

use super::handle::{Batch, Bytes, Store};
use super::kept_apart::PIECE_BYTES;
use super::records::{
    COST, DAG, EDUS, META, PACKED_VECTORS, PAGES, PIECEABLE, RECORDS, TEXT, TREE, VECTORS, access,
    archive, decode_cost, decode_meta, key, same_id,
};
use crate::compute::quantize::pack;
use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::model::dag::{ArchivedDag, Dag};
use crate::model::document::{
    ArchivedDocMeta, ArchivedDocVectors, ArchivedFormat, ArchivedPackedVectors, DocMeta,
    DocVectors, Document, PackedVectors,
};
use crate::model::edu::{ArchivedEdu, Edu};
use crate::model::metadata::Metadata;
use crate::model::pages::{ArchivedPageLayout, PageLayout};
use crate::model::tree::{ArchivedTree, Tree};
use crate::storage::vector_record::VectorRecord;

/// One document's weighted DAG, read in place from the store's buffer.
#[derive(Debug, Clone)]
pub struct StoredDag(Bytes);

/// One document's vectors, read in place from the store's buffer, in
/// whichever layout it was written ([`VectorRecord`]).
#[derive(Debug, Clone)]
pub struct StoredVectors {
    bytes: Bytes,
    packed: bool,
}

/// One stored document, read in place from the store's buffers.
#[derive(Debug, Clone)]
pub struct StoredDoc {
    meta: Bytes,
    text: Bytes,
    edus: Bytes,
    tree: Bytes,
    /// A PDF's page geometry (none for other formats).
    pages: Option<Bytes>,
    /// The caller's metadata (none when it was given none).
    metadata: Option<Bytes>,
}

impl StoredDag {
    /// The DAG, in place (its CSR arrays are read without parsing).
    pub fn get(&self) -> Result<&ArchivedDag> {
        access::<ArchivedDag>(&self.0, "dag")
    }

    /// An owned copy.
    pub fn to_dag(&self) -> Result<Dag> {
        rkyv::deserialize::<Dag, BoxedError>(self.get()?).map_err(|e| Error::Corrupt {
            key: "dag".into(),
            message: e.to_string(),
        })
    }
}

impl StoredVectors {
    /// An owned copy, in 8 bits (`f32` rows of format 6 or older are
    /// quantised).
    pub fn to_packed(&self) -> Result<PackedVectors> {
        let corrupt = |e: BoxedError| Error::Corrupt {
            key: "vectors".into(),
            message: e.to_string(),
        };
        Ok(match self.get()? {
            VectorRecord::Full(v) => {
                pack(&rkyv::deserialize::<DocVectors, BoxedError>(v).map_err(corrupt)?)
            }
            VectorRecord::Packed(v) => {
                rkyv::deserialize::<PackedVectors, BoxedError>(v).map_err(corrupt)?
            }
        })
    }

    /// The vectors, in place.
    pub fn get(&self) -> Result<VectorRecord<'_>> {
        Ok(if self.packed {
            VectorRecord::Packed(access::<ArchivedPackedVectors>(&self.bytes, "vectors")?)
        } else {
            VectorRecord::Full(access::<ArchivedDocVectors>(&self.bytes, "vectors")?)
        })
    }
}

impl StoredDoc {
    /// The document's metadata, in place.
    pub fn meta(&self) -> Result<&ArchivedDocMeta> {
        access::<ArchivedDocMeta>(&self.meta, "meta")
    }

    /// The stored text every coordinate points into.
    pub fn text(&self) -> Result<&str> {
        std::str::from_utf8(&self.text).map_err(|e| Error::Corrupt {
            key: "text".into(),
            message: e.to_string(),
        })
    }

    /// The EDUs, in place.
    pub fn edus(&self) -> Result<&ArchivedVec<ArchivedEdu>> {
        access::<ArchivedVec<ArchivedEdu>>(&self.edus, "edus")
    }

    /// The structural tree, in place.
    pub fn tree(&self) -> Result<&ArchivedTree> {
        access::<ArchivedTree>(&self.tree, "tree")
    }

    /// Where a PDF's text lies on its pages (`None` for other formats).
    pub fn pages(&self) -> Result<Option<PageLayout>> {
        let Some(bytes) = self.pages.as_ref() else {
            return Ok(None);
        };
        let archived = access::<ArchivedPageLayout>(bytes, "pages")?;
        rkyv::deserialize::<PageLayout, BoxedError>(archived)
            .map(Some)
            .map_err(|e| Error::Corrupt {
                key: "pages".into(),
                message: e.to_string(),
            })
    }

    /// The document's metadata (empty when it was given none).
    pub fn metadata(&self) -> Result<Metadata> {
        match &self.metadata {
            None => Ok(Metadata::default()),
            Some(bytes) => Metadata::decode(bytes).ok_or_else(|| Error::Corrupt {
                key: "metadata".into(),
                message: "the document's metadata record does not decode".into(),
            }),
        }
    }

    /// An owned copy of the whole document.
    pub fn to_document(&self) -> Result<Document> {
        let corrupt = |e: BoxedError| Error::Corrupt {
            key: "document".into(),
            message: e.to_string(),
        };
        Ok(Document {
            meta: rkyv::deserialize::<DocMeta, BoxedError>(self.meta()?).map_err(corrupt)?,
            text: self.text()?.to_owned(),
            edus: rkyv::deserialize::<Vec<Edu>, BoxedError>(self.edus()?).map_err(corrupt)?,
            tree: rkyv::deserialize::<Tree, BoxedError>(self.tree()?).map_err(corrupt)?,
            pages: self.pages()?,
            metadata: self.metadata()?,
        })
    }

    /// Checks that the records agree ([`Document::validate`]).
    pub fn validate(&self) -> Result<()> {
        self.to_valid_document().map(drop)
    }

    /// An owned copy, once it passes [`StoredDoc::validate`] (decoded once
    /// for both).
    pub(super) fn to_valid_document(&self) -> Result<Document> {
        let doc = self.to_document()?;
        doc.validate().map_err(|message| Error::Invariant {
            doc: doc.meta.id.clone(),
            message,
        })?;
        Ok(doc)
    }
}

impl Store {
    /// Writes `doc`, its vectors, its DAG and what a language model cost
    /// to build it (replacing any document with its id, and its cost) in one
    /// atomic batch; returns the change's sequence number.
    pub fn put(
        &self,
        doc: &Document,
        vectors: &PackedVectors,
        dag: &Dag,
        cost: &LlmCost,
    ) -> Result<u64> {
        self.put_documents(&[(doc, vectors, dag, cost)])
    }

    /// Writes documents as [`Store::put`] does, all in one atomic batch
    /// with a change-log entry each, in order; returns the last one's
    /// sequence number. Their ids must differ (refused otherwise, and
    /// nothing is written).
    pub fn put_documents(
        &self,
        docs: &[(&Document, &PackedVectors, &Dag, &LlmCost)],
    ) -> Result<u64> {
        let ids: Vec<&str> = docs.iter().map(|(doc, ..)| doc.meta.id.as_str()).collect();
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = ids.iter().find(|id| !seen.insert(**id)) {
            return Err(Error::Usage(format!(
                "document {twice:?} is given twice in one batch; each document is written once"
            )));
        }
        let mut batch = Batch::default();
        for (doc, vectors, dag, cost) in docs {
            self.insert_document(&mut batch, doc, vectors, dag)?;
            let cost_key = key(COST, &doc.meta.id);
            if cost.is_zero() {
                batch.remove(&cost_key);
            } else {
                let json = serde_json::to_vec(cost)
                    .map_err(|e| Error::Storage(format!("encoding a build cost: {e}")))?;
                batch.insert(&cost_key, &json);
            }
        }
        self.apply_logged(batch, &ids)
    }

    /// What a language model cost to build each document that was built
    /// with one, in id order. A record that does not decode is damage.
    pub fn costs(&self) -> Result<Vec<(String, LlmCost)>> {
        let mut costs = Vec::new();
        for entry in self.scan(&[COST])? {
            let (key, value) = entry?;
            let id = String::from_utf8_lossy(&key[1..]).into_owned();
            let cost = decode_cost(&id, &value)?;
            costs.push((id, cost));
        }
        Ok(costs)
    }

    /// Replaces the DAG of existing document `id` (with a change-log entry,
    /// in one atomic batch); returns the change's sequence number, or
    /// `None` when no such document exists.
    pub fn put_dag(&self, id: &str, dag: &Dag) -> Result<Option<u64>> {
        if !self.holds(&key(META, id))? {
            return Ok(None);
        }
        let mut batch = Batch::default();
        self.insert_record(&mut batch, DAG, id, &archive(dag)?)?;
        self.apply_logged(batch, &[id]).map(Some)
    }

    /// Whether document `id` is listed.
    pub fn contains(&self, id: &str) -> Result<bool> {
        self.holds(&key(META, id))
    }

    /// Deletes a document entirely in one atomic batch; returns the change's
    /// sequence number, or `None` when no such document exists.
    pub fn remove(&self, id: &str) -> Result<Option<u64>> {
        if !self.holds(&key(META, id))? {
            return Ok(None);
        }
        let mut batch = Batch::reclaiming();
        self.remove_document(&mut batch, id)?;
        self.apply_logged(batch, &[id]).map(Some)
    }

    /// Adds the records of `doc`, its vectors and its DAG to `batch`,
    /// replacing any stored under its id.
    pub(super) fn insert_document<'a>(
        &'a self,
        batch: &mut Batch<'a>,
        doc: &Document,
        vectors: &PackedVectors,
        dag: &Dag,
    ) -> Result<()> {
        let id = &doc.meta.id;
        batch.insert(&key(META, id), &archive(&doc.meta)?);
        self.insert_record(batch, TEXT, id, doc.text.as_bytes())?;
        self.insert_record(batch, EDUS, id, &archive(&doc.edus)?)?;
        self.insert_record(batch, TREE, id, &archive(&doc.tree)?)?;
        match &doc.pages {
            Some(pages) => self.insert_record(batch, PAGES, id, &archive(pages)?)?,
            None => {
                batch.remove(&key(PAGES, id));
                self.remove_kept_apart(batch, PAGES, id)?;
            }
        }
        // Vectors are most of a document's bytes: a large set is archived
        // straight into its file, never held whole a second time.
        let size = (vectors.nodes.codes.len() + vectors.edus.codes.len())
            + 4 * (vectors.nodes.scales.len() + vectors.edus.scales.len());
        if size > PIECE_BYTES {
            self.insert_streamed(batch, PACKED_VECTORS, id, size as u64, |out| {
                rkyv::api::high::to_bytes_in::<_, BoxedError>(
                    vectors,
                    rkyv::ser::writer::IoWriter::new(out),
                )
                .map(drop)
                .map_err(std::io::Error::other)
            })?;
        } else {
            self.insert_record(batch, PACKED_VECTORS, id, &archive(vectors)?)?;
        }
        // The document's `f32` vectors from before format 7, if any.
        batch.remove(&key(VECTORS, id));
        self.remove_kept_apart(batch, VECTORS, id)?;
        self.insert_metadata(batch, id, &doc.metadata)?;
        self.insert_record(batch, DAG, id, &archive(dag)?)
    }

    /// Adds the removal of every record of document `id`, whole or pieced,
    /// to `batch`. A damaged manifest does not stop it: removal is how
    /// damage is cleared.
    pub(super) fn remove_document(&self, batch: &mut Batch<'_>, id: &str) -> Result<()> {
        for kind in RECORDS {
            batch.remove(&key(kind, id));
        }
        batch.remove(&key(COST, id));
        self.remove_metadata(batch, id)?;
        for kind in PIECEABLE {
            self.remove_kept_apart(batch, kind, id)?;
        }
        Ok(())
    }

    /// The stored document with this id, if any; `Corrupt` when its
    /// metadata names another id ([`same_id`]).
    pub fn get(&self, id: &str) -> Result<Option<StoredDoc>> {
        let mut records = Vec::with_capacity(4);
        for kind in [META, TEXT, EDUS, TREE] {
            match self.record(kind, id)? {
                Some(value) => records.push(value),
                None if kind == META => return Ok(None),
                None => {
                    return Err(Error::Corrupt {
                        key: format!("{}{id}", kind as char),
                        message: "record missing".into(),
                    });
                }
            }
        }
        let [meta, text, edus, tree]: [Bytes; 4] = records
            .try_into()
            .map_err(|_| Error::Storage("record count".into()))?;
        let mut doc = StoredDoc {
            meta,
            text,
            edus,
            tree,
            pages: None,
            metadata: self.metadata_record(id)?,
        };
        same_id(id, &doc.meta()?.id, || format!("{}{id}", META as char))?;
        if doc.meta()?.format == ArchivedFormat::Pdf {
            let pages = self.record(PAGES, id)?.ok_or_else(|| Error::Corrupt {
                key: format!("{}{id}", PAGES as char),
                message: "record missing".into(),
            })?;
            doc.pages = Some(pages);
        }
        Ok(Some(doc))
    }

    /// The vectors of the document with this id, if it exists.
    pub fn vectors(&self, id: &str) -> Result<Option<StoredVectors>> {
        let vectors = match self.record(PACKED_VECTORS, id)? {
            Some(bytes) => StoredVectors {
                bytes,
                packed: true,
            },
            None => match self.record(VECTORS, id)? {
                Some(bytes) => StoredVectors {
                    bytes,
                    packed: false,
                },
                None => return Ok(None),
            },
        };
        vectors.get()?;
        Ok(Some(vectors))
    }

    /// The DAG of the document with this id, if it exists.
    pub fn dag(&self, id: &str) -> Result<Option<StoredDag>> {
        let Some(value) = self.record(DAG, id)? else {
            return Ok(None);
        };
        let dag = StoredDag(value);
        dag.get()?;
        Ok(Some(dag))
    }

    /// Every listed document's id, in order, without decoding anything (a
    /// damaged record does not hide the others).
    pub fn ids(&self) -> Result<Vec<String>> {
        self.ids_under(&[META])
    }

    /// The ids of the records whose keys start with `prefix` (a record
    /// kind and the start of an id), in key order.
    pub(super) fn ids_under(&self, prefix: &[u8]) -> Result<Vec<String>> {
        self.scan(prefix)?
            .map(|entry| Ok(String::from_utf8_lossy(&entry?.0[1..]).into_owned()))
            .collect()
    }

    /// Metadata of every document, in id order. A damaged metadata record
    /// is left out with a warning, so one damaged document does not hide
    /// the others ([`Store::check_all`] names it).
    pub fn metas(&self) -> Result<Vec<DocMeta>> {
        let mut metas = Vec::new();
        for entry in self.scan(&[META])? {
            let (key, value) = entry?;
            match decode_meta(&key, &value) {
                Ok(meta) => metas.push(meta),
                Err(err) => tracing::warn!("left out of the listing: {err}"),
            }
        }
        Ok(metas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::test_support::*;

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            put(&store, &doc("a", "Persisted text."));
            store.flush().unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.metas().unwrap()[0].id, "a");
        assert_eq!(store.last_seq().unwrap(), 1);
    }

    #[test]
    fn build_costs_go_with_their_document() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = doc("a", "# A\n\nOne sentence.\n");
        let b = doc("b", "# B\n\nTwo sentences. Here.\n");
        let cost = LlmCost {
            calls: 3,
            prompt_tokens: 400,
            completion_tokens: 90,
            millis: 1200,
            fallbacks: 1,
            dropped_points: 2,
        };
        store.put(&a, &vectors(&a), &dag(&a), &cost).unwrap();
        put(&store, &b);
        assert_eq!(store.costs().unwrap(), vec![("a".to_owned(), cost)]);
        // Rebuilt without a model: its old cost goes.
        put(&store, &a);
        assert!(store.costs().unwrap().is_empty());
        store.put(&a, &vectors(&a), &dag(&a), &cost).unwrap();
        store.remove("a").unwrap();
        assert!(store.costs().unwrap().is_empty());
        // A damaged cost record is damage, named.
        store.put_raw(key(COST, "b"), &b"{not json"[..]).unwrap();
        let err = store.costs().unwrap_err();
        assert!(
            err.is_damage() && err.to_string().contains("cost of b"),
            "{err}"
        );
    }

    #[test]
    fn documents_put_together_share_one_batch_with_an_entry_each() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("old", "Kept as it is."));
        let (a, b) = (doc("a", "First of two."), doc("b", "Second of two."));
        let (va, vb) = (vectors(&a), vectors(&b));
        let (da, db) = (dag(&a), dag(&b));
        let cost = LlmCost {
            calls: 1,
            ..LlmCost::default()
        };
        let batch = [(&a, &va, &da, &LlmCost::default()), (&b, &vb, &db, &cost)];
        assert_eq!(store.put_documents(&batch).unwrap(), 3);
        assert_eq!(
            store.changes_after(1).unwrap(),
            vec![(2, "a".to_owned()), (3, "b".to_owned())]
        );
        assert_eq!(store.get("b").unwrap().unwrap().to_document().unwrap(), b);
        assert_eq!(store.costs().unwrap(), vec![("b".to_owned(), cost)]);
        // The same id twice: refused before anything is written.
        let again = doc("c", "Twice.");
        let (vc, dc) = (vectors(&again), dag(&again));
        let twice = [(&again, &vc, &dc, &cost), (&again, &vc, &dc, &cost)];
        let err = store.put_documents(&twice).unwrap_err();
        assert!(err.to_string().contains("\"c\" is given twice"), "{err}");
        assert!(store.get("c").unwrap().is_none());
        assert_eq!(store.last_seq().unwrap(), 3);
    }

    #[test]
    fn put_get_roundtrip_reads_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let original = doc("a", "# Title\n\nOne sentence here. Another one there.\n");
        assert_eq!(put(&store, &original), 1);
        let stored = store.get("a").unwrap().unwrap();
        assert_eq!(stored.to_document().unwrap(), original);
        assert_eq!(stored.meta().unwrap().id.as_str(), "a");
        let edu = &stored.edus().unwrap()[1];
        let text = stored.text().unwrap();
        assert_eq!(
            &text[edu.start.to_native() as usize..edu.end.to_native() as usize],
            "One sentence here."
        );
        stored.validate().unwrap();
        assert!(store.get("missing").unwrap().is_none());
        let stored_vectors = store.vectors("a").unwrap().unwrap();
        let v = stored_vectors.get().unwrap();
        assert!(matches!(v, VectorRecord::Packed(_)));
        assert_eq!(v.dimension(), 2);
        assert!(v.rows(Target::Edus).holds(original.edus.len()));
        assert_eq!(stored_vectors.to_packed().unwrap(), vectors(&original));
        assert_eq!(v.rows(Target::Nodes).values()[..2], [0.5, 0.5]);
        assert!(store.vectors("missing").unwrap().is_none());
    }

    #[test]
    fn embedder_config_is_recorded_and_vectors_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.embedder_config().unwrap(), None);
        store.set_embedder_config("{\"kind\":\"hashed\"}").unwrap();
        assert_eq!(
            store.embedder_config().unwrap().as_deref(),
            Some("{\"kind\":\"hashed\"}")
        );
        let a = doc("a", "Some text. More text.");
        let mut short = vectors(&a);
        short.edus.scales.pop();
        short.edus.codes.truncate(short.edus.scales.len() * 2);
        store
            .put(&a, &short, &dag(&a), &LlmCost::default())
            .unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { doc, message }) if doc == "a" && message.contains("EDU vector"))
        );
        put(&store, &a);
        assert_eq!(store.check().unwrap(), 1);
        store.remove_raw(key(PACKED_VECTORS, "a")).unwrap();
        assert!(matches!(store.check(), Err(Error::Invariant { .. })));
    }

    #[test]
    fn dags_are_stored_replaced_alone_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = doc(
            "a",
            "# T\n\nOne sentence here. Another one there. A third.\n",
        );
        put(&store, &a);
        assert_eq!(store.dag("a").unwrap().unwrap().to_dag().unwrap(), dag(&a));
        assert!(store.dag("missing").unwrap().is_none());
        // Two chunks and a written point over both: a valid two-level DAG.
        let chunk = |first, last| crate::model::dag::DagNode {
            level: 1,
            span: crate::model::edu::Span::new(first, last),
            points: Vec::new(),
            window: None,
            text: None,
        };
        let last = a.edus.len() as u32 - 1;
        let point = crate::model::dag::DagNode {
            level: 2,
            span: crate::model::edu::Span::new(0, last),
            points: vec![1],
            window: Some([0, 1]),
            text: Some("Three sentences are stored.".into()),
        };
        let nodes = vec![chunk(0, 1), chunk(2, last), point];
        let good = Dag::from_edges(
            nodes.clone(),
            vec![vec![], vec![], vec![(0, 0.25), (1, 0.75)]],
        );
        let seq = store.last_seq().unwrap();
        assert_eq!(store.put_dag("a", &good).unwrap(), Some(seq + 1));
        assert_eq!(
            store.changes_after(seq).unwrap(),
            [(seq + 1, "a".to_owned())]
        );
        assert_eq!(store.dag("a").unwrap().unwrap().to_dag().unwrap(), good);
        assert_eq!(store.get("a").unwrap().unwrap().to_document().unwrap(), a);
        assert_eq!(store.check().unwrap(), 1);
        assert_eq!(store.put_dag("missing", &good).unwrap(), None);
        // Out-weights that do not sum to 1, or an edge to itself's level.
        for edges in [vec![(0, 0.25), (1, 0.5)], vec![(0, 0.5), (2, 0.5)]] {
            let bad = Dag::from_edges(nodes.clone(), vec![vec![], vec![], edges]);
            store.put_dag("a", &bad).unwrap();
            assert!(matches!(store.check(), Err(Error::Invariant { doc, .. }) if doc == "a"));
        }
        // Written text on a chunk, or a blank written point.
        let mut chunk_text = nodes.clone();
        chunk_text[0].text = Some("A chunk's text is the document's.".into());
        let mut blank = nodes.clone();
        blank[2].text = Some(" ".into());
        for bad in [chunk_text, blank] {
            let bad = Dag::from_edges(bad, vec![vec![], vec![], vec![(0, 0.25), (1, 0.75)]]);
            store.put_dag("a", &bad).unwrap();
            assert!(
                matches!(store.check(), Err(Error::Invariant { message, .. }) if message.contains("written text"))
            );
        }
        store.remove_raw(key(DAG, "a")).unwrap();
        assert!(
            matches!(store.check(), Err(Error::Invariant { message, .. }) if message.contains("DAG record missing"))
        );
    }

    #[test]
    fn replace_and_remove_leave_no_stale_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "First version of the text."));
        put(&store, &doc("a", "# New\n\nSecond version. It is longer."));
        assert_eq!(
            store.get("a").unwrap().unwrap().to_document().unwrap().text,
            "# New\n\nSecond version. It is longer."
        );
        assert_eq!(store.metas().unwrap().len(), 1);
        assert_eq!(store.remove("a").unwrap(), Some(3));
        assert_eq!(keys_of(&store, "a"), 0);
        assert_eq!(store.remove("a").unwrap(), None);
        assert_eq!(store.check().unwrap(), 0);
    }

    #[test]
    fn a_record_kept_under_another_id_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        put(&store, &doc("a", "Some text."));
        let t0 = turn("s", 0);
        store
            .put_turns(&[written(&t0)], &dialogue("s", &t0))
            .unwrap();
        // Document a's records and session s's dialogue, copied as they are
        // under the ids b and t (what a damaged key would leave).
        for kind in RECORDS {
            if let Some(value) = store.value(&key(kind, "a")).unwrap() {
                store.put_raw(key(kind, "b"), value).unwrap();
            }
        }
        let record = store.value(&key(SESSION, "s")).unwrap().unwrap();
        store.put_raw(key(SESSION, "t"), record).unwrap();

        let named = |err: Error| match err {
            Error::Corrupt { key, message } => format!("{key}: {message}"),
            other => panic!("not damage: {other}"),
        };
        let Err(err) = store.get("b") else {
            panic!("b names a, yet it reads")
        };
        assert_eq!(named(err), "Mb: kept under \"b\" but names \"a\"");
        let err = store.dialogue("t").unwrap_err();
        assert_eq!(named(err), "session t: kept under \"t\" but names \"s\"");
        assert!(store.dialogues().is_err());
        // The listing leaves b out; the sound records still read.
        let mut listed: Vec<String> = store.metas().unwrap().into_iter().map(|m| m.id).collect();
        listed.sort();
        let mut sound = vec!["a".to_owned(), t0.meta.id.clone()];
        sound.sort();
        assert_eq!(listed, sound);
        assert_eq!(store.get("a").unwrap().unwrap().meta().unwrap().id, "a");
        assert_eq!(store.dialogue("s").unwrap().unwrap().id, "s");
        // check names both, and goes on past them.
        let report = store.check_all(&Default::default()).unwrap();
        let damaged: Vec<&str> = report.damaged.iter().map(|d| d.doc.as_str()).collect();
        assert_eq!(damaged, ["b", "session t"]);
        assert_eq!(report.documents, 3); // a, the turn and b
    }
}
