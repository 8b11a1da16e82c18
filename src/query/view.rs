//! One document as a query sees it ([`View`]): decoded from the cache,
//! with its token prefix sums; the spans, levels, pages and result items
//! of candidates in it.

use std::ops::Range;
use std::sync::Arc;

use super::select::Candidate;
use crate::engine::cache::CachedDocument;
use crate::error::Result;
use crate::model::document::Document;
use crate::model::edu::Span;
use crate::model::tree::Node;
use crate::query::corpus::Corpus;
use crate::query::result::{Item, PageRect};

/// One document as a query sees it: decoded, with its token prefix sums.
pub(crate) struct View {
    /// The document's id.
    pub id: String,
    /// The cached document, its token sums and DAG.
    pub loaded: Arc<CachedDocument>,
}

impl View {
    /// Document `id` of `corpus`, from the cache.
    pub(crate) fn load(corpus: &Corpus<'_>, id: &str) -> Result<View> {
        Ok(View {
            id: id.to_owned(),
            loaded: corpus.cached_document(id)?,
        })
    }

    pub(crate) fn document(&self) -> &Document {
        &self.loaded.document
    }

    pub(crate) fn node(&self, id: u32) -> &Node {
        &self.document().tree.nodes[id as usize]
    }

    pub(crate) fn span_of(&self, id: u32) -> Span {
        self.node(id).span
    }

    pub(crate) fn children(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        self.node(id).children.iter().copied()
    }

    pub(crate) fn last_edu(&self) -> u32 {
        (self.document().edus.len() as u32).saturating_sub(1)
    }

    /// The deepest node whose span holds all of `span`.
    pub(crate) fn innermost(&self, span: Span) -> u32 {
        let mut current = 0;
        while let Some(child) = self
            .children(current)
            .find(|&c| self.span_of(c).contains(&span))
        {
            current = child;
        }
        current
    }

    /// Level of a candidate: its node's, or one below a run's innermost node.
    pub(crate) fn level(&self, candidate: &Candidate) -> u16 {
        match candidate.node {
            Some(node) => self.node(node).level,
            None => self.node(self.innermost(candidate.span)).level + 1,
        }
    }

    /// The node a run of EDUs exactly is, if any.
    pub(crate) fn node_of_run(&self, span: Span) -> Option<u32> {
        let node = self.innermost(span);
        (self.span_of(node) == span).then_some(node)
    }

    /// The shortest start of `span` holding at least `tokens` tokens (all
    /// of it when it holds fewer); it may pass `tokens` by its last EDU.
    pub(crate) fn leading(&self, span: Span, tokens: u32) -> Span {
        let edus = &self.document().edus;
        let mut held = 0u32;
        for e in span.first..=span.last {
            held = held.saturating_add(edus[e as usize].tokens);
            if held >= tokens {
                return Span::new(span.first, e);
            }
        }
        span
    }

    /// The byte range of `span` in the document's text.
    fn bytes_of(&self, span: Span) -> [u32; 2] {
        let edus = &self.document().edus;
        [
            edus[span.first as usize].start,
            edus[span.last as usize].end,
        ]
    }

    /// The text of `span`.
    pub(crate) fn text_of(&self, span: Span) -> &str {
        let [start, end] = self.bytes_of(span);
        &self.document().text[start as usize..end as usize]
    }

    /// The pages (0-based, end exclusive) `candidate` lies on, when its
    /// document has pages (a PDF).
    pub(crate) fn pages(&self, candidate: &Candidate) -> Option<Range<u32>> {
        let [start, end] = self.bytes_of(candidate.span);
        (self.document().pages.as_ref()).map(|pages| pages.pages_of(start..end))
    }

    /// Where each line of `candidate` is drawn on its PDF's pages (empty
    /// for other formats).
    fn boxes(&self, candidate: &Candidate) -> Vec<PageRect> {
        let [start, end] = self.bytes_of(candidate.span);
        (self.document().pages.iter())
            .flat_map(|pages| pages.line_boxes(start..end))
            .map(|b| PageRect {
                page: b.page + 1,
                x0: b.rect.x0,
                y0: b.rect.y0,
                x1: b.rect.x1,
                y1: b.rect.y1,
            })
            .collect()
    }

    /// The result item `candidate` is, with its lines' boxes when `boxes`.
    pub(crate) fn item(&self, candidate: &Candidate, boxes: bool) -> Item {
        let span = candidate.span;
        let node = candidate.node.or_else(|| self.node_of_run(span));
        let (kind, level, title) = match node {
            Some(id) => {
                let n = self.node(id);
                (n.kind.name(), n.level, Some(n.title.clone()))
            }
            None => ("edu", self.level(candidate), None),
        };
        Item {
            doc: self.id.clone(),
            node,
            kind,
            level,
            title,
            edus: [span.first, span.last],
            bytes: self.bytes_of(span),
            tokens: self.loaded.tokens.tokens(span),
            score: candidate.score,
            match_score: None,
            pages: self.pages(candidate).map(|p| [p.start + 1, p.end]),
            boxes: boxes.then(|| self.boxes(candidate)),
            text: self.text_of(span).to_owned(),
        }
    }
}
