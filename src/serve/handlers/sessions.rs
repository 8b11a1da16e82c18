//! `/v1/sessions`: dialogue memory.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;

use crate::memory::TurnInput;
use crate::serve::api::Api;
use crate::serve::failure::{Answer, Failure};
use crate::serve::scheduling::{Shared, read, write};

pub(crate) async fn sessions(State(shared): State<Arc<Shared>>) -> Answer {
    read(&shared, |db| Api::sessions(db.api())).await
}

pub(crate) async fn session(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Answer {
    read(&shared, move |db| Api::session(db.api(), &id)).await
}

pub(crate) async fn remove_session(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Answer {
    write(&shared, move |db| Api::remove_session(db.api(), &id)).await
}

pub(crate) async fn forget_turn(
    State(shared): State<Arc<Shared>>,
    Path((id, turn)): Path<(String, String)>,
) -> Answer {
    let Ok(turn) = turn.parse::<u32>() else {
        return Err(Failure::user(
            StatusCode::BAD_REQUEST,
            format!("{turn:?} is not a turn number"),
        ));
    };
    write(&shared, move |db| Api::forget_turn(db.api(), &id, turn)).await
}

/// Appends the turn in the body (one `session add --jsonl` line, see
/// [`TurnInput::from_json`]).
pub(crate) async fn add_turn(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    body: String,
) -> Answer {
    let turn =
        TurnInput::from_json(&body).map_err(|e| Failure::user(StatusCode::BAD_REQUEST, e))?;
    write(&shared, move |db| {
        Api::append_turn(db.api(), &session, &turn)
    })
    .await
}

/// `GET /v1/sessions/{id}/context`'s query string.
#[derive(Deserialize)]
pub(crate) struct ContextArgs {
    budget: u64,
    query: Option<String>,
}

pub(crate) async fn context(
    State(shared): State<Arc<Shared>>,
    Path(session): Path<String>,
    Query(args): Query<ContextArgs>,
) -> Answer {
    read(&shared, move |db| {
        Api::session_context(db.api(), &session, args.budget, args.query.as_deref())
    })
    .await
}
