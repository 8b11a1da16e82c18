//! Running headers, footers and page numbers: the lines at the top or the
//! bottom of a page that repeat, digits aside, on many pages, and page
//! folios anywhere in those bands. They stay in the stored text (so every
//! coordinate is exact) but out of the EDUs.

use std::collections::HashMap;

use super::lines::Line;

/// How many lines at each edge of a page are looked at...
const EDGE_LINES: usize = 3;
/// ...within this share of the page's height from its top or bottom.
const EDGE_BAND: f32 = 0.15;
/// A line repeats when it is on at least this share of the pages...
const REPEAT_SHARE: f32 = 0.25;
/// ...and on at least this many.
const REPEAT_PAGES: usize = 2;

/// For each page's lines (on a page of the given height), which are
/// furniture.
pub fn furniture(pages: &[Vec<Line>], heights: &[f32]) -> Vec<Vec<bool>> {
    let edges: Vec<Vec<usize>> = (pages.iter().zip(heights))
        .map(|(lines, &height)| edge_lines(lines, height))
        .collect();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (lines, edge) in pages.iter().zip(&edges) {
        let mut keys: Vec<String> = edge.iter().map(|&i| key(&lines[i].text())).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
    }
    let with_text = pages.iter().filter(|l| !l.is_empty()).count();
    let needed = REPEAT_PAGES.max((REPEAT_SHARE * with_text as f32).ceil() as usize);
    pages
        .iter()
        .zip(&edges)
        .map(|(lines, edge)| {
            let mut marks = vec![false; lines.len()];
            for &i in edge {
                let text = lines[i].text();
                marks[i] = is_folio(&text) || seen.get(&key(&text)).is_some_and(|&n| n >= needed);
            }
            marks
        })
        .collect()
}

/// The indices of the top and bottom [`EDGE_LINES`] lines of a page of
/// `height` points, of those in its top and bottom [`EDGE_BAND`].
fn edge_lines(lines: &[Line], height: f32) -> Vec<usize> {
    let mut by_height: Vec<usize> = (0..lines.len()).collect();
    by_height.sort_by(|&a, &b| lines[b].rect.y1.total_cmp(&lines[a].rect.y1));
    let top = (by_height.iter())
        .take_while(|&&i| lines[i].rect.y0 >= (1.0 - EDGE_BAND) * height)
        .take(EDGE_LINES);
    let bottom = (by_height.iter().rev())
        .take_while(|&&i| lines[i].rect.y1 <= EDGE_BAND * height)
        .take(EDGE_LINES);
    let mut edge: Vec<usize> = top.chain(bottom).copied().collect();
    edge.sort_unstable();
    edge.dedup();
    edge
}

/// A line's text with digits as `#`, lowercased, spaces collapsed: the
/// same running header on every page, whatever its page number.
fn key(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .flat_map(char::to_lowercase)
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a line is a page folio: one number or roman numeral, perhaps
/// as `Page N`, `N of M` or `- N -`.
fn is_folio(text: &str) -> bool {
    static ROMAN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new("^c{0,3}(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$").expect("a valid pattern")
    });
    let lower = text.trim().to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == '-' || c == '|')
        .filter(|w| !w.is_empty() && *w != "page")
        .collect();
    let numeral =
        |w: &str| w.chars().all(|c| c.is_ascii_digit()) || (w.len() <= 8 && ROMAN.is_match(w));
    match words.as_slice() {
        [one] => numeral(one),
        [n, "of", m] => numeral(n) && numeral(m),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::layout::pdf::lines::Cell;
    use crate::model::pages::BoxPt;

    fn line(text: &str, y: f32) -> Line {
        Line {
            page: 0,
            cells: vec![Cell {
                text: text.into(),
                x0: 72.0,
                x1: 300.0,
            }],
            rect: BoxPt {
                x0: 72.0,
                y0: y,
                x1: 300.0,
                y1: y + 10.0,
            },
            size: 10.0,
            bold: false,
        }
    }

    #[test]
    fn repeated_edge_lines_and_folios_are_furniture() {
        let page = |n: usize, body: &str| {
            vec![
                line("Table of Contents", 760.0),
                line(
                    ["Overview", "Results", "Risks", "Markets", "Outlook"][n - 1],
                    700.0,
                ),
                line(body, 600.0),
                line("a second body line", 580.0),
                line("the third body line", 560.0),
                line("and a fourth", 540.0),
                line(&format!("3M Company {n}"), 60.0),
                line(&n.to_string(), 40.0),
            ]
        };
        let pages: Vec<Vec<Line>> = (1..=5).map(|n| page(n, &format!("body {n}"))).collect();
        let marks = furniture(&pages, &[792.0; 5]);
        for page in &marks {
            assert_eq!(page, &[true, false, false, false, false, false, true, true]);
        }
    }

    #[test]
    fn folios_are_recognised_and_text_is_not() {
        for folio in ["12", "Page 3", "iv", "- 7 -", "3 of 120", "Page 2 of 9"] {
            assert!(is_folio(folio), "{folio}");
        }
        for text in ["Item 7.", "2018 2017", "Net income 5,363 4,869", "civic"] {
            assert!(!is_folio(text), "{text}");
        }
    }
}
