//! The stored text of a PDF and its blocks: every line of every page in
//! reading order, furniture on lines of its own outside any block,
//! headings one block each, table rows one line each (cells joined by
//! ` | `), and running text joined into paragraphs with words hyphenated
//! at a line's end joined again. Every line's bytes and box are recorded
//! ([`PageLayout`]).

use std::collections::HashMap;

use super::lines::At;
use super::lines::Line;
use super::tables::row_text;
use crate::ingest::layout::{Block, BlockKind, Layout};
use crate::model::pages::{LineBox, Page, PageLayout};

/// What a line is in the stored text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A running header, footer or folio: stored, in no block.
    Furniture,
    /// A heading of this level.
    Heading(u8),
    /// A row of a table.
    Row,
    /// Running text.
    Body,
}

/// Each line's role: furniture and table rows as marked, headings as
/// found, the rest body.
pub fn roles(
    furniture: &[Vec<bool>],
    rows: &[Vec<bool>],
    headings: &HashMap<At, u8>,
) -> Vec<Vec<Role>> {
    (furniture.iter().zip(rows).enumerate())
        .map(|(p, (furniture, rows))| {
            (0..furniture.len())
                .map(|i| match headings.get(&(p, i)) {
                    _ if furniture[i] => Role::Furniture,
                    _ if rows[i] => Role::Row,
                    Some(&level) => Role::Heading(level),
                    None => Role::Body,
                })
                .collect()
        })
        .collect()
}

/// Page sizes (width, height) in points, one per page.
pub type PageSizes = [(f32, f32)];

/// The text, blocks and page geometry of `pages` of lines with `roles`.
pub fn compose(
    pages: &[Vec<Line>],
    roles: &[Vec<Role>],
    sizes: &PageSizes,
) -> (Layout, PageLayout) {
    let mut out = Composer::default();
    for (p, lines) in pages.iter().enumerate() {
        out.geometry.pages.push(Page {
            start: out.text.len() as u32,
            width: sizes[p].0,
            height: sizes[p].1,
        });
        let mut previous: Option<(&Line, Role)> = None;
        for (line, &role) in lines.iter().zip(&roles[p]) {
            match role {
                Role::Furniture => {
                    out.close();
                    out.write_line(line, &line.text());
                    out.text.push('\n');
                }
                Role::Heading(level) => {
                    let wrapped = matches!(previous, Some((before, Role::Heading(l)))
                        if l == level && before.size == line.size && close_below(before, line));
                    if wrapped && out.open.is_some() {
                        out.text.push(' ');
                    } else {
                        out.start(BlockKind::Heading { level });
                    }
                    out.write_line(line, &line.text());
                }
                Role::Row => {
                    if matches!(out.open, Some((BlockKind::Table, _))) {
                        out.text.push('\n');
                    } else {
                        out.start(BlockKind::Table);
                    }
                    out.write_line(line, &row_text(line));
                }
                Role::Body => {
                    let continues = matches!(previous, Some((before, Role::Body))
                        if !paragraph_break(before, line))
                        && matches!(out.open, Some((BlockKind::Paragraph, _)));
                    if !continues {
                        out.start(BlockKind::Paragraph);
                        out.write_line(line, &line.text());
                    } else if out.text.ends_with('-') && joins_hyphenated(&out.text, line) {
                        // `exam-` + `ple`: the hyphen goes, the word is whole.
                        out.text.pop();
                        out.end_last_line();
                        out.write_line(line, &line.text());
                    } else {
                        out.text.push('\n');
                        out.write_line(line, &line.text());
                    }
                }
            }
            previous = Some((line, role));
        }
        out.close();
    }
    out.close();
    (
        Layout {
            text: out.text,
            blocks: out.blocks,
            title: None,
            metadata: Default::default(),
        },
        out.geometry,
    )
}

/// Builds the text while recording blocks and line boxes.
#[derive(Default)]
struct Composer {
    text: String,
    blocks: Vec<Block>,
    geometry: PageLayout,
    /// The block being written and its first byte.
    open: Option<(BlockKind, usize)>,
}

impl Composer {
    /// Closes the open block and opens one of `kind`.
    fn start(&mut self, kind: BlockKind) {
        self.close();
        self.open = Some((kind, self.text.len()));
    }

    /// Ends the open block, if any, with a blank line.
    fn close(&mut self) {
        if let Some((kind, start)) = self.open.take() {
            let range = start..self.text.len();
            if !self.text[range.clone()].trim().is_empty() {
                self.blocks.push(Block { kind, range });
            }
            self.text.push_str("\n\n");
        }
    }

    /// Appends `text` as `line`'s bytes.
    fn write_line(&mut self, line: &Line, text: &str) {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        let end = self.text.len() as u32;
        if end > start {
            self.geometry.lines.push(LineBox {
                start,
                end,
                page: line.page,
                rect: line.rect,
            });
        }
    }

    /// Ends the last line's bytes at the end of the text (after a hyphen
    /// was taken off it).
    fn end_last_line(&mut self) {
        let end = self.text.len() as u32;
        if let Some(last) = self.geometry.lines.last_mut() {
            last.end = end;
            if last.end <= last.start {
                self.geometry.lines.pop();
            }
        }
    }
}

/// Whether `line` sits right under `above`, at no more than a normal
/// line's spacing.
fn close_below(above: &Line, line: &Line) -> bool {
    let gap = above.rect.y0 - line.rect.y1;
    let size = above.size.max(line.size).max(1.0);
    (-0.3 * size..=0.7 * size).contains(&gap)
}

/// Whether running text `line` starts a new paragraph after `above`: a
/// wider gap than line spacing, a change of size or weight, a jump back
/// up (a new column), or a first-line indent after a finished sentence.
fn paragraph_break(above: &Line, line: &Line) -> bool {
    let size = above.size.max(line.size).max(1.0);
    let finished = above
        .text()
        .trim_end()
        .ends_with(['.', ':', '?', '!', '"', '”']);
    let indented = line.rect.x0 > above.rect.x0 + 1.5 * size;
    let short_above = above.rect.x1 < line.rect.x1 - 3.0 * size;
    !close_below(above, line)
        || (above.size - line.size).abs() > 0.15 * size
        || above.bold != line.bold
        || (finished && (indented || short_above))
}

/// Whether the text's trailing `-` hyphenates a word `line` continues: a
/// letter before it, a lowercase letter starting the line.
fn joins_hyphenated(text: &str, line: &Line) -> bool {
    let before = text[..text.len() - 1].chars().next_back();
    let after = line.cells.first().and_then(|c| c.text.chars().next());
    before.is_some_and(char::is_alphabetic) && after.is_some_and(char::is_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::layout::pdf::lines::Cell;
    use crate::model::pages::BoxPt;

    fn line(page: u32, cells: &[&str], y: f32, size: f32) -> Line {
        Line {
            page,
            cells: (cells.iter().enumerate())
                .map(|(i, t)| Cell {
                    text: (*t).into(),
                    x0: 72.0 + 150.0 * i as f32,
                    x1: 200.0 + 150.0 * i as f32,
                })
                .collect(),
            rect: BoxPt {
                x0: 72.0,
                y0: y,
                x1: 500.0,
                y1: y + size,
            },
            size,
            bold: false,
        }
    }

    #[test]
    fn lines_become_text_blocks_and_boxes() {
        let page0 = vec![
            line(0, &["Annual Report 2018"], 760.0, 10.0),
            line(0, &["Overview"], 700.0, 14.0),
            line(0, &["We make adhesives and exam-"], 680.0, 10.0),
            line(0, &["ple films for many markets."], 668.0, 10.0),
            line(0, &["(Millions)", "2018"], 640.0, 10.0),
            line(0, &["Sales", "$", "32,765"], 628.0, 10.0),
            line(0, &["7"], 40.0, 10.0),
        ];
        let page1 = vec![line(1, &["Risk factors follow."], 700.0, 10.0)];
        let roles = vec![
            vec![
                Role::Furniture,
                Role::Heading(1),
                Role::Body,
                Role::Body,
                Role::Row,
                Role::Row,
                Role::Furniture,
            ],
            vec![Role::Body],
        ];
        let (layout, geometry) = compose(&[page0, page1], &roles, &[(612.0, 792.0); 2]);
        let blocks: Vec<(BlockKind, &str)> = (layout.blocks.iter())
            .map(|b| (b.kind, &layout.text[b.range.clone()]))
            .collect();
        assert_eq!(
            blocks,
            [
                (BlockKind::Heading { level: 1 }, "Overview"),
                (
                    BlockKind::Paragraph,
                    "We make adhesives and example films for many markets."
                ),
                (BlockKind::Table, "(Millions) | 2018\nSales | $32,765"),
                (BlockKind::Paragraph, "Risk factors follow."),
            ]
        );
        assert!(layout.text.starts_with("Annual Report 2018\n"));
        assert!(layout.text.contains("\n7\n"), "the folio stays in the text");
        assert_eq!(geometry.validate(layout.text.len() as u32), Ok(()));
        assert_eq!(geometry.lines.len(), 8);
        // The hyphenated word's first half ends its line's bytes.
        let exam = &geometry.lines[2];
        assert_eq!(
            &layout.text[exam.start as usize..exam.end as usize],
            "We make adhesives and exam"
        );
        let risk = layout.text.find("Risk").unwrap() as u32;
        assert_eq!(geometry.page_at(risk), 1);
        assert_eq!(geometry.pages_of(0..risk), 0..1);
    }

    #[test]
    fn a_gap_a_new_size_or_an_indent_after_a_sentence_breaks_a_paragraph() {
        let above = line(0, &["The first paragraph ends here."], 700.0, 10.0);
        let next = line(0, &["and goes on"], 688.0, 10.0);
        assert!(!paragraph_break(&line(0, &["It goes"], 700.0, 10.0), &next));
        assert!(paragraph_break(
            &above,
            &line(0, &["Far below"], 650.0, 10.0)
        ));
        assert!(paragraph_break(&above, &line(0, &["Larger"], 686.0, 12.0)));
        let mut indented = line(0, &["Indented start"], 688.0, 10.0);
        indented.rect.x0 += 30.0;
        assert!(paragraph_break(&above, &indented));
    }
}
