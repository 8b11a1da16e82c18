//! The routes (see the table in [`crate::serve`]), the bearer token's
//! check, and the answers that need no store.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::failure::{Failure, json_errors};
use super::handlers::{documents, jobs, retrieval, sessions, store};
use super::mcp;
use super::scheduling::Shared;

/// `/mcp`'s service.
type McpService = rmcp::transport::streamable_http_server::StreamableHttpService<
    mcp::McpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
>;

/// The routes; `command_lines` adds `POST /v1/cli` (the socket's only),
/// `mcp` the MCP service at `/mcp`.
pub(super) fn router(
    shared: Arc<Shared>,
    max_body_bytes: usize,
    command_lines: bool,
    mcp: Option<McpService>,
) -> Router {
    let routes = Router::new()
        .route("/openapi.json", get(openapi))
        .route("/v1/health", get(health))
        .route("/v1/docs", get(documents::documents))
        .route(
            "/v1/docs/{id}",
            put(documents::ingest).delete(documents::remove),
        )
        .route("/v1/ingest", post(jobs::ingest_job))
        .route("/v1/prepared", post(documents::write_prepared))
        .route(
            "/v1/jobs/{job}",
            get(jobs::job_status).delete(jobs::cancel_job),
        )
        .route("/v1/docs/{id}/tree", get(documents::tree))
        .route("/v1/docs/{id}/edus", get(documents::edus))
        .route("/v1/docs/{id}/pages", get(documents::pages))
        .route("/v1/docs/{id}/dag", get(documents::dag))
        .route(
            "/v1/docs/{id}/metadata",
            get(documents::metadata).patch(documents::update_metadata),
        )
        .route("/v1/stats", get(store::stats))
        .route("/v1/check", get(store::check))
        .route("/v1/reindex", post(store::reindex))
        .route("/v1/backup", post(store::backup))
        .route("/v1/vacuum", post(store::vacuum))
        .route("/v1/search", get(retrieval::search))
        .route("/v1/query", post(retrieval::query))
        .route("/v1/ask", post(retrieval::ask))
        .route("/v1/sessions", get(sessions::sessions))
        .route(
            "/v1/sessions/{id}",
            get(sessions::session).delete(sessions::remove_session),
        )
        .route("/v1/sessions/{id}/turns", post(sessions::add_turn))
        .route(
            "/v1/sessions/{id}/turns/{turn}",
            delete(sessions::forget_turn),
        )
        .route("/v1/sessions/{id}/context", get(sessions::context));
    let routes = if command_lines {
        routes.route("/v1/cli", post(store::command))
    } else {
        routes
    };
    let routes = match mcp {
        Some(service) => routes.nest_service("/mcp", service),
        None => routes,
    };
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            authorise,
        ))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::map_response(move |response| {
            json_errors(response, max_body_bytes)
        }))
        .with_state(shared)
}

/// Refuses requests without the bearer token, when one is set.
async fn authorise(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if let Some(token) = &shared.token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
            return Failure::user(StatusCode::UNAUTHORIZED, "a valid bearer token is required")
                .into_response();
        }
    }
    next.run(request).await
}

async fn not_found(request: Request) -> Failure {
    Failure::user(
        StatusCode::NOT_FOUND,
        format!("no route {} {}", request.method(), request.uri().path()),
    )
}

/// `GET /openapi.json`: the OpenAPI 3.1 document of these routes. Behind
/// the bearer token, when one is set, like every route (`/v1/health` too).
pub(super) async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
}

pub(super) async fn health(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "store": shared.path.display().to_string(),
        "version": env!("CARGO_PKG_VERSION"),
        "max_body_bytes": shared.max_body_bytes,
    }))
}
