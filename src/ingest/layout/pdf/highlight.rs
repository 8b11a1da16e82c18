//! A copy of a PDF with boxes highlighted: one highlight annotation per
//! box (PDF user space, so the boxes a document's [`PageLayout`] records
//! point at its words), each with a note saying what it is. Viewers show
//! them over the text; the file's content is unchanged.
//!
//! [`PageLayout`]: crate::model::pages::PageLayout

use pdf_oxide::editor::DocumentEditor;
use pdf_oxide::geometry::Rect;
use pdf_oxide::writer::TextMarkupAnnotation;

use crate::error::{Error, Result, catch_quietly, panic_message};
use crate::model::pages::PageBox;

/// One span to highlight: its boxes (a box per line or per page) and the
/// note shown with them.
#[derive(Debug, Clone, PartialEq)]
pub struct Highlight {
    /// Where it is.
    pub boxes: Vec<PageBox>,
    /// The annotation's note (say, the document's EDU span and score).
    pub note: String,
}

/// `pdf` with every highlight added as annotations of its pages; a page
/// the file does not have is an error naming it.
pub fn highlighted(source_name: &str, pdf: Vec<u8>, highlights: &[Highlight]) -> Result<Vec<u8>> {
    let failed = |message: String| Error::Pdf {
        source_name: source_name.to_owned(),
        message,
    };
    let run = || -> Result<Vec<u8>> {
        let mut editor = DocumentEditor::from_bytes(pdf)
            .map_err(|e| failed(format!("not a readable PDF: {e}")))?;
        let mut pages: Vec<u32> = (highlights.iter())
            .flat_map(|h| h.boxes.iter().map(|b| b.page))
            .collect();
        pages.sort_unstable();
        pages.dedup();
        for page in pages {
            editor
                .edit_page(page as usize, |editor_page| {
                    for highlight in highlights {
                        for b in highlight.boxes.iter().filter(|b| b.page == page) {
                            let r = b.rect;
                            let rect = Rect::new(r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
                            let quad = [
                                f64::from(r.x0),
                                f64::from(r.y1),
                                f64::from(r.x1),
                                f64::from(r.y1),
                                f64::from(r.x0),
                                f64::from(r.y0),
                                f64::from(r.x1),
                                f64::from(r.y0),
                            ];
                            let annotation = TextMarkupAnnotation::highlight(rect, vec![quad])
                                .with_color(1.0, 0.9, 0.2)
                                .with_contents(highlight.note.clone());
                            editor_page.add_annotation(annotation);
                        }
                    }
                    Ok(())
                })
                .map_err(|e| failed(format!("page {}: {e}", page + 1)))?;
        }
        editor
            .save_to_bytes()
            .map_err(|e| failed(format!("writing the highlighted copy: {e}")))
    };
    catch_quietly(run).unwrap_or_else(|panic| {
        Err(failed(format!(
            "the PDF writer failed: {}",
            panic_message(&*panic)
        )))
    })
}
