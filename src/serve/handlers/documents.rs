//! `/v1/docs`: listing, reading, storing and removing documents.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;

use crate::ingest::pipeline::IngestOptions;
use crate::serve::api::Api;
use crate::serve::failure::{Answer, Failure};
use crate::serve::scheduling::{Shared, read, write};

/// `GET /v1/docs`' query string: a WHERE condition on the documents'
/// metadata, or none for all.
#[derive(Deserialize)]
pub(crate) struct DocsArgs {
    #[serde(rename = "where")]
    condition: Option<String>,
}

pub(crate) async fn documents(
    State(shared): State<Arc<Shared>>,
    Query(args): Query<DocsArgs>,
) -> Answer {
    read(&shared, move |db| {
        Api::documents(db.api(), args.condition.as_deref())
    })
    .await
}

pub(crate) async fn metadata(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::metadata(db.api(), &id)).await
}

/// `PATCH /v1/docs/{id}/metadata`'s body: keys to set (a JSON object)
/// and keys to remove.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetadataChange {
    #[serde(default)]
    set: Option<serde_json::Value>,
    #[serde(default)]
    unset: Vec<String>,
}

pub(crate) async fn update_metadata(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    change: std::result::Result<
        axum::Json<MetadataChange>,
        axum::extract::rejection::JsonRejection,
    >,
) -> Answer {
    let axum::Json(change) = change?;
    let set = change.set.unwrap_or_else(|| serde_json::json!({}));
    write(&shared, move |db| {
        Api::update_metadata(db.api(), &id, &set, &change.unset)
    })
    .await
}

pub(crate) async fn tree(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::tree(db.api(), &id)).await
}

pub(crate) async fn pages(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::pages(db.api(), &id)).await
}

/// `GET /v1/docs/{id}/edus`' query string: an inclusive EDU range, or
/// none for all.
#[derive(Deserialize)]
pub(crate) struct EduRange {
    first: Option<u32>,
    last: Option<u32>,
}

pub(crate) async fn edus(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(range): Query<EduRange>,
) -> Answer {
    let range = match (range.first, range.last) {
        (None, None) => None,
        (Some(first), last) => Some((first, last.unwrap_or(first))),
        (None, Some(_)) => {
            return Err(Failure::user(
                StatusCode::BAD_REQUEST,
                "`last` needs `first` (an inclusive EDU range)",
            ));
        }
    };
    read(&shared, move |db| Api::edus(db.api(), &id, range)).await
}

/// `GET /v1/docs/{id}/dag`'s query string.
#[derive(Deserialize)]
pub(crate) struct DagArgs {
    level: Option<u16>,
}

pub(crate) async fn dag(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(args): Query<DagArgs>,
) -> Answer {
    read(&shared, move |db| {
        Api::dag_listing(db.api(), &id, args.level)
    })
    .await
}

/// `PUT /v1/docs/{id}`'s query string.
#[derive(Deserialize)]
pub(crate) struct IngestArgs {
    format: Option<String>,
}

/// Stores the request body as document `id` (replacing one of that id),
/// in the format given or sniffed.
pub(crate) async fn ingest(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    Query(args): Query<IngestArgs>,
    body: axum::body::Bytes,
) -> Answer {
    let format = args.format.map(|f| f.parse()).transpose()?;
    write(&shared, move |db| {
        let options = IngestOptions {
            format,
            ..Default::default()
        };
        Api::ingest_bytes(db.api(), &id, body.to_vec(), options)
    })
    .await
}

/// Writes the prepared documents of the request body (a batch of
/// frames) in one atomic batch.
pub(crate) async fn write_prepared(
    State(shared): State<Arc<Shared>>,
    body: axum::body::Bytes,
) -> Answer {
    write(&shared, move |db| {
        Api::write_prepared(db.api(), body.to_vec())
    })
    .await
}

pub(crate) async fn remove(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    write(&shared, move |db| Api::remove(db.api(), &id)).await
}
