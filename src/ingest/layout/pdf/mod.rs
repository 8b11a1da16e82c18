//! PDF layout: the text of a PDF, read with `pdf_oxide` (pure Rust), as
//! lines with boxes ([`lines`]); running headers, footers and folios
//! recognised ([`furniture`]); tables ([`tables`]), tables of contents
//! ([`contents`]) and headings ([`headings`]: the outline, else type,
//! numbering and what the contents name) found; and the
//! stored text, its blocks and every line's page and box composed
//! ([`compose`]). The information dictionary is its metadata ([`info`]).
//!
//! A PDF's stored text is this extracted text, not the file's bytes: its
//! coordinates point into the text, and through [`PageLayout`] into the
//! pages. A file that cannot be read (damaged, encrypted with a password,
//! no text layer) is a [`Error::Pdf`] naming what and where; nothing of
//! it is stored. `pdf_oxide` runs behind `catch_unwind`, so a panic in it
//! on a hostile file is that error too.

pub mod compose;
pub mod contents;
pub mod furniture;
pub mod headings;
pub mod highlight;
pub mod info;
pub mod lines;
pub mod nesting;
pub mod tables;

use pdf_oxide::PdfDocument;
use pdf_oxide::outline::{Destination, OutlineItem};

use crate::error::{Error, Result, catch_quietly, panic_message};
use crate::ingest::layout::Layout;
use crate::model::pages::{BoxPt, PageLayout};
use crate::progress::CancelToken;
use headings::OutlineEntry;
use lines::{Line, Piece, plain_text};

/// The start of every PDF file.
pub const MAGIC: &[u8] = b"%PDF-";

/// Most outline entries read (a hostile outline can be huge or cyclic).
const MAX_OUTLINE_ENTRIES: usize = 10_000;
/// Most pages read: a file claiming more is refused (a page tree can lie).
pub const MAX_PAGES: usize = 100_000;
/// Deepest nesting of arrays and dictionaries accepted (real files nest a
/// few levels; the PDF reader recurses once per level).
pub const MAX_NESTING: usize = 1_000;
/// The stack of the thread that reads a PDF: room for the reader's
/// recursion into objects this module cannot see before it (those inside
/// compressed object streams). Reserved, not used, unless a file nests.
const READER_STACK: usize = 512 << 20;

/// Whether `bytes` look like a PDF: `%PDF-` within the first kilobyte, as
/// readers accept it.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(1024)]
        .windows(MAGIC.len())
        .any(|w| w == MAGIC)
}

/// Reads a PDF into its stored text, blocks and page geometry, telling
/// `on_page` each page read (0-based, of how many) and stopping when
/// `cancel` is set. The reading runs on a thread of its own with a large
/// stack (see [`READER_STACK`]).
pub fn parse(
    source_name: &str,
    bytes: Vec<u8>,
    cancel: &CancelToken,
    on_page: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Layout, PageLayout)> {
    let nesting = nesting::deepest(&bytes);
    if nesting > MAX_NESTING {
        return Err(Error::Pdf {
            source_name: source_name.to_owned(),
            message: format!(
                "its objects nest {nesting} deep; edudb reads at most {MAX_NESTING} levels"
            ),
        });
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("pdf reader".into())
            .stack_size(READER_STACK)
            .spawn_scoped(scope, || read(source_name, bytes, cancel, on_page))
            .map_err(|e| Error::Storage(format!("starting the PDF reader's thread: {e}")))?
            .join()
            .unwrap_or_else(|panic| {
                Err(Error::Pdf {
                    source_name: source_name.to_owned(),
                    message: format!("the PDF reader failed: {}", panic_message(&*panic)),
                })
            })
    })
}

/// The work of [`parse`], on the reader's thread.
fn read(
    source_name: &str,
    bytes: Vec<u8>,
    cancel: &CancelToken,
    on_page: &dyn Fn(usize, usize),
) -> Result<(Layout, PageLayout)> {
    let failed = |message: String| Error::Pdf {
        source_name: source_name.to_owned(),
        message,
    };
    let guarded = |what: &str, run: &mut dyn FnMut() -> Result<()>| {
        catch_quietly(run).unwrap_or_else(|panic| {
            Err(failed(format!(
                "{what}: the PDF reader failed: {}",
                panic_message(&*panic)
            )))
        })
    };
    let (source_bytes, source_crc32) = (bytes.len() as u64, crc32fast::hash(&bytes));
    let mut bytes = Some(bytes);
    let mut document = None;
    guarded("opening it", &mut || {
        let bytes = bytes.take().expect("opened once");
        document = Some(open(bytes).map_err(&failed)?);
        Ok(())
    })?;
    let document = document.expect("opened");
    let mut count = 0;
    guarded("counting its pages", &mut || {
        count = (document.page_count()).map_err(|e| failed(format!("its page tree: {e}")))?;
        Ok(())
    })?;
    if count == 0 {
        return Err(failed("it has no pages".into()));
    }
    if count > MAX_PAGES {
        return Err(failed(format!(
            "it claims {count} pages; edudb reads at most {MAX_PAGES}"
        )));
    }
    let mut pages: Vec<Vec<Line>> = Vec::new();
    let mut sizes: Vec<(f32, f32)> = Vec::new();
    for page in 0..count {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        guarded(&format!("page {}", page + 1), &mut || {
            let (lines, size) = read_page(&document, page)
                .map_err(|m| failed(format!("page {}: {m}", page + 1)))?;
            pages.push(lines);
            sizes.push(size);
            Ok(())
        })?;
        on_page(page, count);
    }
    if pages.iter().all(Vec::is_empty) {
        return Err(failed(format!(
            "no extractable text on pages 1–{count} (scanned images?); OCR is not supported"
        )));
    }
    let mut outline = Vec::new();
    guarded("its outline", &mut || {
        outline = read_outline(&document);
        Ok(())
    })?;
    let heights: Vec<f32> = sizes.iter().map(|s| s.1).collect();
    let furniture = furniture::furniture(&pages, &heights);
    let rows: Vec<Vec<bool>> = (pages.iter().zip(&furniture))
        .map(|(lines, furniture)| tables::table_rows(lines, furniture))
        .collect();
    let taken: Vec<Vec<bool>> = (furniture.iter().zip(&rows))
        .map(|(f, r)| f.iter().zip(r).map(|(a, b)| *a || *b).collect())
        .collect();
    let body = headings::body_style(&pages, &taken);
    let contents = contents::find(&pages, &furniture);
    let headings = headings::headings(&pages, &taken, &outline, body, &contents);
    let roles = compose::roles(&furniture, &rows, &headings);
    let (mut layout, mut geometry) = compose::compose(&pages, &roles, &sizes);
    layout.title = headings::cover_title(&pages, &taken, body.0);
    // What the file says of itself never fails its reading, a panic in
    // the reader on a hostile dictionary included.
    layout.metadata = catch_quietly(|| info::metadata(&document)).unwrap_or_default();
    geometry.source_bytes = source_bytes;
    geometry.source_crc32 = source_crc32;
    Ok((layout, geometry))
}

/// Opens a PDF from its bytes; one encrypted with the empty user
/// password (readable by anyone, as viewers open it) is opened with it.
fn open(bytes: Vec<u8>) -> std::result::Result<PdfDocument, String> {
    let document =
        PdfDocument::from_bytes(bytes).map_err(|e| format!("not a readable PDF: {e}"))?;
    if document.is_encrypted() {
        let opened = document
            .authenticate(b"")
            .map_err(|e| format!("its encryption is not supported: {e}"))?;
        if !opened {
            return Err(
                "it is encrypted with a password; decrypt it first (for example `qpdf --decrypt`)"
                    .into(),
            );
        }
    }
    Ok(document)
}

/// A page's lines and its size in points.
fn read_page(
    document: &PdfDocument,
    page: usize,
) -> std::result::Result<(Vec<Line>, (f32, f32)), String> {
    let (x0, y0, x1, y1) = document
        .get_page_media_box(page)
        .map_err(|e| format!("its size: {e}"))?;
    let height = (y1 - y0).abs();
    let spans = document
        .extract_spans(page)
        .map_err(|e| format!("its text: {e}"))?;
    // pdf_oxide's boxes are in user space already: `y` is the bottom edge.
    let pieces: Vec<Piece> = spans
        .iter()
        .filter(|s| s.bbox.x.is_finite() && s.bbox.y.is_finite())
        .map(|span| Piece {
            text: plain_text(&span.text),
            rect: BoxPt {
                x0: span.bbox.x,
                y0: span.bbox.y,
                x1: span.bbox.x + span.bbox.width.max(0.0),
                y1: span.bbox.y + span.bbox.height.max(0.0),
            },
            size: span.font_size,
            bold: span.font_weight.is_bold(),
        })
        .collect();
    Ok((
        lines::lines(page as u32, &pieces),
        ((x1 - x0).abs(), height),
    ))
}

/// The outline's entries in order with their depths and pages (entries
/// whose destination is not a page are left out).
fn read_outline(document: &PdfDocument) -> Vec<OutlineEntry> {
    let Ok(Some(items)) = document.get_outline() else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    let mut stack: Vec<(&OutlineItem, u8)> = items.iter().rev().map(|i| (i, 0)).collect();
    while let Some((item, depth)) = stack.pop() {
        if entries.len() >= MAX_OUTLINE_ENTRIES {
            break;
        }
        let page = match &item.dest {
            Some(Destination::PageIndex(page)) => Some(*page),
            Some(Destination::Named(name)) => {
                document.resolve_named_destination(name).ok().flatten()
            }
            None => None,
        };
        if let Some(page) = page {
            entries.push(OutlineEntry {
                title: plain_text(&item.title),
                depth,
                page: page as u32,
            });
        }
        stack.extend(
            item.children
                .iter()
                .rev()
                .map(|c| (c, depth.saturating_add(1))),
        );
    }
    entries
}
