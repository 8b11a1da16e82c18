//! The store as a whole: `/v1/stats`, `/v1/check`, `/v1/reindex`,
//! `/v1/backup`, `/v1/vacuum`, and forwarded command lines (`/v1/cli`).

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::progress::{CancelToken, NoProgress};
use crate::serve::api::Api;
use crate::serve::client::{CommandOutput, CommandRequest};
use crate::serve::failure::{Answer, Failure};
use crate::serve::scheduling::{Shared, on_store, read, read_waiting, write};
use crate::serve::served::Served;

pub(crate) async fn stats(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, |db| Api::stats(db.api())).await
}

pub(crate) async fn check(State(shared): State<Arc<Shared>>) -> Answer {
    read_waiting(&shared, |db| Api::check(db.api())).await
}

pub(crate) async fn reindex(State(shared): State<Arc<Shared>>) -> Answer {
    write(&shared, |db| {
        Api::reindex(db.api(), &NoProgress, &CancelToken::new())
    })
    .await
}

/// `POST /v1/backup`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackupRequest {
    /// Where the copy goes: a new directory, an absolute path on the
    /// server's machine.
    dest: PathBuf,
}

/// `POST /v1/backup`: a consistent copy of the store at `dest`
/// ([`crate::Db::backup`]), written while other requests go on (writes
/// wait only for its last pass). Like a forwarded command it has no
/// timeout; it runs to its end even when its caller goes away.
pub(crate) async fn backup(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<BackupRequest>, JsonRejection>,
) -> Answer {
    let Json(BackupRequest { dest }) = body?;
    if !dest.is_absolute() {
        return Err(Failure::user(
            StatusCode::BAD_REQUEST,
            format!(
                "the backup's dest {} is relative: give an absolute path on the server's machine",
                dest.display()
            ),
        ));
    }
    let work = move |db: &Served| Api::backup(db.api(), &dest, &NoProgress, &CancelToken::new());
    match on_store(&shared, work).await {
        Ok(answer) => answer.map(Json).map_err(Failure::from),
        Err(why) => Err(Failure::internal(why)),
    }
}

/// `POST /v1/vacuum`: the store rewritten compactly ([`crate::Db::vacuum`]):
/// after the writes queued before it, once every running request has
/// ended, the store is closed, vacuumed and opened again, while later
/// requests wait (those past the request timeout are answered busy). It
/// has no timeout of its own, like a forwarded command. A store that
/// cannot be opened again stops the server.
pub(crate) async fn vacuum(State(shared): State<Arc<Shared>>) -> Answer {
    let Ok(place) = Arc::clone(&shared.queue).try_acquire_owned() else {
        return Err(Failure::busy("the write queue is full; retry"));
    };
    // Spawned, so that it runs to its end, and a store that could not be
    // opened again stops the server, even when its caller goes away.
    let task = tokio::spawn(async move {
        let Ok(turn) = Arc::clone(&shared.writer).acquire_owned().await else {
            return Err(Failure::internal("the writer's permit was closed"));
        };
        let outcome = shared
            .store
            .alone(move |db| {
                let _held = (place, turn);
                let (report, reopened) = db.vacuum_reopened(&NoProgress, &CancelToken::new());
                let answer = report.map(|r| serde_json::to_value(r).unwrap_or_default());
                (answer, reopened)
            })
            .await;
        match outcome {
            Ok(answer) => answer.map(Json).map_err(Failure::from),
            Err(why) => {
                let _ = shared.abandoned.set(why.clone());
                Err(Failure::internal(why))
            }
        }
    });
    task.await
        .map_err(|e| Failure::internal(format!("the vacuum failed: {e}")))?
}

/// Runs a forwarded command line, with no timeout (a long ingest runs as
/// long as it would without a server).
pub(crate) async fn command(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<CommandRequest>, JsonRejection>,
) -> std::result::Result<Json<CommandOutput>, Failure> {
    let Json(request) = body?;
    let Some(runner) = shared.commands.clone() else {
        return Err(Failure::user(
            StatusCode::NOT_FOUND,
            "this server runs no command lines",
        ));
    };
    shared
        .store
        .run(move |db| runner.run(db, request))
        .await
        .map(Json)
        .map_err(|e| Failure::internal(format!("the command failed: {e}")))
}
