//! Tables: runs of lines split into cells at column gutters, at least one
//! of them a figure (the rows of a financial statement, a schedule, a
//! price list). Short label lines between such rows (`Cash Flows from
//! Investing Activities`) belong to the table.

use super::lines::{Cell, Line};

/// Fewest rows a table has.
const MIN_ROWS: usize = 2;
/// Longest label line (in words) taken into a table between its rows
/// (a row label wrapped over two lines is two such lines).
const LABEL_WORDS: usize = 16;
/// How many label lines in a row a table takes.
const LABEL_RUN: usize = 3;

/// Which of a page's lines (not furniture) are table rows.
pub fn table_rows(lines: &[Line], furniture: &[bool]) -> Vec<bool> {
    let tabular: Vec<bool> = (lines.iter().zip(furniture))
        .map(|(line, &skip)| !skip && is_tabular(line))
        .collect();
    let mut rows = tabular.clone();
    // Label lines between rows: at most LABEL_RUN short lines with a row on
    // both sides.
    let mut i = 0;
    while i < lines.len() {
        if tabular[i] || furniture[i] {
            i += 1;
            continue;
        }
        let run_end = (i..lines.len())
            .find(|&j| tabular[j] || furniture[j] || !is_label(&lines[j]))
            .unwrap_or(lines.len());
        let bounded = i > 0 && tabular[i - 1] && run_end < lines.len() && tabular[run_end];
        if bounded && run_end > i && run_end - i <= LABEL_RUN {
            rows[i..run_end].iter_mut().for_each(|r| *r = true);
        }
        i = run_end.max(i + 1);
    }
    // A run too short to be a table is not one.
    let mut start = 0;
    while start < rows.len() {
        if !rows[start] {
            start += 1;
            continue;
        }
        let end = (start..rows.len())
            .find(|&j| !rows[j])
            .unwrap_or(rows.len());
        if end - start < MIN_ROWS || !tabular[start..end].iter().any(|&t| t) {
            rows[start..end].iter_mut().for_each(|r| *r = false);
        }
        start = end;
    }
    rows
}

/// A row's text: its cells in column order, ` | ` between them, a lone
/// currency sign joined to the figure after it.
pub fn row_text(line: &Line) -> String {
    let mut cells: Vec<String> = Vec::with_capacity(line.cells.len());
    let mut pending_sign = String::new();
    for Cell { text, .. } in &line.cells {
        if is_currency_sign(text) {
            pending_sign.push_str(text.trim());
            continue;
        }
        cells.push(format!("{pending_sign}{text}"));
        pending_sign.clear();
    }
    if !pending_sign.is_empty() {
        cells.push(pending_sign);
    }
    cells.join(" | ")
}

/// A line of two or more cells, one of them a figure.
fn is_tabular(line: &Line) -> bool {
    line.cells.len() >= 2 && line.cells.iter().any(|c| is_figure(&c.text))
}

/// A short line that could label rows (a sentence, ending in a full stop
/// after a few words, does not).
fn is_label(line: &Line) -> bool {
    let [cell] = line.cells.as_slice() else {
        return false;
    };
    let text = cell.text.trim();
    let words = text.split_whitespace().count();
    words <= LABEL_WORDS && !(text.ends_with('.') && words > 4)
}

/// A figure: digits with the signs tables write around them (`$`, `%`,
/// parentheses, commas, points), or a dash standing for nothing.
fn is_figure(text: &str) -> bool {
    let t = text.trim();
    if matches!(t, "—" | "–" | "-" | "—%" | "n/a" | "N/A" | "NM") {
        return true;
    }
    let mut digits = 0;
    for c in t.chars() {
        match c {
            '0'..='9' => digits += 1,
            '$' | '€' | '£' | '¥' | '%' | '(' | ')' | ',' | '.' | '-' | '—' | '–' | ' ' | '+' =>
                {}
            _ => return false,
        }
    }
    digits > 0
}

/// A cell that is only a currency sign (typeset in a column of its own).
fn is_currency_sign(text: &str) -> bool {
    matches!(text.trim(), "$" | "€" | "£" | "¥" | "$(" | "(")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pages::BoxPt;

    fn line(cells: &[&str]) -> Line {
        Line {
            page: 0,
            cells: (cells.iter().enumerate())
                .map(|(i, t)| Cell {
                    text: (*t).into(),
                    x0: 72.0 + 100.0 * i as f32,
                    x1: 150.0 + 100.0 * i as f32,
                })
                .collect(),
            rect: BoxPt::default(),
            size: 10.0,
            bold: false,
        }
    }

    #[test]
    fn rows_with_figures_and_their_labels_make_a_table() {
        let lines = [
            line(&["Our capital spending rose in the year, as the table below shows in detail."]),
            line(&["(Millions)", "2018", "2017"]),
            line(&["Cash Flows from Investing Activities"]),
            line(&["Purchases of PP&E", "$", "(1,577)", "$", "(1,373)"]),
            line(&["Other net", "9", "(6)"]),
            line(&[
                "Adjustments to reconcile net income including noncontrolling interest to net cash",
            ]),
            line(&["provided by operating activities"]),
            line(&["Depreciation", "1,488", "1,544"]),
            line(&[
                "The figures above include the acquisitions described in Note 3 of the notes to the statements.",
            ]),
            line(&["A lone", "12"]),
        ];
        let rows = table_rows(&lines, &[false; 10]);
        assert_eq!(
            rows,
            [
                false, true, true, true, true, true, true, true, false, false
            ]
        );
        assert_eq!(
            row_text(&lines[3]),
            "Purchases of PP&E | $(1,577) | $(1,373)"
        );
    }

    #[test]
    fn figures_are_told_from_words() {
        for figure in ["(1,577)", "$ 5,363", "12.5%", "—", "2018"] {
            assert!(is_figure(figure), "{figure}");
        }
        for word in ["Total", "Q4 2018", "n.a"] {
            assert!(!is_figure(word), "{word}");
        }
    }
}
