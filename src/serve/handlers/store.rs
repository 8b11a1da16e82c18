//! The store as a whole: `/v1/stats`, `/v1/check`, `/v1/reindex`, and
//! forwarded command lines (`/v1/cli`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;

use crate::progress::{CancelToken, NoProgress};
use crate::serve::api::Api;
use crate::serve::client::{CommandOutput, CommandRequest};
use crate::serve::failure::{Answer, Failure};
use crate::serve::scheduling::{Shared, on_store, read, read_waiting, write};

pub(crate) async fn stats(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, Api::stats).await
}

pub(crate) async fn check(State(shared): State<Arc<Shared>>) -> Answer {
    read_waiting(&shared, Api::check).await
}

pub(crate) async fn reindex(State(shared): State<Arc<Shared>>) -> Answer {
    write(&shared, |db| {
        Api::reindex(db, &NoProgress, &CancelToken::new())
    })
    .await
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
    on_store(&shared, move |db| runner.run(db, request))
        .await
        .map(Json)
        .map_err(|e| Failure::internal(format!("the command failed: {e}")))
}
