//! [`EmbedError`]: why an embedder failed.

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The server could not be reached or did not answer in time.
    #[error("embedding request to {url} failed: {message}")]
    Request {
        /// The endpoint called.
        url: String,
        /// What the HTTP client reported.
        message: String,
    },
    /// The server answered with an error status (after any retries).
    #[error("embedding server {url} answered {status}: {body}")]
    Status {
        /// The endpoint called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the reply body.
        body: String,
    },
    /// The server's reply is not a well-formed embeddings response.
    #[error("embedding server {url} sent a malformed reply: {message}")]
    Malformed {
        /// The endpoint called.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// A vector has the wrong length.
    #[error("embedder {identity} returned a vector of dimension {found}; expected {expected}")]
    Dimension {
        /// The embedder.
        identity: String,
        /// The store's dimension.
        expected: usize,
        /// The returned vector's length.
        found: usize,
    },
    /// The embedder returned another number of vectors than it was given
    /// texts.
    #[error("embedder {identity} returned {found} vectors for {expected} texts")]
    Count {
        /// The embedder.
        identity: String,
        /// Texts given.
        expected: usize,
        /// Vectors returned.
        found: usize,
    },
    /// A vector has a component that is not a finite number.
    #[error("embedder {identity} returned a vector with a component that is not a finite number")]
    NotFinite {
        /// The embedder.
        identity: String,
    },
    /// A local model could not be loaded or run.
    #[error("local model {}: {message}", dir.display())]
    Model {
        /// The model's directory.
        dir: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The embedder's settings are unusable.
    #[error("embedder configuration: {0}")]
    Config(String),
}
