//! A failed request as its JSON error (`{"error": {"class", "message",
//! …}}`) and HTTP status, the framework's own refusals included.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::api;
use crate::error::Error;

/// A failed request: the error class, its HTTP status and the message.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) status: StatusCode,
    pub(super) class: &'static str,
    pub(super) message: String,
    /// Query errors' location and hint.
    pub(super) located: Option<Value>,
    /// The error is damage to stored records.
    pub(super) damage: bool,
}

impl Failure {
    pub(super) fn new(
        status: StatusCode,
        class: &'static str,
        message: impl Into<String>,
    ) -> Failure {
        Failure {
            status,
            class,
            message: message.into(),
            located: None,
            damage: false,
        }
    }

    pub(super) fn user(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure::new(status, "user", message)
    }

    pub(super) fn busy(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
    }

    pub(super) fn internal(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        let message = err.to_string();
        if err.is_busy() {
            return Failure::busy(message);
        }
        if !err.is_user_error() {
            return Failure {
                damage: err.is_damage(),
                ..Failure::internal(message)
            };
        }
        let status = match err {
            Error::NoSuchDocument(_)
            | Error::NoSuchSession(_)
            | Error::NoSuchTurn { .. }
            | Error::NoSuchTopic { .. } => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        let located = api::located(&err);
        Failure {
            located,
            ..Failure::user(status, message)
        }
    }
}

impl From<JsonRejection> for Failure {
    fn from(rejection: JsonRejection) -> Failure {
        Failure::user(rejection.status(), rejection.body_text())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut error = json!({"class": self.class, "message": self.message});
        if let (Some(located), Some(fields)) = (self.located, error.as_object_mut()) {
            fields.insert("query".into(), located);
        }
        if self.damage {
            error["damage"] = json!(true);
        }
        (self.status, Json(json!({ "error": error }))).into_response()
    }
}

pub(super) type Answer = std::result::Result<Json<Value>, Failure>;

/// Gives the framework's own refusals (a path or query string that does
/// not parse, a body over the limit, a method a route lacks), which are
/// plain text or empty, the JSON error shape of every other error; a body
/// over the limit, refused by the framework or by a handler's JSON
/// extractor, is told the limit (`max_body_bytes`). Other headers
/// (`Allow`) are kept.
pub(super) async fn json_errors(response: Response, max_body_bytes: usize) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let too_large = status == StatusCode::PAYLOAD_TOO_LARGE;
    if (is_json && !too_large) || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if too_large {
        format!(
            "the request body is over this server's limit of {max_body_bytes} bytes (GET /v1/health gives it as max_body_bytes)"
        )
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_owned()
    } else {
        text
    };
    let class = if status.is_server_error() {
        "internal"
    } else {
        "user"
    };
    let mut answer = Failure::new(status, class, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}
