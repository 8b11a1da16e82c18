//! What each record of the store is: the key it is kept under and how its
//! value is encoded (rkyv archives, validated on access; a few JSON
//! records).

use rkyv::rancor::BoxedError;

use crate::error::{Error, Result};
use crate::model::cost::LlmCost;
use crate::model::dialogue::{ArchivedDialogue, Dialogue};
use crate::model::document::{ArchivedDocMeta, DocMeta};

/// Version of the on-disk layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 10;

pub(super) const VERSION_KEY: &[u8] = b"\0version";

pub(super) const SEQ_KEY: &[u8] = b"\0seq";

pub(super) const TRIMMED_KEY: &[u8] = b"\0trimmed";

pub(super) const EMBEDDER_KEY: &[u8] = b"\0embedder";

/// Present once any document was given metadata: a store without it never
/// looks a document's metadata record up, so its reads touch only the
/// pages they did before metadata existed.
pub(super) const HAS_METADATA_KEY: &[u8] = b"\0metadata";

/// The documents found lost to a damaged change log ([`Loss`](super::Loss), JSON).
pub(super) const LOST_KEY: &[u8] = b"\0lost";

pub(super) const META: u8 = b'M';

pub(super) const TEXT: u8 = b'T';

pub(super) const EDUS: u8 = b'E';

pub(super) const TREE: u8 = b'N';

/// `f32` vectors ([`DocVectors`](crate::model::document::DocVectors)), as stores of format 6 and older wrote
/// them: read, never written.
pub(super) const VECTORS: u8 = b'V';

/// 8-bit vectors ([`PackedVectors`](crate::model::document::PackedVectors)), written since format 7.
pub(super) const PACKED_VECTORS: u8 = b'Q';

pub(super) const DAG: u8 = b'G';

const LOG: u8 = b'L';

/// A session's dialogue record (added without a format bump: a new record
/// kind under a new prefix, which older stores simply do not have).
pub(super) const SESSION: u8 = b'S';

/// What the language-model steps cost to build a document (JSON
/// [`LlmCost`]), kept only for documents built with a model; added without
/// a format bump, like sessions: a new kind under a new prefix.
pub(super) const COST: u8 = b'C';

/// Where a PDF document's text lies on its pages ([`PageLayout`](crate::model::pages::PageLayout)), kept
/// only for documents read from a PDF (since format 9).
pub(super) const PAGES: u8 = b'B';

/// A document's caller-given metadata (JSON [`Metadata`](crate::model::metadata::Metadata)), kept only
/// for documents that have some; added without a format bump, like
/// sessions.
pub(super) const METADATA: u8 = b'U';

/// An entry of the metadata index (see `super::metadata`).
pub(super) const METADATA_INDEX: u8 = b'u';

/// The manifest of a record kept apart: `H`, the record's kind, the id;
/// the value is a [`RecordFile`](crate::storage::record_files::RecordFile), or, in stores of format 6 and older, a
/// [`Manifest`](super::kept_apart::Manifest) of pieces.
pub(super) const MANIFEST: u8 = b'H';

/// A piece of a record (format 6 and older): `P`, the record's kind, the
/// id, a 0 byte, the piece's index (u32, big-endian, so pieces sort in
/// order).
pub(super) const PIECE: u8 = b'P';

pub(super) const RECORDS: [u8; 8] = [META, TEXT, EDUS, TREE, VECTORS, PACKED_VECTORS, DAG, PAGES];

/// The records that may be kept apart (metadata is always small).
pub(super) const PIECEABLE: [u8; 7] = [TEXT, EDUS, TREE, VECTORS, PACKED_VECTORS, DAG, PAGES];

pub(super) fn key(kind: u8, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 1);
    key.push(kind);
    key.extend_from_slice(id.as_bytes());
    key
}

/// The key of the manifest of record `kind` of document `id`.
pub(super) fn manifest_key(kind: u8, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 2);
    key.extend_from_slice(&[MANIFEST, kind]);
    key.extend_from_slice(id.as_bytes());
    key
}

/// The key of piece `index` of record `kind` of document `id`.
pub(super) fn piece_key(kind: u8, id: &str, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(id.len() + 7);
    key.extend_from_slice(&[PIECE, kind]);
    key.extend_from_slice(id.as_bytes());
    key.push(0);
    key.extend_from_slice(&index.to_be_bytes());
    key
}

pub(super) fn log_key(seq: u64) -> [u8; 9] {
    let mut key = [LOG; 9];
    key[1..].copy_from_slice(&seq.to_be_bytes());
    key
}

pub(super) fn read_u64(value: Option<&[u8]>, name: &str) -> Result<u64> {
    match value {
        None => Ok(0),
        Some(v) => <[u8; 8]>::try_from(v)
            .map(u64::from_be_bytes)
            .map_err(|_| Error::Corrupt {
                key: name.into(),
                message: "expected 8 bytes".into(),
            }),
    }
}

pub(super) fn archive<T>(value: &T) -> Result<rkyv::util::AlignedVec>
where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                BoxedError,
            >,
        >,
{
    rkyv::to_bytes::<BoxedError>(value).map_err(|e| Error::Storage(format!("archiving: {e}")))
}

pub(super) fn access<'a, T>(bytes: &'a [u8], what: &str) -> Result<&'a T>
where
    T: rkyv::Portable
        + for<'b> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'b, BoxedError>>,
{
    rkyv::access::<T, BoxedError>(bytes).map_err(|e| Error::Corrupt {
        key: what.into(),
        message: e.to_string(),
    })
}

/// A metadata record (`key` names it in errors), once it names the
/// document its key does ([`same_id`]).
pub(super) fn decode_meta(key: &[u8], value: &[u8]) -> Result<DocMeta> {
    let name = String::from_utf8_lossy(key).into_owned();
    let archived = access::<ArchivedDocMeta>(value, &name)?;
    same_id(&String::from_utf8_lossy(&key[1..]), &archived.id, || {
        name.clone()
    })?;
    rkyv::deserialize::<DocMeta, BoxedError>(archived).map_err(|e| Error::Corrupt {
        key: name,
        message: e.to_string(),
    })
}

/// A record kept under one id that names another is damaged (a write that
/// trusted it would put its content under the other id): `Corrupt`, with
/// `record()` naming it.
pub(super) fn same_id(key_id: &str, named: &str, record: impl FnOnce() -> String) -> Result<()> {
    if key_id == named {
        return Ok(());
    }
    Err(Error::Corrupt {
        key: record(),
        message: format!("kept under {key_id:?} but names {named:?}"),
    })
}

/// Decodes session `id`'s dialogue record, once it names that session
/// ([`same_id`]), and checks its tree ([`Dialogue::check_tree`]), so every
/// dialogue read from the store is safe to walk.
pub(super) fn decode_dialogue(value: &[u8], id: &str) -> Result<Dialogue> {
    let name = format!("session {id}");
    let archived = access::<ArchivedDialogue>(value, &name)?;
    same_id(id, &archived.id, || name.clone())?;
    let dialogue =
        rkyv::deserialize::<Dialogue, BoxedError>(archived).map_err(|e| Error::Corrupt {
            key: name.clone(),
            message: e.to_string(),
        })?;
    dialogue
        .check_tree()
        .map_err(|message| Error::Corrupt { key: name, message })?;
    Ok(dialogue)
}

/// Document `id`'s build cost record, decoded; damage when it does not.
pub(super) fn decode_cost(id: &str, value: &[u8]) -> Result<LlmCost> {
    serde_json::from_slice(value).map_err(|e| Error::Corrupt {
        key: format!("cost of {id}"),
        message: e.to_string(),
    })
}
