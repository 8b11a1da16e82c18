//! The ingest pipeline, bytes to an analysed [`Document`]: decode, pick the
//! format, extract layout, segment into EDUs, count tokens, build and
//! validate the tree; then, for the store, embed its nodes and EDUs and
//! build its DAG ([`prepare`]). Pure: nothing here touches the store.

use std::path::Path;

use crate::compute::chat::ChatModel;
use crate::compute::device::Device;
use crate::compute::embed::{EmbedError, Embedder, normalise};
use crate::compute::quantize::push_row;
use crate::error::{Error, Result};
use crate::ingest::dag::attention::{AttentionSource, ComputedAttention};
use crate::ingest::dag::bridge::BridgeIpMaker;
use crate::ingest::dag::build::DagConfig;
use crate::ingest::dag::ip::EduVectors;
use crate::ingest::dag::llm::{IpWriterOptions, LlmIpWriter};
use crate::ingest::dag::model_attention::ModelAttention;
use crate::ingest::layout::{self, BlockKind, Layout};
use crate::ingest::segment;
use crate::ingest::sources::{Source, check_extension, format_of_extension};
use crate::ingest::tree::llm::{LlmStructurer, StructurerOptions};
use crate::ingest::tree::{BlockEdus, LayoutTreeBuilder, StructureInput, Tree, TreeBuilder};
use crate::model::cost::LlmCost;
use crate::model::dag::Dag;
use crate::model::document::{DocMeta, Document, Format, PackedVectors, QuantizedRows};
use crate::model::edu::{Edu, EduKind};
use crate::model::metadata::Metadata;
use crate::model::pages::PageLayout;
use crate::model::tokens;
use crate::progress::{self, CancelToken, Stage, Steps};

/// Largest document accepted: coordinates are 32-bit.
pub const MAX_DOCUMENT_BYTES: usize = u32::MAX as usize;
/// How far into a file binary sniffing looks.
const SNIFF_BYTES: usize = 8192;

/// How to read one input.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// Replace invalid UTF-8 with U+FFFD instead of rejecting the input.
    pub lossy: bool,
    /// What builds each document's tree.
    pub structurer: Structurer,
    /// What makes each document's information points.
    pub ip_maker: IpMakerKind,
    /// The metadata every document ingested with these options is given,
    /// over the metadata its source gives about itself ([`Layout::metadata`]):
    /// a key given here wins.
    pub metadata: Metadata,
}

/// What makes a document's information points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IpMakerKind {
    /// The model-free points: shared terms, then salient EDUs
    /// ([`BridgeIpMaker`]).
    #[default]
    Bridge,
    /// PECAN's points written by the store's chat model
    /// ([`LlmIpWriter`]), the model-free points for a window whose
    /// replies stay invalid.
    Llm,
}

impl IpMakerKind {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            IpMakerKind::Bridge => "bridge",
            IpMakerKind::Llm => "llm",
        }
    }
}

impl std::str::FromStr for IpMakerKind {
    type Err = Error;

    fn from_str(name: &str) -> Result<IpMakerKind> {
        one_named(
            name,
            &[IpMakerKind::Bridge, IpMakerKind::Llm],
            IpMakerKind::name,
            "IP maker",
        )
    }
}

/// The one of `choices` whose `name_of` is `name` (in any case), or a usage
/// error naming the `what` and the choices.
fn one_named<T: Copy>(
    name: &str,
    choices: &[T],
    name_of: fn(T) -> &'static str,
    what: &str,
) -> Result<T> {
    (choices.iter().copied())
        .find(|&choice| name_of(choice).eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|&c| name_of(c)).collect();
            Error::Usage(format!(
                "unknown {what} {name:?}: expected {}",
                names.join(" or ")
            ))
        })
}

/// What builds a document's tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Structurer {
    /// The model-free [`LayoutTreeBuilder`]: headings, blocks, cohesion.
    #[default]
    Layout,
    /// LingoEDU's structurer through the store's chat model
    /// ([`LlmStructurer`]) for the sections, with the layout's paragraphs
    /// and lists inside them, falling back to the layout tree for a
    /// document whose outline replies stay invalid.
    Llm,
}

impl Structurer {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Structurer::Layout => "layout",
            Structurer::Llm => "llm",
        }
    }
}

impl std::str::FromStr for Structurer {
    type Err = Error;

    fn from_str(name: &str) -> Result<Structurer> {
        one_named(
            name,
            &[Structurer::Layout, Structurer::Llm],
            Structurer::name,
            "structurer",
        )
    }
}

/// Everything a document's atomic batch holds, and what the language
/// model cost to build it.
#[derive(Debug)]
pub struct Prepared {
    /// The analysed document.
    pub doc: Document,
    /// Its node and EDU vectors.
    pub vectors: PackedVectors,
    /// Its DAG.
    pub dag: Dag,
    /// The language-model work spent on it.
    pub llm: LlmCost,
}

impl std::str::FromStr for Format {
    type Err = Error;

    fn from_str(name: &str) -> Result<Format> {
        match name.to_ascii_lowercase().as_str() {
            "text" | "txt" | "plain" => Ok(Format::Text),
            "markdown" | "md" => Ok(Format::Markdown),
            "html" | "htm" => Ok(Format::Html),
            "pdf" => Ok(Format::Pdf),
            _ => Err(Error::UnknownFormat(name.to_owned())),
        }
    }
}

/// The format for a file: from its extension, else sniffed from its text.
pub fn detect_format(path: Option<&Path>, text: &str) -> Format {
    format_of_extension(path).unwrap_or_else(|| sniff_format(text))
}

/// Guesses the format of text with no telling extension.
fn sniff_format(text: &str) -> Format {
    let head: String = text
        .chars()
        .take(SNIFF_BYTES)
        .collect::<String>()
        .to_ascii_lowercase();
    let start = head.trim_start();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || head.contains("<body") {
        return Format::Html;
    }
    let markdown_lines = head
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            l.starts_with("# ")
                || l.starts_with("## ")
                || l.starts_with("```")
                || l.starts_with("- [")
        })
        .count();
    if markdown_lines > 0 {
        Format::Markdown
    } else {
        Format::Text
    }
}

/// Decodes input bytes into text: rejects what [`check_bytes`] rejects, and
/// invalid UTF-8 unless `lossy`. A leading byte-order mark is kept
/// (coordinates stay exact).
pub fn decode(source_name: &str, bytes: Vec<u8>, lossy: bool) -> Result<String> {
    check_bytes(source_name, &bytes)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(err) if lossy => Ok(String::from_utf8_lossy(err.as_bytes()).into_owned()),
        Err(err) => {
            let offset = err.utf8_error().valid_up_to();
            let before = &err.as_bytes()[..offset];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = offset
                - before
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1)
                + 1;
            Err(Error::InvalidUtf8 {
                source_name: source_name.to_owned(),
                offset,
                line,
                column,
            })
        }
    }
}

/// Checks input bytes before decoding: at most [`MAX_DOCUMENT_BYTES`], not
/// a ZIP container (DOCX and its kin, said as such), and no NUL byte near
/// the start (a binary file).
pub fn check_bytes(source_name: &str, bytes: &[u8]) -> Result<()> {
    check_size(source_name, bytes)?;
    if bytes.starts_with(b"PK\x03\x04") {
        return Err(Error::Container {
            source_name: source_name.to_owned(),
        });
    }
    if let Some(offset) = bytes[..bytes.len().min(SNIFF_BYTES)]
        .iter()
        .position(|&b| b == 0)
    {
        return Err(Error::Binary {
            source_name: source_name.to_owned(),
            offset,
        });
    }
    Ok(())
}

/// Refuses input over [`MAX_DOCUMENT_BYTES`].
fn check_size(source_name: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::TooLarge {
            source_name: source_name.to_owned(),
            bytes: bytes.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    Ok(())
}

/// Analyses decoded text into a complete, validated document.
pub fn analyze(id: &str, text: String, format: Format) -> Result<Document> {
    analyze_with(id, text, format, &LayoutTreeBuilder)
}

/// Analyses a PDF's bytes (read as ingest reads them, [`layout::pdf`])
/// into a complete, validated document.
pub fn analyze_pdf(id: &str, bytes: Vec<u8>) -> Result<Document> {
    check_size(id, &bytes)?;
    let (layout, pages) = layout::pdf::parse(id, bytes, &CancelToken::new(), &|_, _| {})?;
    Ok(analyze_laid_out(id, layout, Format::Pdf, Some(pages), None)?.0)
}

/// Like [`analyze`], with a caller-chosen tree builder.
pub fn analyze_with(
    id: &str,
    text: String,
    format: Format,
    builder: &dyn TreeBuilder,
) -> Result<Document> {
    analyze_built(id, lay_out(id, text, format)?, format, None, |input| {
        built_by(builder, id, input)
    })
}

/// `builder`'s tree over `input`, its refusal an [`Error::Invariant`] of
/// document `id`.
fn built_by(builder: &dyn TreeBuilder, id: &str, input: &StructureInput<'_>) -> Result<Tree> {
    builder.build(input).map_err(|message| Error::Invariant {
        doc: id.to_owned(),
        message,
    })
}

/// Like [`analyze`], with the tree's sections from `llm` when given (and
/// the layout's paragraphs and lists inside them; the layout tree when its
/// replies stay invalid), and what the model cost.
pub fn analyze_structured(
    id: &str,
    text: String,
    format: Format,
    llm: Option<&LlmStructurer<'_>>,
) -> Result<(Document, LlmCost)> {
    analyze_laid_out(id, lay_out(id, text, format)?, format, None, llm)
}

/// [`analyze_structured`] of a layout already extracted, with where its
/// text lies on the pages of its file (a PDF's).
fn analyze_laid_out(
    id: &str,
    layout: Layout,
    format: Format,
    pages: Option<PageLayout>,
    llm: Option<&LlmStructurer<'_>>,
) -> Result<(Document, LlmCost)> {
    let mut cost = LlmCost::default();
    let doc = analyze_built(id, layout, format, pages, |input| {
        if let Some(structurer) = llm {
            let (outline, spent) = structurer.structure(input)?;
            cost = spent;
            if let Some(outline) = outline {
                // The model's sections; the layout's paragraphs and lists
                // inside them.
                return Ok(LayoutTreeBuilder.within(input, &outline));
            }
            tracing::warn!(
                doc = id,
                "the chat model's outline stayed invalid; using the layout tree"
            );
        }
        built_by(&LayoutTreeBuilder, id, input)
    })?;
    Ok((doc, cost))
}

/// The layout of decoded `text` in a text format (a PDF is read from its
/// bytes, never from text).
fn lay_out(id: &str, text: String, format: Format) -> Result<Layout> {
    Ok(match format {
        Format::Text => layout::plain::parse(&text),
        Format::Markdown => layout::markdown::parse(&text),
        Format::Html => layout::html::parse(&text),
        Format::Pdf => {
            return Err(Error::Pdf {
                source_name: id.to_owned(),
                message: "a PDF is read from its file's bytes, not from text".into(),
            });
        }
    })
}

/// Segments a layout and builds its tree with `build`, then validates it
/// (and the page geometry, when given, against the text); the document's
/// metadata is what its source gives.
fn analyze_built(
    id: &str,
    layout: Layout,
    format: Format,
    pages: Option<PageLayout>,
    build: impl FnOnce(&StructureInput<'_>) -> Result<Tree>,
) -> Result<Document> {
    crate::model::ids::check_id(id)?;
    let Layout {
        text,
        blocks,
        title,
        metadata,
    } = layout;
    if let Some(pages) = &pages {
        pages
            .validate(text.len() as u32)
            .map_err(|message| Error::Invariant {
                doc: id.to_owned(),
                message: format!("page layout: {message}"),
            })?;
    }
    let mut edus: Vec<Edu> = Vec::new();
    let mut block_edus: Vec<BlockEdus> = Vec::with_capacity(blocks.len());
    // A block kept whole is one EDU, unless longer than an EDU may be.
    let whole = |block: &layout::Block| segment::cap_length(&text, block.range.clone());
    for block in &blocks {
        let first = edus.len() as u32;
        let (ranges, kind) = match block.kind {
            BlockKind::Paragraph => (
                segment::split_edus(&text, block.range.clone()),
                EduKind::Text,
            ),
            BlockKind::Heading { .. } => (whole(block), EduKind::Heading),
            BlockKind::ListItem { .. } => (whole(block), EduKind::Item),
            BlockKind::Code => (whole(block), EduKind::Code),
            BlockKind::Table => (
                (table_rows(&text, block.range.clone()).into_iter())
                    .flat_map(|row| segment::cap_length(&text, row))
                    .collect(),
                EduKind::Table,
            ),
        };
        for range in ranges {
            edus.push(Edu {
                id: edus.len() as u32,
                start: range.start as u32,
                end: range.end as u32,
                tokens: tokens::count(&text[range]),
                kind,
            });
        }
        let end = edus.len() as u32;
        if end > first {
            block_edus.push(BlockEdus {
                kind: block.kind,
                edus: first..end,
            });
        }
    }
    if edus.is_empty() {
        return Err(Error::EmptyDocument {
            source_name: id.to_owned(),
        });
    }
    let input = StructureInput {
        text: &text,
        edus: &edus,
        blocks: &block_edus,
    };
    let mut tree = build(&input)?;
    if let (Some(title), Some(root)) = (title, tree.nodes.first_mut()) {
        root.title = title;
    }
    tree.validate(edus.len() as u32)
        .map_err(|message| Error::Invariant {
            doc: id.to_owned(),
            message,
        })?;
    let meta = DocMeta {
        id: id.to_owned(),
        title: tree.root().title.clone(),
        format,
        bytes: text.len() as u64,
        edus: edus.len() as u32,
        nodes: tree.nodes.len() as u32,
        tokens: edus.iter().map(|e| u64::from(e.tokens)).sum(),
    };
    Ok(Document {
        meta,
        text,
        edus,
        tree,
        pages,
        metadata,
    })
}

/// A table's rows: one range per line of `range` with a letter or digit
/// in it (rules such as Markdown's `|---|` are left out), trimmed.
fn table_rows(text: &str, range: std::ops::Range<usize>) -> Vec<std::ops::Range<usize>> {
    let mut rows = Vec::new();
    let mut start = range.start;
    for line in text[range.clone()].split_inclusive('\n') {
        let row = layout::trim_range(text, start..start + line.len());
        if text[row.clone()].chars().any(char::is_alphanumeric) {
            rows.push(row);
        }
        start += line.len();
    }
    rows
}
/// The language-model steps an ingest runs (none by default).
#[derive(Debug, Clone, Copy, Default)]
pub struct LlmSteps<'a> {
    /// Builds each document's tree.
    pub structurer: Option<LlmStructurer<'a>>,
    /// Writes each document's information points.
    pub ip_writer: Option<LlmIpWriter<'a>>,
}

impl<'a> LlmSteps<'a> {
    /// The steps `options` ask for, on `chat`; [`Error::NoChatModel`] when
    /// they ask for one and there is none.
    pub fn for_options(options: &IngestOptions, chat: Option<&'a dyn ChatModel>) -> Result<Self> {
        let chat = |step| chat.ok_or(Error::NoChatModel { step });
        Ok(LlmSteps {
            structurer: match options.structurer {
                Structurer::Layout => None,
                Structurer::Llm => Some(LlmStructurer::new(
                    chat("the LLM structurer")?,
                    StructurerOptions::default(),
                )),
            },
            ip_writer: match options.ip_maker {
                IpMakerKind::Bridge => None,
                IpMakerKind::Llm => Some(LlmIpWriter::new(
                    chat("the LLM information-point writer")?,
                    IpWriterOptions::default(),
                )),
            },
        })
    }
}

/// Reads, decodes and analyses one source, embeds its nodes and EDUs, and
/// builds its DAG, with the language-model steps of `llm`. A PDF (by
/// `options.format`, its extension or its first bytes) is read page by
/// page; its pages, the batches of texts embedded and the windows whose
/// attention a local model reads are told to `steps`, which can stop the
/// work between any two of them.
pub fn prepare(
    source: &Source,
    options: IngestOptions,
    embedder: &dyn Embedder,
    device: &Device,
    llm: &LlmSteps<'_>,
    steps: &Steps<'_>,
) -> Result<Prepared> {
    // Sources built by library callers skip `sources::expand`'s check.
    crate::model::ids::validate_id(&source.id)?;
    check_extension(options.format, source.path())?;
    let bytes = source.read()?;
    let (layout, format, pages) = if is_pdf(options.format, source.path(), &bytes) {
        check_size(&source.name(), &bytes)?;
        let on_page = |page: usize, pages: usize| (steps.report)(Stage::Pages, page + 1, pages);
        let (layout, pages) = layout::pdf::parse(&source.name(), bytes, steps.cancel, &on_page)?;
        (layout, Format::Pdf, Some(pages))
    } else {
        let text = decode(&source.name(), bytes, options.lossy)?;
        let format = options
            .format
            .unwrap_or_else(|| detect_format(source.path(), &text));
        (lay_out(&source.id, text, format)?, format, None)
    };
    let (mut doc, mut cost) =
        analyze_laid_out(&source.id, layout, format, pages, llm.structurer.as_ref())?;
    // What the caller gives wins over what the source says of itself.
    doc.metadata = std::mem::take(&mut doc.metadata).overlaid(&options.metadata);
    let (vectors, dag, written) =
        embed_and_link(&doc, embedder, device, llm.ip_writer.as_ref(), steps)?;
    cost.add(&written);
    Ok(Prepared {
        doc,
        vectors,
        dag,
        llm: cost,
    })
}

/// Whether an input is a PDF: the format asked for, else its extension,
/// else `%PDF-` at its start.
pub fn is_pdf(format: Option<Format>, path: Option<&Path>, bytes: &[u8]) -> bool {
    match format {
        Some(format) => format == Format::Pdf,
        None => format_of_extension(path) == Some(Format::Pdf) || layout::pdf::sniff(bytes),
    }
}

/// Analyses decoded `text` (layout tree), embeds the document and builds
/// its DAG.
pub fn prepare_text(
    id: &str,
    text: String,
    format: Format,
    embedder: &dyn Embedder,
    device: &Device,
) -> Result<(Document, PackedVectors, Dag)> {
    let doc = analyze(id, text, format)?;
    let (vectors, dag, _) =
        progress::untold(|steps| embed_and_link(&doc, embedder, device, None, steps))?;
    Ok((doc, vectors, dag))
}

/// Embeds an analysed document's nodes and EDUs and builds its DAG (its
/// points written by `writer` when given), with what the writer cost,
/// telling `steps` as it goes.
fn embed_and_link(
    doc: &Document,
    embedder: &dyn Embedder,
    device: &Device,
    writer: Option<&LlmIpWriter<'_>>,
    steps: &Steps<'_>,
) -> Result<(PackedVectors, Dag, LlmCost)> {
    let vectors = embed_document_in_steps(doc, embedder, steps)?;
    // A store embedding with a local transformer weights its edges with
    // that model's attention.
    let attention: Box<dyn AttentionSource + '_> = match embedder.transformer() {
        Some(model) => Box::new(ModelAttention::new(model, device.clone()).reporting(*steps)),
        None => Box::new(ComputedAttention::new(device.clone())),
    };
    let (dag, cost) = build_written_dag(
        doc,
        EduVectors::packed(&vectors.edus, vectors.dimension as usize),
        attention.as_ref(),
        writer,
    )?;
    Ok((vectors, dag, cost))
}

/// `doc`'s DAG with the store's settings (default shape, information
/// points from shared terms, then extractive ones over its EDU vectors)
/// and edges weighted by `attention`. Ingest and a re-weighting with supplied attention both build through here, so
/// a rebuild has the stored DAG's nodes.
pub fn build_dag(
    doc: &Document,
    edu_vectors: EduVectors<'_>,
    attention: &dyn AttentionSource,
) -> Result<Dag> {
    build_written_dag(doc, edu_vectors, attention, None).map(|(dag, _)| dag)
}

/// [`build_dag`] with the information points written by `writer` when
/// given (windows it cannot write for get the model-free points), and
/// what the writer cost.
pub fn build_written_dag(
    doc: &Document,
    edu_vectors: EduVectors<'_>,
    attention: &dyn AttentionSource,
    writer: Option<&LlmIpWriter<'_>>,
) -> Result<(Dag, LlmCost)> {
    crate::ingest::dag::build::build(
        doc,
        &edu_vectors,
        &DagConfig::default(),
        &BridgeIpMaker::default(),
        writer,
        attention,
    )
}

/// Texts embedded per call: bounds the rows and representations held
/// beside the packed vectors they fill, and is how often progress is told.
const EMBED_BATCH: usize = 256;

/// One vector per tree node (its full-text representation: title, child
/// titles, leading text) and per EDU (its text).
pub fn embed_document(doc: &Document, embedder: &dyn Embedder) -> Result<PackedVectors> {
    progress::untold(|steps| embed_document_in_steps(doc, embedder, steps))
}

/// [`embed_document`], each batch of texts told to `steps`
/// ([`Stage::Vectors`]: texts embedded of the document's nodes and EDUs).
fn embed_document_in_steps(
    doc: &Document,
    embedder: &dyn Embedder,
    steps: &Steps<'_>,
) -> Result<PackedVectors> {
    let dimension = embedder.dimension();
    // Each row is made unit length, as the index's cosine needs, whoever
    // embedded it, and kept in the store's 8 bits at once: a large document
    // never holds its vectors as `f32`, and the DAG is built from the very
    // numbers the store gives back.
    let embed = |texts: &[&str], rows: &mut QuantizedRows| -> Result<()> {
        let vectors = embedder.embed(texts)?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Count {
                identity: embedder.identity(),
                expected: texts.len(),
                found: vectors.len(),
            }
            .into());
        }
        for mut row in vectors {
            if row.len() != dimension {
                return Err(EmbedError::Dimension {
                    identity: embedder.identity(),
                    expected: dimension,
                    found: row.len(),
                }
                .into());
            }
            if !row.iter().all(|x| x.is_finite()) {
                return Err(EmbedError::NotFinite {
                    identity: embedder.identity(),
                }
                .into());
            }
            normalise(&mut row);
            push_row(rows, &row);
        }
        Ok(())
    };
    let with_room = |rows: usize| QuantizedRows {
        codes: Vec::with_capacity(rows * dimension),
        scales: Vec::with_capacity(rows),
    };
    let total = doc.tree.nodes.len() + doc.edus.len();
    let mut nodes = with_room(doc.tree.nodes.len());
    for batch in doc.tree.nodes.chunks(EMBED_BATCH) {
        let representations: Vec<String> = (batch.iter())
            .map(|node| crate::model::document::representation(doc, node))
            .collect();
        let texts: Vec<&str> = representations.iter().map(String::as_str).collect();
        embed(&texts, &mut nodes)?;
        steps.step(Stage::Vectors, nodes.scales.len(), total)?;
    }
    let mut edus = with_room(doc.edus.len());
    for batch in doc.edus.chunks(EMBED_BATCH) {
        let texts: Vec<&str> = (batch.iter())
            .map(|e| &doc.text[e.start as usize..e.end as usize])
            .collect();
        embed(&texts, &mut edus)?;
        steps.step(
            Stage::Vectors,
            nodes.scales.len() + edus.scales.len(),
            total,
        )?;
    }
    Ok(PackedVectors {
        dimension: dimension as u32,
        nodes,
        edus,
    })
}

#[cfg(test)]
mod tests {
    //! The tree invariants ([`Tree::validate`]) on analysed documents.
    use super::*;
    use crate::model::edu::Span;
    use crate::model::tree::{NodeKind, Tree};

    fn sample() -> (Tree, u32) {
        let doc = analyze(
            "t",
            "# A\n\nOne two three four. Five six seven eight.\n\n## B\n\n- x\n- y\n".to_owned(),
            Format::Markdown,
        )
        .unwrap();
        (doc.tree, doc.edus.len() as u32)
    }

    #[test]
    fn a_table_is_titled_by_its_caption_on_one_line_or_the_heading_right_above_it() {
        let cases = [
            (
                "Net sales by\nregion\n\n| Region | 2022 |\n|---|---|\n| Americas | 12 |\n| Europe | 7 |\n",
                "Net sales by region",
            ),
            (
                "# Report\n\n## Consolidated Statement of Cash Flows\n\n| (Millions) | 2018 |\n|---|---|\n| Net income | 5,363 |\n| Purchases of PP&E | (1,577) |\n",
                "Consolidated Statement of Cash Flows",
            ),
        ];
        for (text, title) in cases {
            let doc = analyze("t", text.to_owned(), Format::Markdown).unwrap();
            let table = (doc.tree.nodes.iter())
                .find(|n| n.kind == NodeKind::Table)
                .expect("a table node");
            assert_eq!(table.title, title);
        }
    }

    #[test]
    fn valid_tree_passes_and_paths_descend() {
        let (tree, count) = sample();
        tree.validate(count).unwrap();
        let path = tree.path_to(count - 1);
        assert_eq!(path[0], 0);
        assert!(
            path.windows(2)
                .all(|w| tree.nodes[w[1] as usize].parent == Some(w[0]))
        );
    }

    #[test]
    fn validate_rejects_each_broken_invariant() {
        let (tree, count) = sample();
        type Breaker = Box<dyn Fn(&mut Tree)>;
        let broken: Vec<(&str, Breaker)> = vec![
            ("root span", Box::new(|t| t.nodes[0].span.last -= 1)),
            ("outside", Box::new(|t| t.nodes[1].span.last = 1000)),
            ("parent", Box::new(|t| t.nodes[4].span.first = 0)),
            ("level", Box::new(|t| t.nodes[1].level = 5)),
            ("id", Box::new(|t| t.nodes[1].id = 7)),
            (
                "overlap",
                Box::new(|t| {
                    let second = t.nodes[1].children[1] as usize;
                    t.nodes[second].span.first = t.nodes[2].span.first;
                }),
            ),
            (
                "orphan child list",
                Box::new(|t| t.nodes[0].children.clear()),
            ),
        ];
        for (what, breaker) in broken {
            let mut copy = tree.clone();
            breaker(&mut copy);
            assert!(copy.validate(count).is_err(), "{what} not detected");
        }
    }

    const GUIDE: &str = "# Guide\n\nAlpha one is here. Alpha two is there. Alpha three is last.\n\n\
- item a\n- item b\n\nBeta one runs. Beta two stops.\n\n## Sub\n\nGamma one is new. Gamma two ends.\n";

    /// `GUIDE` with its tree's sections from `outline` (LingoEDU's format,
    /// 0-based spans), the layout's blocks inside them.
    fn within(outline: &str) -> Document {
        let layout = layout::markdown::parse(GUIDE);
        analyze_built("g", layout, Format::Markdown, None, |input| {
            let count = input.edus.len() as u32;
            let sections = crate::ingest::tree::outline::parse_outline(outline, count, false)
                .map_err(|e| Error::Usage(e.to_string()))?;
            Ok(LayoutTreeBuilder.within(input, &sections))
        })
        .unwrap()
    }

    #[test]
    fn a_models_sections_hold_the_layouts_paragraphs_and_lists() {
        let n = analyze("g", GUIDE.to_owned(), Format::Markdown)
            .unwrap()
            .edus
            .len() as u32;
        // The first section cuts the first paragraph after its first EDU.
        let doc = within(&format!(
            "# [0-1] Guide alpha\n# [2-{}] Later\n## [{}-{}] Gamma\n",
            n - 1,
            n - 2,
            n - 1
        ));
        let tree = &doc.tree;
        tree.validate(n).unwrap();
        let sections: Vec<(&str, Span)> = (tree.nodes.iter())
            .filter(|node| node.kind == NodeKind::Section && node.level == 1)
            .map(|node| (node.title.as_str(), node.span))
            .collect();
        assert_eq!(
            sections,
            vec![
                ("Guide alpha", Span::new(0, 1)),
                ("Later", Span::new(2, n - 1))
            ]
        );
        let later = tree
            .nodes
            .iter()
            .find(|node| node.title == "Later")
            .unwrap();
        // Inside "Later": the rest of the first paragraph, the list, the
        // second paragraph and the real heading "Sub", then the model's
        // "Gamma" (the last two EDUs, one paragraph: EDUs directly).
        let kinds: Vec<NodeKind> = (later.children.iter())
            .map(|&c| tree.nodes[c as usize].kind)
            .collect();
        assert!(kinds.contains(&NodeKind::List), "{kinds:?}");
        assert!(kinds.contains(&NodeKind::Paragraph), "{kinds:?}");
        let gamma = tree
            .nodes
            .iter()
            .find(|node| node.title == "Gamma")
            .unwrap();
        assert_eq!(gamma.span, Span::new(n - 2, n - 1));
        assert!(gamma.children.is_empty());
        // The root takes an extractive title, as the layout tree's does.
        assert!(!tree.nodes[0].title.is_empty());
    }

    proptest::proptest! {
        /// Any outline over the document: its sections keep their spans and
        /// titles, and the tree is valid.
        #[test]
        fn any_outline_keeps_its_sections_and_a_valid_tree(
            cuts in proptest::collection::btree_set(1u32..20, 0..6),
            nested in proptest::bool::ANY,
        ) {
            let n = analyze("g", GUIDE.to_owned(), Format::Markdown).unwrap().edus.len() as u32;
            let mut bounds: Vec<u32> = cuts.into_iter().filter(|&c| c < n).collect();
            bounds.insert(0, 0);
            bounds.push(n);
            let mut outline = String::new();
            let mut expected = Vec::new();
            for (i, w) in bounds.windows(2).enumerate() {
                outline.push_str(&format!("# [{}-{}] Part {i}\n", w[0], w[1] - 1));
                expected.push((format!("Part {i}"), Span::new(w[0], w[1] - 1)));
                if nested && w[1] - w[0] >= 2 {
                    outline.push_str(&format!("## [{}-{}] Tail {i}\n", w[1] - 1, w[1] - 1));
                    expected.push((format!("Tail {i}"), Span::new(w[1] - 1, w[1] - 1)));
                }
            }
            let tree = within(&outline).tree;
            tree.validate(n).map_err(proptest::test_runner::TestCaseError::fail)?;
            for (title, span) in expected {
                proptest::prop_assert!(
                    tree.nodes.iter().any(|node| node.kind == NodeKind::Section
                        && node.title == title
                        && node.span == span),
                    "{title} {span:?}"
                );
            }
        }
    }

    /// An embedder that drops the last vector of every call past its first
    /// `good` calls, and returns a row of subnormal values for the rest.
    #[derive(Debug)]
    struct Faulty {
        good: usize,
        calls: std::sync::atomic::AtomicUsize,
    }

    impl Embedder for Faulty {
        fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
            let call = self
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut rows = vec![vec![1e-40f32, -1e-41, 0.0, 0.0]; texts.len()];
            if call >= self.good {
                rows.pop();
            }
            Ok(rows)
        }
        fn dimension(&self) -> usize {
            4
        }
        fn identity(&self) -> String {
            "faulty".into()
        }
    }

    #[test]
    fn a_documents_own_heading_or_page_title_titles_it() {
        // Issue 53 item 9: metadata lines before the one top heading.
        let body = "Moss needs shade. It holds water. Water it weekly.\n\n".repeat(3);
        let badges = format!("- Status: draft\n- Owner: garden team\n\n# Moss care\n\n{body}");
        let doc = analyze("m", badges, Format::Markdown).unwrap();
        assert_eq!(doc.tree.nodes[0].title, "Moss care");
        // A lone heading near the end of a long unheaded text does not.
        let appendix = format!("{body}{body}# Appendix\n\nOne more line.");
        let doc = analyze("a", appendix, Format::Markdown).unwrap();
        assert_ne!(doc.tree.nodes[0].title, "Appendix");
        // An HTML page's <title>, kept in the stored text.
        let html = "<title>Moss care | Garden</title><h2>Light</h2><p>Shade.</p><h2>Water</h2><p>Weekly.</p>";
        let doc = analyze("h", html.into(), Format::Html).unwrap();
        assert_eq!(doc.tree.nodes[0].title, "Moss care | Garden");
        assert!(
            doc.text.starts_with("Moss care | Garden\n\n"),
            "{}",
            doc.text
        );
    }

    #[test]
    fn an_embedder_that_loses_a_vector_is_refused_and_tiny_rows_are_kept() {
        let doc = analyze("t", "One sentence. Another one.\n".to_owned(), Format::Text).unwrap();
        let faulty = |good| Faulty {
            good,
            calls: Default::default(),
        };
        // Tiny rows (no length to normalise by) are packed, not hung on.
        let vectors = embed_document(&doc, &faulty(usize::MAX)).unwrap();
        assert_eq!(vectors.edus.scales.len(), doc.edus.len());
        assert!(vectors.edus.scales.iter().all(|&s| s > 0.0));
        // A short answer is an error naming the counts, not shifted rows.
        let err = embed_document(&doc, &faulty(1)).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "returned {} vectors for {} texts",
                doc.edus.len() - 1,
                doc.edus.len()
            )),
            "{err}"
        );
    }
}
