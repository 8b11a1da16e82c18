//! Prepared documents: the expensive, pure part of ingest (reading,
//! analysis, the tree, the vectors, the DAG) done with no store open, so
//! it can run in any process or on any machine and be written later, by a
//! store whose embedder made the same vectors, in one atomic batch
//! ([`crate::Db::write_prepared`]). A [`Preparer`] runs exactly the steps
//! a store's own ingest runs ([`prepare`]), so a document prepared and
//! then written is the document that store would have ingested.
//!
//! The byte form that carries a prepared document between processes
//! ([`PreparedDocument::to_bytes`]) is the storage layer's: it is made of
//! the store's own records (`crate::storage::prepared`).

use std::sync::Arc;

use crate::compute::chat::ChatModel;
use crate::compute::device::Device;
use crate::compute::embed::{Embedder, EmbedderConfig};
use crate::error::Result;
use crate::ingest::pipeline::{IngestOptions, LlmSteps, Prepared, prepare};
use crate::ingest::sources::{Origin, Source};
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::document::{DocMeta, Document, PackedVectors};
use crate::progress::{CancelToken, Stage, Steps};

/// One document ready to be written: everything its atomic batch holds,
/// and the identity and dimension of the embedder that made its vectors
/// (a store of another embedder refuses it).
#[derive(Debug)]
pub struct PreparedDocument {
    /// The records the store writes.
    pub(crate) prepared: Prepared,
    /// [`Embedder::identity`] of the embedder that made the vectors.
    pub(crate) embedder: String,
}

impl PreparedDocument {
    /// Wraps what [`prepare`] made with `embedder`.
    pub(crate) fn new(prepared: Prepared, embedder: &dyn Embedder) -> PreparedDocument {
        PreparedDocument {
            prepared,
            embedder: embedder.identity(),
        }
    }

    /// The document's id.
    pub fn id(&self) -> &str {
        &self.prepared.doc.meta.id
    }

    /// The document's listing (id, title, format, counts).
    pub fn meta(&self) -> &DocMeta {
        &self.prepared.doc.meta
    }

    /// The analysed document: text, EDUs, tree, pages and metadata.
    pub fn document(&self) -> &Document {
        &self.prepared.doc
    }

    /// Its node and EDU vectors, 8-bit, as the store keeps them.
    pub fn vectors(&self) -> &PackedVectors {
        &self.prepared.vectors
    }

    /// Its weighted DAG.
    pub fn dag(&self) -> &Dag {
        &self.prepared.dag
    }

    /// What the language-model steps cost to build it.
    pub fn llm_cost(&self) -> &LlmCost {
        &self.prepared.llm
    }

    /// The identity of the embedder that made its vectors.
    pub fn embedder(&self) -> &str {
        &self.embedder
    }

    /// The length of each of its vectors.
    pub fn dimension(&self) -> usize {
        self.prepared.vectors.dimension as usize
    }
}

/// Prepares documents with one embedder (a local model is loaded once, at
/// [`Preparer::new`]), a device for the DAG's batched work and, for the
/// language-model steps, a chat model.
pub struct Preparer {
    embedder: Arc<dyn Embedder>,
    device: Device,
    chat: Option<Arc<dyn ChatModel>>,
}

impl std::fmt::Debug for Preparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preparer")
            .field("embedder", &self.embedder.identity())
            .field("device", &self.device)
            .field("chat", &self.chat.is_some())
            .finish()
    }
}

impl Preparer {
    /// A preparer embedding with the embedder `config` builds (the
    /// configuration a store records: a store built with it accepts what
    /// this prepares), on the device detected here, without a chat model.
    pub fn new(config: &EmbedderConfig) -> Result<Preparer> {
        Ok(Preparer::with_embedder(Arc::from(config.build()?)))
    }

    /// A preparer embedding with an embedder of the application's own.
    pub fn with_embedder(embedder: Arc<dyn Embedder>) -> Preparer {
        Preparer {
            embedder,
            device: Device::detect(),
            chat: None,
        }
    }

    /// Runs the DAG's batched work on `device` instead.
    pub fn on_device(self, device: Device) -> Preparer {
        Preparer { device, ..self }
    }

    /// Gives the language-model steps (the LLM structurer and information
    /// point writer) their chat model.
    pub fn with_chat(self, chat: Arc<dyn ChatModel>) -> Preparer {
        Preparer {
            chat: Some(chat),
            ..self
        }
    }

    /// The embedder.
    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// Prepares `source` as a store's ingest would, telling `report` each
    /// step (a PDF's pages, the texts embedded, the windows a local model
    /// reads) and stopping between any two when `cancel` is set. Bad
    /// content is the same error ingest reports for it.
    pub fn prepare(
        &self,
        source: &Source,
        options: IngestOptions,
        report: &(dyn Fn(Stage, usize, usize) + Sync),
        cancel: &CancelToken,
    ) -> Result<PreparedDocument> {
        let llm = LlmSteps::for_options(&options, self.chat.as_deref())?;
        let steps = Steps { cancel, report };
        let prepared = prepare(
            source,
            options,
            self.embedder.as_ref(),
            &self.device,
            &llm,
            &steps,
        )?;
        Ok(PreparedDocument::new(prepared, self.embedder.as_ref()))
    }

    /// Prepares `bytes` as document `id`, untold and uncancelled.
    pub fn prepare_bytes(
        &self,
        id: &str,
        bytes: Vec<u8>,
        options: IngestOptions,
    ) -> Result<PreparedDocument> {
        let source = Source {
            id: id.to_owned(),
            origin: Origin::Bytes(bytes),
        };
        self.prepare(&source, options, &|_, _, _| {}, &CancelToken::new())
    }
}
