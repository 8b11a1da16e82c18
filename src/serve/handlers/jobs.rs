//! `/v1/ingest` and `/v1/jobs`: ingest jobs of many documents.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use crate::error::Error;
use crate::ingest::pipeline::IngestOptions;
use crate::ingest::sources::{Origin, Source};
use crate::model::document::Format;
use crate::model::metadata::Metadata;
use crate::serve::failure::{Answer, Failure};
use crate::serve::jobs;
use crate::serve::scheduling::{Shared, on_store};

/// `POST /v1/ingest`'s body: the documents of one ingest job, what builds
/// their trees and information points (the model-free ones when absent)
/// and the metadata every one of them is given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobBody {
    documents: Vec<JobDocument>,
    structurer: Option<String>,
    ip_maker: Option<String>,
    metadata: Option<Value>,
}

/// One document of an ingest job: its text, or (for a PDF) its file's
/// bytes in base64.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobDocument {
    id: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    data_base64: Option<String>,
    /// Its format; sniffed from the text (or the bytes) when absent.
    format: Option<String>,
    /// Its own metadata, over the job's.
    metadata: Option<Value>,
}

impl JobDocument {
    /// The document's bytes: its text's, or its decoded `data_base64`.
    fn bytes(self) -> std::result::Result<Vec<u8>, Failure> {
        use base64::Engine as _;
        let id = self.id;
        match (self.text, self.data_base64) {
            (Some(text), None) => Ok(text.into_bytes()),
            (None, Some(data)) => base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .map_err(|e| {
                    Failure::user(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!("document {id:?}: data_base64 is not base64: {e}"),
                    )
                }),
            _ => Err(Failure::user(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("document {id:?}: give exactly one of text and data_base64"),
            )),
        }
    }
}

/// Queues the documents in the body as one ingest job (a write, after the
/// writes before it) and answers at once with its status (202); a full
/// write queue is busy at once.
pub(crate) async fn ingest_job(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<JobBody>, JsonRejection>,
) -> std::result::Result<(StatusCode, Json<Value>), Failure> {
    let Json(body) = body?;
    let structurer = body.structurer.map(|s| s.parse()).transpose()?;
    let ip_maker = body.ip_maker.map(|s| s.parse()).transpose()?;
    let metadata_of = |value: Option<&Value>| value.map(Metadata::from_json).transpose();
    let job_metadata = metadata_of(body.metadata.as_ref())?.unwrap_or_default();
    // The documents of each format and metadata: one ingest run for each.
    let mut runs: Vec<(Option<Format>, Metadata, Vec<Source>)> = Vec::new();
    for document in body.documents {
        let format = document.format.as_deref().map(str::parse).transpose()?;
        let metadata = match metadata_of(document.metadata.as_ref())? {
            Some(own) => job_metadata.clone().overlaid(&own),
            None => job_metadata.clone(),
        };
        let id = document.id.clone();
        let source = Source {
            id,
            origin: Origin::Bytes(document.bytes()?),
        };
        match runs
            .iter_mut()
            .find(|(f, m, _)| *f == format && *m == metadata)
        {
            Some((_, _, sources)) => sources.push(source),
            None => runs.push((format, metadata, vec![source])),
        }
    }
    let Ok(place) = Arc::clone(&shared.queue).try_acquire_owned() else {
        return Err(Failure::busy("the write queue is full; retry"));
    };
    let total = runs
        .iter()
        .flat_map(|(_, _, s)| s)
        .map(Source::len_hint)
        .sum();
    let job = shared
        .jobs
        .add(runs.iter().map(|(_, _, s)| s.len()).sum(), total);
    let running = Arc::clone(&job);
    tokio::spawn(async move {
        let _place = place;
        let Ok(_turn) = Arc::clone(&shared.writer).acquire_owned().await else {
            return;
        };
        let job = Arc::clone(&running);
        let ended = on_store(&shared, move |db| {
            let mut report = crate::engine::write::IngestReport::default();
            for (format, metadata, sources) in runs {
                let options = IngestOptions {
                    format,
                    structurer: structurer.unwrap_or_default(),
                    ip_maker: ip_maker.unwrap_or_default(),
                    metadata,
                    ..Default::default()
                };
                let run = db.ingest(&sources, options, &*job, &job.cancel)?;
                report.documents.extend(run.documents);
                report.failures.extend(run.failures);
                report.llm.add(&run.llm);
            }
            Ok(report)
        })
        .await;
        let ended = ended.unwrap_or_else(|e| Err(Error::Serve(format!("the job failed: {e}"))));
        running.finish(ended);
    });
    Ok((StatusCode::ACCEPTED, Json(job.status())))
}

/// The job numbered in the path.
fn find_job(shared: &Shared, job: &str) -> std::result::Result<Arc<jobs::Job>, Failure> {
    job.parse()
        .ok()
        .and_then(|id| shared.jobs.get(id))
        .ok_or_else(|| Failure::user(StatusCode::NOT_FOUND, format!("no ingest job {job:?}")))
}

pub(crate) async fn job_status(
    State(shared): State<Arc<Shared>>,
    Path(job): Path<String>,
) -> Answer {
    Ok(Json(find_job(&shared, &job)?.status()))
}

/// Asks the job to stop after the document it is writing; answers its
/// status (still `running` until it has stopped).
pub(crate) async fn cancel_job(
    State(shared): State<Arc<Shared>>,
    Path(job): Path<String>,
) -> Answer {
    let job = find_job(&shared, &job)?;
    job.cancel.cancel();
    Ok(Json(job.status()))
}
