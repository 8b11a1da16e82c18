//! Headings of a PDF: from its outline (bookmarks) when it has one that
//! names lines of its pages; otherwise from layout: a short line set
//! larger or bolder than the body text, or numbered as a part, an item or
//! a numbered section, or named by a table of contents ([`contents`],
//! whose own lines are none). Levels come from the numbering where there is one
//! (`PART II` above `Item 7.` above the rest), then from type size and
//! weight, larger above smaller.
//!
//! The document's title is what its first page sets largest, when that is
//! larger than the body text and than anything on later pages: a paper's
//! title, a filing's form and company, a report's headline
//! ([`cover_title`]); a first page whose largest type is a heading style
//! the rest of the document uses too has none.

use std::collections::{HashMap, HashSet};

use super::contents::{self, Contents};
use super::lines::{At, Line, unnumbered};
use crate::compute::embed::hashed::words;

/// One outline (bookmark) entry: its title, depth (0 at the top) and page.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlineEntry {
    /// The bookmark's title.
    pub title: String,
    /// Its depth in the outline, 0 for the top.
    pub depth: u8,
    /// The page it points at, 0-based.
    pub page: u32,
}

/// Deepest heading level given.
const MAX_LEVEL: u8 = 6;
/// Longest heading, in words.
const HEADING_WORDS: usize = 14;
/// Longest heading, in characters.
const HEADING_CHARS: usize = 150;
/// A line this much larger than body text is set as a heading.
const LARGER: f32 = 1.15;
/// Words a line of running text has at least (for the body style).
const BODY_WORDS: usize = 8;
/// Most lines a cover title takes.
const TITLE_LINES: usize = 3;
/// Share of an outline's entries that must name a line for it to be used.
const OUTLINE_MATCHED: f32 = 0.5;

/// The body text's type: its size in points and whether it is bold.
pub type BodyStyle = (f32, bool);

/// The heading lines and their levels (1 at the top), given which lines
/// are furniture or table rows (`taken`), the `body` style
/// ([`body_style`]) and the document's tables of `contents`: from
/// `outline` when at least half its entries name a line on their page (or
/// the next), else from layout.
pub fn headings(
    pages: &[Vec<Line>],
    taken: &[Vec<bool>],
    outline: &[OutlineEntry],
    body: BodyStyle,
    contents: &Contents,
) -> HashMap<At, u8> {
    if !outline.is_empty() {
        let matched = from_outline(pages, taken, outline);
        if matched.len() as f32 >= OUTLINE_MATCHED * outline.len() as f32 {
            return matched;
        }
    }
    from_layout(pages, taken, body, contents)
}

/// Outline entries matched to the first free line, on their page or the
/// next, whose words (numbering aside) start with the title's (or start
/// it, for a title wrapped over two lines).
fn from_outline(
    pages: &[Vec<Line>],
    taken: &[Vec<bool>],
    outline: &[OutlineEntry],
) -> HashMap<At, u8> {
    let mut found = HashMap::new();
    for entry in outline {
        let title = unnumbered(words(&entry.title));
        if title.is_empty() {
            continue;
        }
        let page = entry.page as usize;
        let at = (page..(page + 2).min(pages.len())).find_map(|p| {
            (0..pages[p].len()).find_map(|i| {
                let line = unnumbered(words(&pages[p][i].text()));
                let names = !line.is_empty()
                    && (line.starts_with(&title)
                        || (title.starts_with(&line) && 2 * line.len() >= title.len()));
                (names && !taken[p][i] && !found.contains_key(&(p, i))).then_some((p, i))
            })
        });
        if let Some(at) = at {
            found.insert(at, (entry.depth + 1).min(MAX_LEVEL));
        }
    }
    found
}

/// How a heading candidate is numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Numbering {
    /// `PART I`.
    Part,
    /// `Item 7.`, `ITEM 1A.`.
    Item,
    /// `2.1 Title`: its depth.
    Decimal(u8),
    /// Not numbered.
    None,
}

/// The style that ranks unnumbered headings: size (half points), bold,
/// capitals.
type Style = (i32, bool, bool);

/// The lines of a page that are neither furniture nor table rows.
fn free_lines<'a>(lines: &'a [Line], taken: &'a [bool]) -> impl Iterator<Item = &'a Line> {
    (lines.iter().zip(taken))
        .filter(|(_, t)| !**t)
        .map(|(line, _)| line)
}

/// The title the first page with free lines (not furniture, not table
/// rows: `taken`) sets: its lines in the largest type, when that is
/// [`LARGER`] than the body text (`body_size`) and larger than every free
/// line of the later pages, at most [`TITLE_LINES`] of them in reading
/// order, joined by spaces. `None` when nothing stands out, or what does
/// is not a heading's length.
pub fn cover_title(pages: &[Vec<Line>], taken: &[Vec<bool>], body_size: f32) -> Option<String> {
    let free = |p: usize| free_lines(&pages[p], &taken[p]);
    let first = (0..pages.len()).find(|&p| free(p).next().is_some())?;
    let cover: Vec<&Line> = free(first).collect();
    let largest = cover.iter().map(|l| half_points(l.size)).max()?;
    let later = (first + 1..pages.len())
        .flat_map(|p| free(p).map(|l| half_points(l.size)))
        .max();
    if (largest as f32 / 2.0) < LARGER * body_size || later.is_some_and(|size| size >= largest) {
        return None;
    }
    let title = (cover.iter())
        .filter(|l| half_points(l.size) == largest)
        .take(TITLE_LINES)
        .map(|l| l.text())
        .collect::<Vec<_>>()
        .join(" ");
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    let fits = !title.is_empty()
        && title.chars().any(char::is_alphabetic)
        && title.chars().count() <= HEADING_CHARS * 2;
    fits.then_some(title)
}

/// Headings found from type and numbering, and lines a table of
/// `contents` names whatever their type; the contents' own lines are none.
fn from_layout(
    pages: &[Vec<Line>],
    taken: &[Vec<bool>],
    body: BodyStyle,
    contents: &Contents,
) -> HashMap<At, u8> {
    let mut candidates: Vec<(At, Numbering, Style)> = Vec::new();
    for (p, lines) in pages.iter().enumerate() {
        for (i, line) in lines.iter().enumerate() {
            if taken[p][i] || contents.lines.contains(&(p, i)) {
                continue;
            }
            if let Some(numbering) = heading_numbering(line, body) {
                candidates.push(((p, i), numbering, style(line)));
            }
        }
    }
    let styled: HashSet<At> = candidates.iter().map(|c| c.0).collect();
    for at in contents::name_headings(pages, taken, contents, &styled).into_keys() {
        if !styled.contains(&at) {
            let line = &pages[at.0][at.1];
            candidates.push((at, numbering(&line.text()), style(line)));
        }
    }
    let has_part = candidates.iter().any(|c| c.1 == Numbering::Part);
    let has_item = candidates.iter().any(|c| c.1 == Numbering::Item);
    let tiers = u8::from(has_part) + u8::from(has_item);
    let mut styles: Vec<Style> = (candidates.iter())
        .filter(|c| c.1 == Numbering::None)
        .map(|c| c.2)
        .collect();
    styles.sort_by(|a, b| b.cmp(a));
    styles.dedup();
    (candidates.into_iter())
        .map(|(at, numbering, style)| {
            let level = match numbering {
                Numbering::Part => 1,
                Numbering::Item => 1 + u8::from(has_part),
                Numbering::Decimal(depth) => tiers + depth,
                Numbering::None => {
                    let rank = styles.iter().position(|s| *s == style).unwrap_or(0);
                    tiers + 1 + rank as u8
                }
            };
            (at, level.clamp(1, MAX_LEVEL))
        })
        .collect()
}

/// The body text's size and whether it is bold: the style of most
/// characters in lines of running text (at least [`BODY_WORDS`] words of
/// letters, [`prose_words`]) outside furniture and tables; of all their
/// lines' characters when no line is that long. Short lines are left out
/// so that code listings, set smaller than the prose around them, do not
/// pass for the body and make every line of prose look like a heading.
pub fn body_style(pages: &[Vec<Line>], taken: &[Vec<bool>]) -> BodyStyle {
    let lines: Vec<(&Line, bool)> = (pages.iter().zip(taken))
        .flat_map(|(lines, taken)| free_lines(lines, taken))
        .map(|line| (line, prose_words(&line.text()) >= BODY_WORDS))
        .collect();
    let any_running = lines.iter().any(|&(_, running)| running);
    let mut sizes: HashMap<(i32, bool), usize> = HashMap::new();
    for (line, _) in lines
        .iter()
        .filter(|&&(_, running)| running || !any_running)
    {
        let chars: usize = line.cells.iter().map(|c| c.text.len()).sum();
        *sizes
            .entry((half_points(line.size), line.bold))
            .or_default() += chars;
    }
    sizes
        .into_iter()
        .max_by_key(|&(style, chars)| (chars, std::cmp::Reverse(style)))
        .map_or((10.0, false), |((size, bold), _)| (size as f32 / 2.0, bold))
}

/// Words of `text` made of letters (with a word's own punctuation:
/// `(said),` is one; `=>` and `foo()` are none), as prose has many of.
fn prose_words(text: &str) -> usize {
    text.split_whitespace()
        .filter(|token| {
            let word = token
                .trim_start_matches(['(', '"', '\'', '“', '‘'])
                .trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'', '”', '’']);
            !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_alphabetic() || c == '-' || c == '\'' || c == '’')
        })
        .count()
}

/// The line's size in half points, rounded.
fn half_points(size: f32) -> i32 {
    (size * 2.0).round() as i32
}

/// The style a heading candidate ranks by.
fn style(line: &Line) -> Style {
    (half_points(line.size), line.bold, is_capitals(&line.text()))
}

/// How `line` is numbered, when it is a heading: short, one cell, some
/// letters, not ending like a clause; and larger than the body, or bold
/// where the body is not, or in capitals, or numbered as a part or item.
fn heading_numbering(line: &Line, (body_size, body_bold): BodyStyle) -> Option<Numbering> {
    if line.cells.len() != 1 {
        return None;
    }
    let text = line.text();
    let words = text.split_whitespace().count();
    if words == 0
        || words > HEADING_WORDS
        || text.len() > HEADING_CHARS
        || !text.chars().any(char::is_alphabetic)
        || text.ends_with([',', ';'])
    {
        return None;
    }
    let numbering = numbering(&text);
    let larger = line.size >= body_size * LARGER;
    let bolder = line.bold && !body_bold && line.size >= body_size * 0.95;
    let capitals = is_capitals(&text) && words >= 2 && line.size >= body_size * 0.95;
    let sentence = text.ends_with('.') && words >= 3 && numbering == Numbering::None;
    let numbered = matches!(numbering, Numbering::Part | Numbering::Item);
    ((larger || bolder || capitals || numbered) && !sentence).then_some(numbering)
}

/// The numbering a heading text starts with.
fn numbering(text: &str) -> Numbering {
    static PART: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^(?i:part)\s+[IVX]+\b").expect("a valid pattern")
    });
    static ITEM: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^(?i:item)\s+\d{1,2}[A-Ca-c]?\s*[.:]").expect("a valid pattern")
    });
    static DECIMAL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^(\d{1,2}(?:\.\d{1,2}){0,4})\.?\s+\p{Lu}").expect("a valid pattern")
    });
    if PART.is_match(text) {
        Numbering::Part
    } else if ITEM.is_match(text) {
        Numbering::Item
    } else if let Some(captures) = DECIMAL.captures(text) {
        Numbering::Decimal(captures[1].split('.').count() as u8)
    } else {
        Numbering::None
    }
}

/// Whether most letters of `text` are capitals.
fn is_capitals(text: &str) -> bool {
    let (upper, letters) = text
        .chars()
        .filter(|c| c.is_alphabetic())
        .fold((0, 0), |(u, l), c| {
            (u + usize::from(c.is_uppercase()), l + 1)
        });
    letters >= 4 && upper * 10 >= letters * 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::layout::pdf::contents::tests::filing;
    use crate::ingest::layout::pdf::lines::Cell;
    use crate::model::pages::BoxPt;

    fn line(text: &str, size: f32, bold: bool) -> Line {
        Line {
            page: 0,
            cells: vec![Cell {
                text: text.into(),
                x0: 72.0,
                x1: 400.0,
            }],
            rect: BoxPt::default(),
            size,
            bold,
        }
    }

    fn body(text: &str) -> Line {
        line(text, 10.0, false)
    }

    /// Headings from type and numbering alone: no outline, no contents.
    fn from_type(pages: &[Vec<Line>], taken: &[Vec<bool>]) -> HashMap<At, u8> {
        headings(
            pages,
            taken,
            &[],
            body_style(pages, taken),
            &Contents::default(),
        )
    }

    #[test]
    fn parts_items_and_styles_rank_into_levels() {
        let page = vec![
            line("PART II", 10.0, true),
            line("Item 7. Management's Discussion and Analysis", 10.0, true),
            body(
                "The company sells adhesives, films and abrasives to many industries around the world.",
            ),
            line("Results of Operations", 10.0, true),
            body(
                "Sales rose by four percent in the year, led by the safety segment, as described below.",
            ),
            line("Overview", 12.0, false),
            body(
                "A sentence of ordinary body text that is long enough to count as body text here.",
            ),
            line("Net sales were higher.", 10.0, true),
        ];
        let taken = [vec![false; page.len()]];
        let pages = [page];
        let found = from_type(&pages, &taken);
        assert_eq!(found.get(&(0, 0)), Some(&1), "the part");
        assert_eq!(found.get(&(0, 1)), Some(&2), "the item");
        // Unnumbered: the larger style ranks above the bold one.
        assert_eq!(found.get(&(0, 5)), Some(&3));
        assert_eq!(found.get(&(0, 3)), Some(&4));
        assert_eq!(found.get(&(0, 2)), None);
        assert_eq!(found.get(&(0, 7)), None, "a short bold sentence stays body");
        assert_eq!(found.len(), 4);
    }

    #[test]
    fn prose_sets_the_body_style_even_where_code_has_more_characters() {
        let code = |t: &str| line(t, 8.5, false);
        let mut page = vec![line("Motivation", 14.0, true)];
        page.push(body("Short prose here: a match arm may start with a bar."));
        for _ in 0..12 {
            page.push(code("match foo { A => (), B => () }"));
            page.push(code("let x = Foo::A; // no bar"));
        }
        page.push(body("Consider the following example of a long match:"));
        let taken = [vec![false; page.len()]];
        let pages = [page];
        let found = from_type(&pages, &taken);
        // Only the heading; prose lines, larger than the code, stay body.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found.get(&(0, 0)), Some(&1));
    }

    #[test]
    fn the_cover_title_is_what_the_first_page_sets_largest() {
        let title_of = |pages: &[Vec<Line>], taken: &[Vec<bool>]| {
            cover_title(pages, taken, body_style(pages, taken).0)
        };
        let text =
            "A sentence of ordinary body text that is long enough to count as body text here.";
        let cover = vec![
            line("running header", 20.0, false),
            line("FORM 10-K", 16.0, true),
            body(text),
            line("ADOBE  INC.", 16.0, false),
            line("UNITED STATES", 14.0, false),
        ];
        let second = vec![line("Item 1. Business", 14.0, true), body(text), body(text)];
        let mut pages = [cover, second];
        let mut taken = vec![vec![false; 5], vec![false; 3]];
        taken[0][0] = true; // furniture: not the title
        assert_eq!(
            title_of(&pages, &taken).as_deref(),
            Some("FORM 10-K ADOBE INC.")
        );
        // The largest type of the first page is a heading style used later
        // too: no title.
        pages[1][0].size = 16.0;
        assert_eq!(title_of(&pages, &taken), None);
        // A first page set like the body has no title; nor has one whose
        // largest lines are all taken.
        let plain = [vec![body(text), body("Short.")]];
        assert_eq!(title_of(&plain, &[vec![false, false]]), None);
        let only_taken = [vec![line("Big", 20.0, true)], vec![body(text)]];
        assert_eq!(
            title_of(&only_taken, &[vec![true], vec![false]]),
            None,
            "the first page with free lines is the body page"
        );
        // At most three lines.
        let many = [vec![
            line("One", 20.0, false),
            line("Two", 20.0, false),
            line("Three", 20.0, false),
            line("Four", 20.0, false),
            body(text),
            body(text),
            body(text),
            body(text),
            body(text),
        ]];
        assert_eq!(
            title_of(&many, &[vec![false; 9]]).as_deref(),
            Some("One Two Three")
        );
    }

    #[test]
    fn an_outline_that_names_lines_gives_the_headings() {
        let pages = vec![
            vec![body("Contents"), body("1 Introduction to the design")],
            vec![
                body("Some text that runs on."),
                body("1.1 Scope"),
                body("More text."),
            ],
        ];
        let taken = vec![vec![false; 2], vec![false; 3]];
        let entry = |title: &str, depth, page| OutlineEntry {
            title: title.into(),
            depth,
            page,
        };
        let mut outline = vec![
            entry("Introduction to the design", 0, 0),
            entry("1.1 Scope", 1, 0),
            entry("Nowhere", 0, 1),
        ];
        let found = headings(
            &pages,
            &taken,
            &outline,
            body_style(&pages, &taken),
            &Contents::default(),
        );
        assert_eq!(
            found.get(&(0, 1)),
            Some(&1),
            "numbering aside, the words match"
        );
        assert_eq!(found.get(&(1, 1)), Some(&2), "found on the next page");
        assert_eq!(found.len(), 2);
        // With fewer than half its entries naming a line, layout decides
        // (and finds no heading in plain body text).
        outline.push(entry("Elsewhere", 0, 1));
        outline.push(entry("Nothing", 0, 1));
        assert!(
            headings(
                &pages,
                &taken,
                &outline,
                body_style(&pages, &taken),
                &Contents::default()
            )
            .is_empty()
        );
    }

    #[test]
    fn numbering_is_read() {
        assert_eq!(numbering("PART I"), Numbering::Part);
        assert_eq!(numbering("ITEM 1A. RISK FACTORS"), Numbering::Item);
        assert_eq!(numbering("Item 7: MD&A"), Numbering::Item);
        assert_eq!(numbering("2.1 Scope of work"), Numbering::Decimal(2));
        assert_eq!(numbering("2018 was a good year"), Numbering::None);
        assert_eq!(numbering("Partners in growth"), Numbering::None);
    }

    #[test]
    fn the_contents_make_headings_of_what_they_name_and_none_of_their_own_lines() {
        let pages = filing();
        let taken: Vec<Vec<bool>> = pages.iter().map(|p| vec![false; p.len()]).collect();
        let body = body_style(&pages, &taken);
        let contents = contents::find(&pages, &taken);
        let found = headings(&pages, &taken, &[], body, &contents);
        assert!(!found.contains_key(&(1, 2)), "PART I on the contents page");
        assert!(!found.contains_key(&(1, 6)), "Item 5. on the contents page");
        assert!(found.contains_key(&(3, 0)), "PART I where it starts");
        let statement = (7, 1);
        assert!(
            found.contains_key(&statement),
            "a heading set like body text, named by the contents"
        );
        let without = headings(&pages, &taken, &[], body, &Contents::default());
        assert!(!without.contains_key(&statement));
        assert!(
            without.contains_key(&(1, 2)),
            "without contents, PART I is taken"
        );
    }
}
