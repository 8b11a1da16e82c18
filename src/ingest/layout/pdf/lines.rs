//! Lines from a page's text pieces: the pieces a PDF draws are grouped
//! into lines by where they sit, a space put where a gap between pieces is
//! wide enough to be one, and a line split into cells where a gap is as
//! wide as a table's column gutter.

use crate::model::pages::BoxPt;

/// One piece of text as a PDF draws it, with its font.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Its text, already mapped to plain characters ([`plain_text`]).
    pub text: String,
    /// Where it is drawn, in points.
    pub rect: BoxPt,
    /// Its font size in points.
    pub size: f32,
    /// Whether its font is bold.
    pub bold: bool,
}

/// A stretch of a line between column gutters.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Its text.
    pub text: String,
    /// Its left edge.
    pub x0: f32,
    /// Its right edge.
    pub x1: f32,
}

/// One line of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The page, 0-based.
    pub page: u32,
    /// Its cells, left to right (one for running text).
    pub cells: Vec<Cell>,
    /// Where it is drawn.
    pub rect: BoxPt,
    /// The size of most of its characters.
    pub size: f32,
    /// Whether most of its characters are bold.
    pub bold: bool,
}

impl Line {
    /// Its text, cells joined by single spaces.
    pub fn text(&self) -> String {
        let cells: Vec<&str> = self.cells.iter().map(|c| c.text.as_str()).collect();
        cells.join(" ")
    }

    /// Its height in points.
    pub fn height(&self) -> f32 {
        self.rect.y1 - self.rect.y0
    }
}

/// A gap wider than this many font sizes between two pieces is a space.
const SPACE_GAP: f32 = 0.15;
/// A gap wider than this many font sizes is a column gutter (a new cell).
const GUTTER_GAP: f32 = 1.2;
/// The width of a space a piece's text begins or ends with, in font
/// sizes: its box holds it, so the visible gap is that much wider.
const SPACE_WIDTH: f32 = 0.25;
/// A piece whose box begins this many font sizes before its neighbour's
/// ends overlaps it (more than rounding moves a box): it was set against
/// that neighbour, whatever spaces its text begins with.
const OVERLAP: f32 = 0.05;

/// The lines of page `page` from its pieces: pieces whose vertical extents
/// overlap by half the smaller height share a line (PDFs draw in any
/// order: a table's label after its figures, a kerned letter last), lines
/// run top to bottom and pieces left to right within them.
pub fn lines(page: u32, pieces: &[Piece]) -> Vec<Line> {
    let mut pieces: Vec<&Piece> = pieces
        .iter()
        .filter(|p| !p.text.trim().is_empty())
        .collect();
    pieces.sort_by(|a, b| centre(b).total_cmp(&centre(a)));
    let mut bands: Vec<(BoxPt, Vec<&Piece>)> = Vec::new();
    for piece in pieces {
        match bands.last_mut() {
            Some((rect, members)) if shares_band(rect, &piece.rect) => {
                *rect = rect.union(piece.rect);
                members.push(piece);
            }
            _ => bands.push((piece.rect, vec![piece])),
        }
    }
    bands
        .into_iter()
        .map(|(_, mut members)| {
            members.sort_by(|a, b| a.rect.x0.total_cmp(&b.rect.x0));
            line_of(page, &members)
        })
        .collect()
}

/// The vertical centre of a piece.
fn centre(piece: &Piece) -> f32 {
    (piece.rect.y0 + piece.rect.y1) / 2.0
}

/// Whether a piece drawn at `rect` belongs to the band of lines at `band`:
/// their vertical extents overlap by half the smaller height.
fn shares_band(band: &BoxPt, rect: &BoxPt) -> bool {
    let overlap = band.y1.min(rect.y1) - band.y0.max(rect.y0);
    let smaller = (band.y1 - band.y0).min(rect.y1 - rect.y0).max(0.1);
    overlap >= 0.5 * smaller
}

/// One line from its pieces, left to right: a space where the visible
/// gap is one, a new cell where it is a gutter.
fn line_of(page: u32, pieces: &[&Piece]) -> Line {
    let first = pieces[0];
    let mut line = Line {
        page,
        cells: Vec::new(),
        rect: first.rect,
        size: first.size,
        bold: first.bold,
    };
    let (mut chars, mut bold_chars, mut largest) = (0.0f32, 0.0f32, 0.0f32);
    let mut ends_with_space = false;
    for piece in pieces {
        let trimmed = piece.text.trim();
        let size = piece.size.max(1.0);
        let continues = line.cells.last_mut().map(|cell| {
            let mut gap = piece.rect.x0 - cell.x1;
            // A piece drawn back over its neighbour's box was placed
            // against it: a space its text carries at the join is not seen.
            if gap > -OVERLAP * size {
                if piece.text.starts_with(char::is_whitespace) {
                    gap += SPACE_WIDTH * size;
                }
                if ends_with_space {
                    gap += SPACE_WIDTH * size;
                }
            }
            (cell, gap)
        });
        match continues {
            Some((cell, gap)) if gap <= GUTTER_GAP * size => {
                if gap > SPACE_GAP * size {
                    cell.text.push(' ');
                }
                cell.text.push_str(trimmed);
                cell.x1 = cell.x1.max(piece.rect.x1);
            }
            _ => line.cells.push(Cell {
                text: trimmed.to_owned(),
                x0: piece.rect.x0,
                x1: piece.rect.x1,
            }),
        }
        ends_with_space = piece.text.ends_with(char::is_whitespace);
        line.rect = line.rect.union(piece.rect);
        let weight = trimmed.chars().count() as f32;
        if weight > largest {
            largest = weight;
            line.size = piece.size;
        }
        chars += weight;
        if piece.bold {
            bold_chars += weight;
        }
    }
    line.bold = bold_chars * 2.0 > chars;
    line
}

/// `text` with the characters PDFs use for typesetting mapped to plain
/// text: ligatures spelled out, no-break and other spaces as a space,
/// soft hyphens and control characters dropped, dashes that hyphenate as
/// `-`.
pub fn plain_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            '\u{00AD}' | '\u{200B}' | '\u{FEFF}' => {}
            '\u{2010}' | '\u{2011}' => out.push('-'),
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => {
                out.push(' ')
            }
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Where a line is: a page and its index on the page.
pub type At = (usize, usize);

/// `words` without the numbering in front (`1`, `2.1`, `IV`, `Item 7`).
pub fn unnumbered(mut words: Vec<String>) -> Vec<String> {
    let is_number = |w: &str| {
        w.chars().all(|c| c.is_ascii_digit())
            || (w.len() <= 4 && w.chars().all(|c| "ivxl".contains(c)))
            || w == "item"
            || w == "part"
    };
    let numbers = words.iter().take_while(|w| is_number(w)).count();
    if numbers < words.len() {
        words.drain(..numbers);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(text: &str, x0: f32, x1: f32, y0: f32) -> Piece {
        Piece {
            text: text.into(),
            rect: BoxPt {
                x0,
                y0,
                x1,
                y1: y0 + 10.0,
            },
            size: 10.0,
            bold: false,
        }
    }

    #[test]
    fn pieces_on_a_baseline_make_a_line_with_spaces_and_cells() {
        let pieces = [
            piece("Net", 72.0, 90.0, 700.0),
            piece("income", 93.0, 125.0, 700.0),
            piece("5,363", 400.0, 425.0, 700.5),
            piece("4,869", 460.0, 485.0, 700.0),
            piece("Next", 72.0, 95.0, 686.0),
            piece("li", 95.0, 100.0, 686.0),
            piece("ne", 100.0, 110.0, 686.0),
        ];
        let lines = lines(3, &pieces);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].page, 3);
        let cells: Vec<&str> = lines[0].cells.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(cells, ["Net income", "5,363", "4,869"]);
        assert_eq!(lines[1].text(), "Nextline");
        assert_eq!(lines[0].rect.x1, 485.0);
    }

    #[test]
    fn a_space_carried_by_a_piece_counts_unless_the_piece_overlaps_its_neighbour() {
        // As in a filing's heading: "Incom" then " e" drawn back over it.
        let overlapping = [
            piece("Statement of Incom", 72.0, 167.7, 700.0),
            piece(" e", 167.1, 172.3, 700.0),
        ];
        assert_eq!(lines(1, &overlapping)[0].text(), "Statement of Income");
        // A piece beginning with its space where the last one ends is a
        // new word; so is one after a piece ending with a space.
        let touching = [
            piece("Statement of", 72.0, 130.0, 700.0),
            piece(" Income", 130.0, 165.0, 700.0),
            piece("for ", 168.0, 182.0, 700.0),
            piece("2018", 182.0, 200.0, 700.0),
        ];
        assert_eq!(
            lines(1, &touching)[0].text(),
            "Statement of Income for 2018"
        );
    }

    #[test]
    fn pieces_drawn_out_of_order_are_read_top_down_and_left_to_right() {
        let pieces = [
            piece("below", 72.0, 100.0, 680.0),
            piece("4,869", 460.0, 485.0, 700.0),
            piece("Income", 72.0, 105.0, 700.0),
            // A kerned letter drawn last, its box starting with a space
            // that overlaps the word before it.
            piece(" s", 104.0, 110.0, 700.0),
        ];
        let lines = lines(0, &pieces);
        let texts: Vec<String> = lines.iter().map(Line::text).collect();
        assert_eq!(texts, ["Incomes 4,869", "below"]);
        assert_eq!(lines[0].cells.len(), 2);
    }

    #[test]
    fn typesetting_characters_become_plain_text() {
        assert_eq!(
            plain_text("e\u{FB03}cient\u{00A0}o\u{FB00}er"),
            "efficient offer"
        );
        assert_eq!(
            plain_text("co\u{00AD}operate\u{2010}ly\u{0007}"),
            "cooperate-ly"
        );
    }
}
