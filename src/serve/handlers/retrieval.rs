//! `/v1/search`, `/v1/query` and `/v1/ask`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::Value;

use crate::ask::AskOptions;
use crate::query::Params;
use crate::serve::api::Api;
use crate::serve::failure::Answer;
use crate::serve::scheduling::{Shared, read, read_waiting};

/// `GET /v1/search`'s query string.
#[derive(Deserialize)]
pub(crate) struct SearchArgs {
    q: String,
    limit: Option<usize>,
}

pub(crate) async fn search(
    State(shared): State<Arc<Shared>>,
    Query(args): Query<SearchArgs>,
) -> Answer {
    read(&shared, move |db| {
        Api::search(db.api(), &args.q, args.limit.unwrap_or(10))
    })
    .await
}

/// `POST /v1/query`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryBody {
    statement: String,
    #[serde(default)]
    params: serde_json::Map<String, Value>,
    /// Run as if the statement began with `EXPLAIN`.
    #[serde(default)]
    explain: bool,
}

pub(crate) async fn query(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<QueryBody>, JsonRejection>,
) -> Answer {
    let Json(body) = body?;
    let params = Params::from_json(&body.params)?;
    read(&shared, move |db| {
        Api::query(db.api(), &body.statement, &params, body.explain)
    })
    .await
}

/// `POST /v1/ask`'s body: the question and [`AskOptions`] (their
/// defaults when absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskBody {
    question: String,
    budget: Option<u64>,
    statement: Option<String>,
    group: Option<usize>,
    answer: Option<bool>,
}

/// Answers the question in the body with the server's chat model, as a
/// read (past the request timeout, busy while it finishes unseen).
pub(crate) async fn ask(
    State(shared): State<Arc<Shared>>,
    body: std::result::Result<Json<AskBody>, JsonRejection>,
) -> Answer {
    let Json(body) = body?;
    let defaults = AskOptions::default();
    let options = AskOptions {
        budget: body.budget.unwrap_or(defaults.budget),
        statement: body.statement,
        group: body.group.unwrap_or(defaults.group),
        answer: body.answer.unwrap_or(defaults.answer),
    };
    read_waiting(&shared, move |db| {
        Api::ask(db.api(), &body.question, &options)
    })
    .await
}
