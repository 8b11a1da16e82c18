//! The byte form of a [`PreparedDocument`], which carries it between
//! processes (a worker that prepares, a writer that stores; an HTTP body):
//! an 8-byte magic, the store format it was made for (u32, little-endian),
//! then one rkyv archive of the document's records as the store keeps
//! them. A batch of them is a run of frames, each its length (u64,
//! little-endian) and then those bytes.
//!
//! The bytes may come from anywhere, so decoding trusts nothing: the
//! archive is checked (bytecheck), then everything the store checks of a
//! document it reads ([`Document::validate`], [`Dag::validate`], a whole
//! row of the right length for every node and EDU, a valid id that is
//! not a session turn's, metadata
//! that decodes). A refusal is [`Error::BadPrepared`], naming the document
//! and what is wrong; nothing is decoded half.

use rkyv::rancor::BoxedError;
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ingest::pipeline::Prepared;
use crate::ingest::prepared::PreparedDocument;
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::document::{DocMeta, Document, PackedVectors, QuantizedRows};
use crate::model::edu::Edu;
use crate::model::metadata::Metadata;
use crate::model::pages::PageLayout;
use crate::model::tree::Tree;
use crate::storage::store::FORMAT_VERSION;

/// The first bytes of a prepared document.
const MAGIC: &[u8; 8] = b"EDUPREP\0";
/// Magic and format version.
const HEADER: usize = MAGIC.len() + 4;
/// The length before each document of a batch.
const FRAME_LENGTH: usize = 8;

/// A prepared document's records, as archived.
#[derive(Archive, Serialize, Deserialize)]
struct PreparedRecord {
    embedder: String,
    meta: DocMeta,
    text: String,
    edus: Vec<Edu>,
    tree: Tree,
    pages: Option<PageLayout>,
    /// JSON, as the store keeps metadata.
    metadata: String,
    vectors: PackedVectors,
    dag: Dag,
    /// JSON, as the store keeps build costs.
    cost: String,
}

impl PreparedDocument {
    /// The document's bytes (see the module's description).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let Prepared {
            doc,
            vectors,
            dag,
            llm,
        } = &self.prepared;
        let record = PreparedRecord {
            embedder: self.embedder.clone(),
            meta: doc.meta.clone(),
            text: doc.text.clone(),
            edus: doc.edus.clone(),
            tree: doc.tree.clone(),
            pages: doc.pages.clone(),
            metadata: doc.metadata.to_json().to_string(),
            vectors: vectors.clone(),
            dag: dag.clone(),
            cost: serde_json::to_string(llm)
                .map_err(|e| Error::Storage(format!("encoding a build cost: {e}")))?,
        };
        let archived = rkyv::to_bytes::<BoxedError>(&record)
            .map_err(|e| Error::Storage(format!("archiving a prepared document: {e}")))?;
        let mut bytes = Vec::with_capacity(HEADER + archived.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&archived);
        Ok(bytes)
    }

    /// A document from its bytes, checked whole (see the module's
    /// description); [`Error::BadPrepared`] when they are not one.
    pub fn from_bytes(bytes: &[u8]) -> Result<PreparedDocument> {
        decode(bytes, "")
    }
}

/// `docs` as one batch body: each document's length, then its bytes.
pub fn encode_batch(docs: &[PreparedDocument]) -> Result<Vec<u8>> {
    let encoded = docs
        .iter()
        .map(PreparedDocument::to_bytes)
        .collect::<Result<Vec<_>>>()?;
    Ok(frame_batch(&encoded))
}

/// Documents already in their bytes ([`PreparedDocument::to_bytes`]) as
/// one batch body, unchecked (the writer checks them).
pub fn frame_batch(docs: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let length = docs.iter().map(|d| FRAME_LENGTH + d.as_ref().len()).sum();
    let mut body = Vec::with_capacity(length);
    for doc in docs {
        let bytes = doc.as_ref();
        body.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        body.extend_from_slice(bytes);
    }
    body
}

/// The documents of a batch body, in order; [`Error::BadPrepared`] naming
/// the first frame that does not hold a whole, valid document.
pub fn decode_batch(body: &[u8]) -> Result<Vec<PreparedDocument>> {
    let mut docs = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let index = docs.len();
        let what = || format!("{index} of the batch (at byte {at})");
        let length = body
            .get(at..at + FRAME_LENGTH)
            .map(|b| u64::from_le_bytes(b.try_into().expect("eight bytes")))
            .ok_or_else(|| bad(what(), "the batch ends inside a frame's length"))?;
        let start = at + FRAME_LENGTH;
        let end = usize::try_from(length)
            .ok()
            .and_then(|length| start.checked_add(length))
            .filter(|&end| end <= body.len())
            .ok_or_else(|| {
                bad(
                    what(),
                    format!(
                        "its frame says {length} bytes but only {} follow",
                        body.len() - start
                    ),
                )
            })?;
        docs.push(decode(&body[start..end], &what())?);
        at = end;
    }
    Ok(docs)
}

fn bad(what: String, message: impl Into<String>) -> Error {
    Error::BadPrepared {
        what,
        message: message.into(),
    }
}

/// One document's bytes; `what` places it in its batch (empty for one
/// alone), its id names it once read.
fn decode(bytes: &[u8], what: &str) -> Result<PreparedDocument> {
    let refuse = |message: String| bad(what.to_owned(), message);
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err(refuse(
            "not a prepared document (it does not start with edudb's magic bytes)".into(),
        ));
    }
    let version = u32::from_le_bytes(bytes[MAGIC.len()..HEADER].try_into().expect("four bytes"));
    if version != FORMAT_VERSION {
        return Err(refuse(format!(
            "made for store format {version}; this edudb writes format {FORMAT_VERSION} (prepare it again with this version)"
        )));
    }
    // rkyv reads its root at an aligned address: the bytes after the
    // header are copied to one (a caller's buffer may be anywhere).
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len() - HEADER);
    aligned.extend_from_slice(&bytes[HEADER..]);
    let record = rkyv::from_bytes::<PreparedRecord, BoxedError>(&aligned)
        .map_err(|e| refuse(format!("its records do not decode ({e})")))?;
    let id = record.meta.id.clone();
    let named = match what {
        "" => format!("{id:?}"),
        what => format!("{what} ({id:?})"),
    };
    let refuse = |message: String| bad(named.clone(), message);
    // Not a session turn's id either: turns are written with their session.
    crate::model::ids::validate_id(&id).map_err(|e| refuse(e.to_string()))?;
    let metadata = serde_json::from_str(&record.metadata)
        .map_err(|e| e.to_string())
        .and_then(|json| Metadata::from_json(&json).map_err(|e| e.to_string()))
        .map_err(|e| refuse(format!("its metadata does not decode ({e})")))?;
    let llm: LlmCost = serde_json::from_str(&record.cost)
        .map_err(|e| refuse(format!("its build cost does not decode ({e})")))?;
    let doc = Document {
        meta: record.meta,
        text: record.text,
        edus: record.edus,
        tree: record.tree,
        pages: record.pages,
        metadata,
    };
    doc.validate().map_err(&refuse)?;
    let edus = doc.edus.len() as u32;
    record
        .dag
        .validate(edus)
        .map_err(|m| refuse(format!("DAG: {m}")))?;
    check_rows(&record.vectors, doc.tree.nodes.len(), doc.edus.len()).map_err(&refuse)?;
    Ok(PreparedDocument {
        prepared: Prepared {
            doc,
            vectors: record.vectors,
            dag: record.dag,
            llm,
        },
        embedder: record.embedder,
    })
}

/// Whether `vectors` hold one whole, finite row per node and per EDU.
fn check_rows(
    vectors: &PackedVectors,
    nodes: usize,
    edus: usize,
) -> std::result::Result<(), String> {
    let dimension = vectors.dimension as usize;
    if dimension == 0 {
        return Err("its vectors have dimension 0".into());
    }
    let whole = |rows: &QuantizedRows, count: usize| {
        rows.scales.len() == count
            && rows.codes.len() == count * dimension
            && rows.scales.iter().all(|s| s.is_finite())
    };
    for (rows, count, what) in [
        (&vectors.nodes, nodes, "node"),
        (&vectors.edus, edus, "EDU"),
    ] {
        if !whole(rows, count) {
            return Err(format!(
                "its vectors do not hold one finite row of {dimension} per {what} ({count} {what}s; {} scales, {} values)",
                rows.scales.len(),
                rows.codes.len()
            ));
        }
    }
    Ok(())
}
