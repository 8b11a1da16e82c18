//! `edudb highlight`: a copy of the PDF a document was read from, with the
//! spans a query picked from it highlighted line by line.

use std::path::Path;

use edudb::ingest::layout::pdf::highlight::{Highlight, highlighted};
use edudb::query::{QueryResult, Rows};
use edudb::{Db, Error};

/// What was written.
#[derive(Debug, serde::Serialize)]
pub struct Written {
    /// Spans highlighted (the picks in the document).
    pub spans: usize,
    /// The pages they are on, 1-based.
    pub pages: Vec<u32>,
    /// Where the copy was written.
    pub output: String,
}

/// Highlights `result`'s picks in document `doc` on a copy of `pdf` (the
/// file it was read from, checked by size and CRC-32) written to
/// `output`.
pub fn write(
    db: &Db,
    doc: &str,
    result: &QueryResult,
    pdf: &Path,
    output: &Path,
) -> edudb::Result<Written> {
    let layout = db.pages(doc)?.ok_or_else(|| {
        Error::Usage(format!(
            "{doc} was not read from a PDF: nothing to highlight"
        ))
    })?;
    let bytes =
        std::fs::read(pdf).map_err(|e| Error::Usage(format!("reading {}: {e}", pdf.display())))?;
    if bytes.len() as u64 != layout.source_bytes || crc32fast::hash(&bytes) != layout.source_crc32 {
        return Err(Error::Usage(format!(
            "{} is not the PDF {doc} was read from (its size or CRC-32 differs)",
            pdf.display()
        )));
    }
    let Rows::Selection(selection) = &result.rows else {
        return Err(Error::Usage("the statement must be a SELECT".into()));
    };
    let highlights: Vec<Highlight> = (selection.items.iter())
        .filter(|item| item.doc == doc)
        .map(|item| Highlight {
            boxes: layout.line_boxes(item.bytes[0]..item.bytes[1]),
            note: format!(
                "{doc} EDUs {}-{}, score {:.3}",
                item.edus[0], item.edus[1], item.score
            ),
        })
        .collect();
    let mut pages: Vec<u32> = (highlights.iter())
        .flat_map(|h| h.boxes.iter().map(|b| b.page + 1))
        .collect();
    pages.sort_unstable();
    pages.dedup();
    let copy = highlighted(&pdf.display().to_string(), bytes, &highlights)?;
    std::fs::write(output, copy)
        .map_err(|e| Error::Usage(format!("writing {}: {e}", output.display())))?;
    Ok(Written {
        spans: highlights.len(),
        pages,
        output: output.display().to_string(),
    })
}
