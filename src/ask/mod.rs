//! Question answering over the store with a chat model (PECAN's dynamic
//! progress control, CSTree-SRI's introspection): retrieve evidence in
//! score order ([`evidence`], a cursor an agent may also drive itself),
//! show it to the model a group at a time and stop when it judges the
//! evidence enough ([`judge`]), then answer with citations that are edudb
//! coordinates ([`answer`]); [`run`] ties them together.

pub mod answer;
pub mod evidence;
pub mod judge;
pub mod run;

pub use evidence::Evidence;
pub use run::{AskOptions, AskResult, AskStep, Stopped};
