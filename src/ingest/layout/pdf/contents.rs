//! A PDF's table of contents, read from its pages: runs of lines that end
//! with a page number (`Item 7. Management's Discussion … 35`), in
//! non-decreasing order, on pages where such lines are many. Its entries
//! name the headings of the document after it, so a heading set like body
//! text is still found, and the contents' own lines (`PART I`, an entry's
//! wrapped first line) are never taken for headings.
//!
//! Printed page numbers seldom equal the file's page indexes (a cover and
//! the contents come first), so an entry is placed by its words and by the
//! offset most entries agree on ([`name_headings`]).

use std::collections::{HashMap, HashSet};

use super::lines::{At, Line, unnumbered};
use crate::compute::embed::hashed::words;

/// Words a number after which numbers something (`Item 5`, `Step 3`,
/// `Table 2`), not a page.
const NUMBERED: [&str; 14] = [
    "item", "part", "note", "section", "chapter", "article", "page", "step", "table", "figure",
    "exhibit", "schedule", "appendix", "question",
];
/// What a list item starts with.
const BULLETS: [char; 9] = ['•', '·', '●', '○', '▪', '■', '◦', '–', '-'];
/// Dot leaders and spaces between an entry's title and its page number.
const LEADERS: [char; 5] = ['.', '·', '…', '_', ' '];
/// Fewest entries a page needs to be read as a contents page.
const MIN_ENTRIES: usize = 5;
/// Share of a page's lines (furniture aside) that must be entries.
const MIN_SHARE: f32 = 0.3;
/// Share of consecutive entries whose page numbers must not decrease.
const ORDERED: f32 = 0.8;
/// Fewest entries that must agree on the offset between printed and file
/// page numbers before it is used.
const MIN_AGREEING: usize = 3;
/// Pages an entry's heading may sit from where its printed number and the
/// offset put it.
const PAGE_SLACK: usize = 1;
/// Most words of a line an entry names (a heading, not a paragraph).
const HEADING_WORDS: usize = 24;
/// Most words of a line above a contents page's first entry that belongs
/// to the contents (its title, a column header, `PART I`).
const HEADER_WORDS: usize = 4;
/// Fewest words a heading line needs when it is only the start of an
/// entry's longer title (a title the contents give in full).
const PREFIX_WORDS: usize = 3;

/// One entry of a table of contents.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its title's words (lowercased, numbering in front removed), with
    /// the lines it wrapped from joined.
    pub title: Vec<String>,
    /// Its last line's words alone (numbering removed): what is matched
    /// when the joined title picked up a column header.
    pub last_line: Vec<String>,
    /// The page number printed beside it.
    pub printed: usize,
    /// The (0-based) page of the contents it is listed on: the headings it
    /// names come after it.
    pub listed_on: usize,
}

/// The tables of contents of a document: their entries in order and every
/// line they span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contents {
    /// The entries, in reading order.
    pub entries: Vec<Entry>,
    /// Every line from a contents page's first entry (and the short lines
    /// just above it: a title, a column header) to its last: never a
    /// heading.
    pub lines: HashSet<At>,
}

/// The tables of contents among `pages` (`furniture` marks running headers
/// and footers, left out).
pub fn find(pages: &[Vec<Line>], furniture: &[Vec<bool>]) -> Contents {
    let mut contents = Contents::default();
    for (p, lines) in pages.iter().enumerate() {
        let numbered: Vec<(usize, usize)> = (lines.iter().enumerate())
            .filter(|&(i, _)| !furniture[p][i])
            .filter_map(|(i, line)| page_number(line, pages.len()).map(|n| (i, n)))
            .collect();
        let free = (0..lines.len()).filter(|&i| !furniture[p][i]).count();
        if numbered.len() < MIN_ENTRIES || (numbered.len() as f32) < MIN_SHARE * free as f32 {
            continue;
        }
        let ordered = numbered.windows(2).filter(|w| w[1].1 >= w[0].1).count();
        if (ordered as f32) < ORDERED * (numbered.len() - 1) as f32 {
            continue;
        }
        let mut previous = None;
        for &(i, printed) in &numbered {
            // An entry wraps from the lines since the entry before it.
            let from = previous.map_or(i, |previous| previous + 1);
            let own = words(without_number(&lines[i].text()));
            let mut joined: Vec<String> = (from..i)
                .filter(|&j| !furniture[p][j])
                .flat_map(|j| words(&lines[j].text()))
                .collect();
            joined.extend(own.iter().cloned());
            contents.entries.push(Entry {
                title: unnumbered(joined),
                last_line: unnumbered(own),
                printed,
                listed_on: p,
            });
            previous = Some(i);
        }
        let (first, last) = (numbered[0].0, numbered[numbered.len() - 1].0);
        // Above the first entry: the contents' own title, column header
        // and first part (`Table of Contents`, `Page`, `PART I`).
        let top = (0..first)
            .rev()
            .take_while(|&i| furniture[p][i] || words(&lines[i].text()).len() <= HEADER_WORDS)
            .last()
            .unwrap_or(first);
        contents.lines.extend(
            (top..=last)
                .filter(|&i| !furniture[p][i])
                .filter(|&i| i >= first || !is_contents_title(&lines[i].text()))
                .map(|i| (p, i)),
        );
    }
    contents
}

/// Whether a line above the entries is the contents' own title (`Table of
/// Contents`, `Index`): it stays a heading, so that the contents are a
/// section of their own.
fn is_contents_title(text: &str) -> bool {
    words(text).iter().any(|w| w == "contents" || w == "index")
}

/// The lines after the contents that its entries name (line → entry
/// index), among lines that are not `taken` (furniture, table rows) nor
/// list items. Each entry names at most one line and each line is named
/// once; an entry is placed within [`PAGE_SLACK`] pages of its printed
/// number shifted by the offset most entries agree on, on a line its type
/// already sets as a heading (`styled`) where one names it, else on the
/// first. When too few entries agree on an offset, the printed numbers say
/// nothing reliable of where headings are, and no line is named.
pub fn name_headings(
    pages: &[Vec<Line>],
    taken: &[Vec<bool>],
    contents: &Contents,
    styled: &HashSet<At>,
) -> HashMap<At, usize> {
    let Some(start) = contents.entries.iter().map(|e| e.listed_on).min() else {
        return HashMap::new();
    };
    let candidates: Vec<(At, Vec<String>)> = (start..pages.len())
        .flat_map(|p| (0..pages[p].len()).map(move |i| (p, i)))
        .filter(|&(p, i)| !taken[p][i] && !contents.lines.contains(&(p, i)))
        .map(|(p, i)| (p, i, pages[p][i].text()))
        .filter(|(_, _, text)| !text.starts_with(BULLETS))
        .map(|(p, i, text)| (p, i, words(&text)))
        .filter(|(_, _, w)| !w.is_empty() && w.len() <= HEADING_WORDS)
        .map(|(p, i, w)| ((p, i), unnumbered(w)))
        .collect();
    let naming: Vec<Vec<At>> = (contents.entries.iter())
        .map(|entry| {
            (candidates.iter())
                .filter(|(at, line)| at.0 >= entry.listed_on && names(entry, line))
                .map(|(at, _)| *at)
                .collect()
        })
        .collect();
    let Some(offset) = agreed_offset(contents, &naming) else {
        return HashMap::new();
    };
    let mut named = HashMap::new();
    for (index, (entry, lines)) in contents.entries.iter().zip(&naming).enumerate() {
        let expected = entry.printed as i64 + offset;
        let fits = lines.iter().filter(|at| {
            (at.0 as i64 - expected).unsigned_abs() as usize <= PAGE_SLACK
                && !named.contains_key(*at)
        });
        if let Some(&at) = fits.min_by_key(|at| (!styled.contains(*at), **at)) {
            named.insert(at, index);
        }
    }
    named
}

/// The offset (file page − printed page) that most entries' first naming
/// lines agree on, when at least [`MIN_AGREEING`] do.
fn agreed_offset(contents: &Contents, naming: &[Vec<At>]) -> Option<i64> {
    let mut votes: HashMap<i64, usize> = HashMap::new();
    for (entry, lines) in contents.entries.iter().zip(naming) {
        if let Some(at) = lines.first() {
            *votes.entry(at.0 as i64 - entry.printed as i64).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .filter(|&(_, n)| n >= MIN_AGREEING)
        .max_by_key(|&(offset, n)| (n, std::cmp::Reverse(offset)))
        .map(|(offset, _)| offset)
}

/// Whether a line's words (numbering removed) name `entry`: they start
/// with its title, or are the start of a title the contents give in full
/// (at least [`PREFIX_WORDS`] words of it); either with the whole joined
/// title or with its last line alone.
fn names(entry: &Entry, line: &[String]) -> bool {
    [&entry.title, &entry.last_line].into_iter().any(|title| {
        !title.is_empty()
            && (line.starts_with(title)
                || (line.len() >= PREFIX_WORDS.min(title.len()) && title.starts_with(line)))
    })
}

/// The page number a contents entry ends with: the last word of its last
/// cell, a number from 1 to `pages`, after a word with letters in that cell
/// (dot leaders aside) that does not number something (`Item 5`, `Step 3`:
/// [`NUMBERED`]); or a cell of its own after a cell with letters (a table
/// row of amounts is no entry) that does not end in such a numbering
/// (`Item 5. | 14`, `Notes 3 | 12`).
fn page_number(line: &Line, pages: usize) -> Option<usize> {
    let cells: Vec<&str> = (line.cells.iter())
        .map(|cell| cell.text.trim_matches(LEADERS))
        .filter(|cell| !cell.is_empty())
        .collect();
    let (last_cell, earlier) = cells.split_last()?;
    let number = match last_cell.rsplit_once(char::is_whitespace) {
        Some((rest, number)) => {
            let before = rest
                .trim_end_matches(LEADERS)
                .split_whitespace()
                .next_back()?;
            let titled = before.chars().any(char::is_alphabetic) && !numbers(before, false);
            titled.then_some(number)?
        }
        None => {
            let title = earlier.last()?;
            let words: Vec<&str> = title.split_whitespace().collect();
            let numbered = match words.as_slice() {
                [.., word, number] => is_number(number) && numbers(word, true),
                _ => false,
            };
            let titled = title.chars().any(char::is_alphabetic) && !numbered;
            titled.then_some(*last_cell)?
        }
    };
    let number: usize = number.parse().ok()?;
    (1..=pages).contains(&number).then_some(number)
}

/// Whether `word` is one of [`NUMBERED`] (or, with `plural`, its plural).
fn numbers(word: &str, plural: bool) -> bool {
    let singular = (word.strip_suffix(['s', 'S']))
        .filter(|_| plural)
        .unwrap_or(word);
    (NUMBERED.iter()).any(|w| word.eq_ignore_ascii_case(w) || singular.eq_ignore_ascii_case(w))
}

/// Whether `word` is a number (`5`, `5.`).
fn is_number(word: &str) -> bool {
    let digits = word.trim_end_matches('.');
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// `text` without the page number (and dot leaders) it ends with.
fn without_number(text: &str) -> &str {
    text.trim_end()
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches(|c: char| c == '|' || LEADERS.contains(&c))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ingest::layout::pdf::lines::Cell;
    use crate::model::pages::BoxPt;

    fn line(text: &str) -> Line {
        Line {
            page: 0,
            cells: text
                .split(" | ")
                .map(|t| Cell {
                    text: t.into(),
                    x0: 72.0,
                    x1: 400.0,
                })
                .collect(),
            rect: BoxPt::default(),
            size: 10.0,
            bold: false,
        }
    }

    fn page(texts: &[&str]) -> Vec<Line> {
        texts.iter().map(|t| line(t)).collect()
    }

    /// A cover, a contents page and the pages its entries name (printed
    /// page n is file page n + 1), then an appendix.
    pub(crate) fn filing() -> Vec<Vec<Line>> {
        let mut pages = vec![
            page(&["FORM 10-K", "ACME CORP"]),
            page(&[
                "Table of Contents",
                "Page",
                "PART I",
                "Item 1. | Business | 2",
                "Item 1A. | Risk Factors | 3",
                "PART II",
                "Item 5.",
                "Market for Common Equity and Issuer Purchases of",
                "Equity Securities | 4",
                "Item 7. | Management's Discussion and Analysis ..... 5",
                "Consolidated Statement of Cash Flows for the years ended 2022 | 6",
            ]),
        ];
        // Printed page n is the file's page n + 1 (0-based; the cover is
        // not numbered).
        let body = "The company makes things and sells them to many customers.";
        pages.push(page(&[body]));
        pages.push(page(&["PART I", "Item 1. Business", body]));
        pages.push(page(&[
            "Item 1A. Risk Factors",
            body,
            "Business risks",
            body,
        ]));
        pages.push(page(&[
            "Item 5. Market for Common Equity and Issuer Purchases of Equity Securities",
            body,
        ]));
        pages.push(page(&[
            "• Management's Discussion and Analysis",
            "Item 7. Management's Discussion and Analysis",
            body,
        ]));
        pages.push(page(&[
            "ACME Corp and Subsidiaries",
            "Consolidated Statement of Cash Flows",
            "Net income | 1,204 | 1,100",
        ]));
        pages.push(page(&["Item 1. Business", "Appendix text"]));
        pages
    }

    #[test]
    fn a_contents_page_is_found_with_its_entries() {
        let pages = filing();
        let furniture: Vec<Vec<bool>> = pages.iter().map(|p| vec![false; p.len()]).collect();
        let contents = find(&pages, &furniture);
        assert_eq!(contents.entries.len(), 5);
        let printed: Vec<usize> = contents.entries.iter().map(|e| e.printed).collect();
        assert_eq!(printed, [2, 3, 4, 5, 6]);
        assert_eq!(contents.entries[0].last_line, ["business"]);
        // The wrapped entry joins its lines; numbering is dropped.
        assert_eq!(
            contents.entries[2].title.join(" "),
            "market for common equity and issuer purchases of equity securities"
        );
        assert_eq!(
            contents.entries[3].title.join(" "),
            "management s discussion and analysis",
            "dot leaders and the number are not the title"
        );
        // From the first entry to the last, "PART II" and "Item 5." too,
        // and the short lines above the first ("Page", "PART I"), but not
        // the contents' own title.
        let lines: HashSet<At> = (1..11).map(|i| (1, i)).collect();
        assert_eq!(contents.lines, lines);
        // A table of amounts is no contents.
        let table = vec![page(&[
            "Net sales | 1,204 | 1,100",
            "Cost of sales | 800 | 700",
            "Gross margin | 404 | 400",
            "Operating expenses | 200 | 180",
            "Net income | 204 | 220",
        ])];
        assert!(find(&table, &[vec![false; 5]]).entries.is_empty());
        // Nor are numbered steps or notes, in a cell of their own or not...
        let mut steps = vec![page(&[
            "Step 1",
            "Step 2",
            "Notes 3 | 12",
            "Item 5. | 14",
            "Table 4",
            "Exhibit 6",
        ])];
        steps.resize(20, Vec::new());
        let furniture: Vec<Vec<bool>> = steps.iter().map(|p| vec![false; p.len()]).collect();
        assert!(find(&steps, &furniture).entries.is_empty());
        // ...while a title that only looks like one is an entry.
        let mut titled = vec![page(&[
            "Notes | 12",
            "Exhibits 13",
            "Item 6. | Exhibits | 14",
            "Steps taken in 2022 | 15",
            "Schedules ..... 16",
        ])];
        titled.resize(20, Vec::new());
        let furniture: Vec<Vec<bool>> = titled.iter().map(|p| vec![false; p.len()]).collect();
        let printed: Vec<usize> = (find(&titled, &furniture).entries.iter())
            .map(|e| e.printed)
            .collect();
        assert_eq!(printed, [12, 13, 14, 15, 16]);
    }

    #[test]
    fn entries_name_their_headings_where_the_printed_pages_say() {
        let mut pages = filing();
        // A second contents page near the end (an index of schedules) does
        // not hide the headings the first one names before it.
        pages.push(page(&[
            "Schedule A | 9",
            "Schedule B | 9",
            "Schedule C | 9",
            "Schedule D | 9",
            "Schedule E | 9",
        ]));
        let taken: Vec<Vec<bool>> = pages.iter().map(|p| vec![false; p.len()]).collect();
        let contents = find(&pages, &taken);
        let named = name_headings(&pages, &taken, &contents, &HashSet::new());
        let at = |entry: usize| named.iter().find(|(_, e)| **e == entry).map(|(at, _)| *at);
        assert_eq!(
            at(0),
            Some((3, 1)),
            "Item 1 on printed page 2, not the appendix"
        );
        assert_eq!(at(1), Some((4, 0)));
        assert_eq!(at(2), Some((5, 0)), "the wrapped entry");
        assert_eq!(at(3), Some((6, 1)), "not the list item");
        assert_eq!(
            at(4),
            Some((7, 1)),
            "the heading is the start of the title the contents give in full"
        );
        assert_eq!(named.len(), 5, "{named:?}");
        assert!(!named.contains_key(&(4, 2)), "a subheading no entry names");
    }
}
