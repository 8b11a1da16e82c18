//! Records: the plain data every other layer reads and writes. A
//! [`document::Document`] (meta, text, EDUs, [`tree::Tree`]) with its node
//! representation and token counts ([`tokens`]), the weighted [`dag::Dag`],
//! a session's [`dialogue::Dialogue`], a document's caller-given
//! [`metadata::Metadata`], where a PDF's text lies on its pages
//! ([`pages::PageLayout`]), identifier rules ([`ids`]) and what
//! rankings return ([`rank`]). This layer imports nothing of the crate but
//! `error`.

pub mod cost;
pub mod dag;
pub mod dialogue;
pub mod document;
pub mod edu;
pub mod ids;
pub mod legacy;
pub mod metadata;
pub mod pages;
pub mod rank;
pub mod time;
pub mod tokens;
pub mod tree;
