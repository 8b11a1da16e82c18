//! The query language: statements that say where to look, how to seed
//! relevance, how to walk the structure, how much text may come back and
//! in what order. See `docs/query-language.md` for the grammar and the
//! semantics of every clause.
//!
//! Pipeline: [`lexer`] → [`parser`] (syntax, to an [`ast::Statement`]) →
//! [`plan`] (binding parameters, semantic checks) → `exec` (running the
//! operators over `view`s of documents, with [`select`] doing the
//! budgeted choice and `links` PROPAGATE's step across documents).

pub mod ast;
mod catalog;
mod condition;
pub(crate) mod corpus;
pub mod error;
mod exec;
pub mod lexer;
mod links;
mod params;
pub mod parser;
pub mod plan;
mod result;
pub mod select;
mod statement;
mod view;

pub use ast::{Order, Output};
pub use error::QueryError;
pub use params::{Param, Params};
pub use result::{Item, QueryResult, Rows, Selection, Stage};
pub use statement::Query;
