//! [`ChatError`]: why a chat model call failed.

/// A failure of a chat model (an OpenAI-compatible chat server).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The server could not be reached or did not answer in time.
    #[error("chat request to {url} failed: {message}")]
    Request {
        /// The endpoint called.
        url: String,
        /// What the HTTP client reported.
        message: String,
    },
    /// The server answered with an error status (after any retries).
    #[error("chat server {url} answered {status}: {body}")]
    Status {
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the reply body.
        body: String,
    },
    /// The server's reply is not a well-formed chat completion.
    #[error("chat server {url} sent a malformed reply: {message}")]
    Malformed {
        /// The endpoint called.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The chat model's settings are unusable.
    #[error("chat model configuration: {0}")]
    Config(String),
}
