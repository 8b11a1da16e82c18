//! Where a document's text sits on the pages of the file it came from: for
//! a PDF, every page's first byte in the stored text and every extracted
//! line's byte range and bounding box (PDF user space: points, origin at
//! the page's lower left, as a viewer's annotations use them). An EDU's
//! pages and boxes follow from its byte range ([`PageLayout::pages_of`],
//! [`PageLayout::line_boxes`]), so the EDU record itself is unchanged.

use std::ops::Range;

use rkyv::{Archive, Deserialize, Serialize};

/// One page: where its text starts and its size.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    Copy,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct Page {
    /// The page's first byte in the stored text (pages are in order, so
    /// page `i` runs to page `i + 1`'s start).
    pub start: u32,
    /// Page width in points.
    pub width: f32,
    /// Page height in points.
    pub height: f32,
}

/// A rectangle in PDF user space: `x0 ≤ x1`, `y0 ≤ y1`, origin at the
/// page's lower left.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct BoxPt {
    /// Left edge.
    pub x0: f32,
    /// Bottom edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Top edge.
    pub y1: f32,
}

impl BoxPt {
    /// The smallest box holding both.
    pub fn union(self, other: BoxPt) -> BoxPt {
        BoxPt {
            x0: self.x0.min(other.x0),
            y0: self.y0.min(other.y0),
            x1: self.x1.max(other.x1),
            y1: self.y1.max(other.y1),
        }
    }
}

/// One extracted line: its bytes in the stored text, its page (0-based)
/// and its box on that page.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    Copy,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct LineBox {
    /// First byte of the line in the stored text.
    pub start: u32,
    /// One past its last byte.
    pub end: u32,
    /// Its page, 0-based.
    pub page: u32,
    /// Where it is drawn.
    pub rect: BoxPt,
}

/// A box on a page: where a line of a span is drawn.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PageBox {
    /// The page, 0-based.
    pub page: u32,
    /// The box, in points.
    pub rect: BoxPt,
}

/// A document's page geometry. Pages and lines are in text order; lines do
/// not overlap and each lies within its page's bytes.
#[derive(
    Archive,
    Serialize,
    Deserialize,
    Debug,
    Clone,
    PartialEq,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct PageLayout {
    /// Every page of the file, in order (pages without text included).
    pub pages: Vec<Page>,
    /// Every extracted line, in text order.
    pub lines: Vec<LineBox>,
    /// The size of the file the text was read from, in bytes...
    pub source_bytes: u64,
    /// ...and its CRC-32: a file given later (to highlight) is that one.
    pub source_crc32: u32,
}

impl PageLayout {
    /// The page (0-based) holding byte `offset` of the stored text.
    pub fn page_at(&self, offset: u32) -> u32 {
        let after = self.pages.partition_point(|p| p.start <= offset);
        after.saturating_sub(1) as u32
    }

    /// The pages (0-based, first and last) that bytes `range` touch: the
    /// pages of the lines it overlaps, else the page its start lies on.
    pub fn pages_of(&self, range: Range<u32>) -> Range<u32> {
        let lines = self.lines_of(range.clone());
        match (lines.first(), lines.last()) {
            (Some(first), Some(last)) => first.page..last.page + 1,
            _ => {
                let page = self.page_at(range.start);
                page..page + 1
            }
        }
    }

    /// The lines that bytes `range` overlap, in order.
    pub fn lines_of(&self, range: Range<u32>) -> &[LineBox] {
        let first = self.lines.partition_point(|l| l.end <= range.start);
        let last = self.lines.partition_point(|l| l.start < range.end);
        &self.lines[first..last.max(first)]
    }

    /// The boxes of the lines that bytes `range` overlap, each with its
    /// page, in order (what a highlight of the range covers). A line the
    /// range begins or ends inside is cut to the part it covers, in
    /// proportion to the line's bytes (exact at its ends, an estimate
    /// inside it: glyphs differ in width), so a clause that begins mid-line
    /// does not mark the one before it.
    pub fn line_boxes(&self, range: Range<u32>) -> Vec<PageBox> {
        (self.lines_of(range.clone()).iter())
            .map(|line| {
                let (from, to) = (range.start.max(line.start), range.end.min(line.end));
                let width = line.rect.x1 - line.rect.x0;
                let length = (line.end - line.start) as f32;
                let at = |offset: u32| line.rect.x0 + width * (offset - line.start) as f32 / length;
                PageBox {
                    page: line.page,
                    rect: BoxPt {
                        x0: if from > line.start {
                            at(from)
                        } else {
                            line.rect.x0
                        },
                        x1: if to < line.end { at(to) } else { line.rect.x1 },
                        ..line.rect
                    },
                }
            })
            .collect()
    }

    /// The bytes of pages `pages` (0-based, end exclusive) in a text of
    /// `text_len` bytes.
    pub fn bytes_of_pages(&self, pages: Range<u32>, text_len: u32) -> Range<u32> {
        let start_of =
            |page: u32| (self.pages.get(page as usize)).map_or(text_len, |p| p.start.min(text_len));
        start_of(pages.start)..start_of(pages.end)
    }

    /// Checks the layout against a text of `text_len` bytes: pages in
    /// order within the text, lines in order, non-empty, within the text
    /// and on an existing page whose bytes hold them.
    pub fn validate(&self, text_len: u32) -> Result<(), String> {
        if let Some(first) = self.pages.first()
            && first.start != 0
        {
            return Err(format!("page 0 starts at byte {}, not 0", first.start));
        }
        for (i, pair) in self.pages.windows(2).enumerate() {
            if pair[1].start < pair[0].start {
                return Err(format!("page {} starts before page {i}", i + 1));
            }
        }
        if let Some(page) = self.pages.last()
            && page.start > text_len
        {
            return Err(format!(
                "the last page starts past the text ({text_len} bytes)"
            ));
        }
        let mut previous_end = 0;
        for (i, line) in self.lines.iter().enumerate() {
            if line.start >= line.end || line.end > text_len || line.start < previous_end {
                return Err(format!(
                    "line {i} ({}..{}) is empty, out of order or past the text",
                    line.start, line.end
                ));
            }
            let bytes = self.bytes_of_pages(line.page..line.page + 1, text_len);
            if line.page as usize >= self.pages.len()
                || line.start < bytes.start
                || line.end > bytes.end
            {
                return Err(format!("line {i} lies outside page {}", line.page));
            }
            previous_end = line.end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x0: f32, y0: f32, x1: f32, y1: f32) -> BoxPt {
        BoxPt { x0, y0, x1, y1 }
    }

    /// Two pages: "aaaa\nbbbb\n" on page 0, "cccc\n" on page 1.
    fn two_pages() -> PageLayout {
        let page = |start| Page {
            start,
            width: 612.0,
            height: 792.0,
        };
        let line = |start, end, page, y| LineBox {
            start,
            end,
            page,
            rect: rect(72.0, y, 300.0, y + 10.0),
        };
        PageLayout {
            pages: vec![page(0), page(10)],
            lines: vec![
                line(0, 4, 0, 700.0),
                line(5, 9, 0, 680.0),
                line(10, 14, 1, 700.0),
            ],
            ..PageLayout::default()
        }
    }

    #[test]
    fn a_range_has_the_pages_and_boxes_of_its_lines() {
        let layout = two_pages();
        assert_eq!(layout.validate(15), Ok(()));
        assert_eq!(layout.pages_of(0..4), 0..1);
        assert_eq!(layout.pages_of(2..12), 0..2);
        assert_eq!(layout.pages_of(10..14), 1..2);
        // A range between lines lies on the page of its start.
        assert_eq!(layout.pages_of(4..5), 0..1);
        let on = |page, y| PageBox {
            page,
            rect: rect(72.0, y, 300.0, y + 10.0),
        };
        assert_eq!(
            layout.line_boxes(0..14),
            [on(0, 700.0), on(0, 680.0), on(1, 700.0)]
        );
        // Lines it begins or ends inside are cut where it does, in
        // proportion to their bytes (4 each, 228 points wide).
        let cut = |page, y, x0, x1| PageBox {
            page,
            rect: rect(x0, y, x1, y + 10.0),
        };
        assert_eq!(
            layout.line_boxes(2..12),
            [
                cut(0, 700.0, 72.0 + 114.0, 300.0),
                on(0, 680.0),
                cut(1, 700.0, 72.0, 72.0 + 114.0)
            ]
        );
        assert_eq!(
            layout.line_boxes(6..7),
            [cut(0, 680.0, 72.0 + 57.0, 72.0 + 114.0)]
        );
        assert_eq!(layout.line_boxes(4..5), []);
        assert_eq!(layout.bytes_of_pages(1..2, 15), 10..15);
        assert_eq!(layout.bytes_of_pages(0..1, 15), 0..10);
    }

    #[test]
    fn a_layout_that_does_not_fit_its_text_is_refused() {
        let mut layout = two_pages();
        assert!(layout.validate(12).is_err(), "a line past the text");
        layout.lines[1].start = 2;
        assert!(layout.validate(15).is_err(), "overlapping lines");
        let mut layout = two_pages();
        layout.lines[2].page = 0;
        assert!(
            layout.validate(15).is_err(),
            "a line outside its page's bytes"
        );
        let mut layout = two_pages();
        layout.pages[1].start = 0;
        layout.pages.swap(0, 1);
        layout.pages[0].start = 3;
        assert!(layout.validate(15).is_err(), "pages out of order");
    }
}
