//! The handlers of the routes, by resource.

pub(super) mod documents;
pub(super) mod jobs;
pub(super) mod retrieval;
pub(super) mod sessions;
pub(super) mod store;
