//! Markdown front matter: the YAML mapping between `---` lines at the top of
//! a file, read as the document's own metadata (`title`, `author`, `date`,
//! `tags`, …).
//!
//! Only what metadata can hold is taken: a key whose value is a text, a
//! number, a boolean or a date (a text in date form), or a list of those
//! (as texts). Nested mappings, aliases and tagged values are left out, as
//! is front matter that is not a mapping or does not parse; nothing here
//! fails an ingest. The YAML is read as events (yaml-rust2's parser), so
//! an alias is never expanded and the work stays linear in the text, which
//! is read only up to [`MAX_FRONT_MATTER_BYTES`].

use serde_json::Value;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::TScalarStyle;

use crate::model::metadata::Metadata;

/// Longest front matter read, in bytes; longer front matter gives nothing.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;

/// The metadata that the front matter `yaml` gives (empty when it gives
/// none).
pub fn metadata(yaml: &str) -> Metadata {
    if yaml.trim().is_empty() || yaml.len() > MAX_FRONT_MATTER_BYTES {
        return Metadata::default();
    }
    let Some(events) = events_of(yaml) else {
        return Metadata::default();
    };
    let mut events = (events.into_iter())
        .filter(|event| !matches!(event, Event::StreamStart | Event::DocumentStart));
    if !matches!(events.next(), Some(Event::MappingStart(..))) {
        return Metadata::default();
    }
    let mut entries = Vec::new();
    while let Some(event) = events.next() {
        let key = match event {
            Event::Scalar(key, ..) => key,
            // A key that is not a plain text: it and its value are skipped.
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                skip(&mut events);
                skip_value(&mut events);
                continue;
            }
            Event::Alias(_) => {
                skip_value(&mut events);
                continue;
            }
            _ => break,
        };
        match events.next() {
            Some(Event::Scalar(text, style, _, None)) => {
                if let Some(value) = scalar(text, style) {
                    entries.push((key, value));
                }
            }
            Some(Event::SequenceStart(_, None)) => {
                if let Some(items) = list(&mut events) {
                    entries.push((key, Value::Array(items)));
                }
            }
            Some(Event::MappingStart(..) | Event::SequenceStart(..)) => skip(&mut events),
            Some(Event::Scalar(..) | Event::Alias(_)) => {}
            _ => break,
        }
    }
    Metadata::from_source(entries)
}

/// The events of `yaml`, up to the end of its stream; `None` when it does
/// not parse. (At most one event per byte of the text.)
fn events_of(yaml: &str) -> Option<Vec<Event>> {
    let mut parser = Parser::new_from_str(yaml);
    let mut events = Vec::new();
    loop {
        match parser.next_token().ok()? {
            (Event::StreamEnd, _) => return Some(events),
            (event, _) => events.push(event),
        }
    }
}

/// A scalar's value: a plain `true`/`false` is a boolean and a plain
/// number a number, as YAML 1.2's core schema reads them; `null`, `~` and
/// nothing are no value; everything else is a text.
fn scalar(text: String, style: TScalarStyle) -> Option<Value> {
    if style != TScalarStyle::Plain {
        return Some(Value::String(text));
    }
    if is_null(&text) {
        return None;
    }
    match text.as_str() {
        "true" | "True" | "TRUE" => Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => Some(Value::Bool(false)),
        _ => Some(number(&text).unwrap_or(Value::String(text))),
    }
}

/// Whether a plain scalar is YAML's null.
fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A plain scalar written as a decimal number (`2020`, `-1.5`, `6.02e23`).
fn number(text: &str) -> Option<Value> {
    let decimal = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && text.bytes().any(|b| b.is_ascii_digit());
    let parsed: f64 = text.parse().ok().filter(|_| decimal)?;
    serde_json::Number::from_f64(parsed).map(Value::Number)
}

/// The rest of a sequence whose start was read, as texts (each as written,
/// nulls left out); `None` (the sequence skipped) when an item is not a
/// scalar.
fn list(events: &mut impl Iterator<Item = Event>) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    loop {
        match events.next()? {
            Event::SequenceEnd => return Some(items),
            Event::Scalar(text, style, _, None) => {
                if style != TScalarStyle::Plain || !is_null(&text) {
                    items.push(Value::String(text));
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                skip(events);
                skip(events);
                return None;
            }
            _ => {
                skip(events);
                return None;
            }
        }
    }
}

/// Reads past the rest of a mapping or sequence whose start was read.
fn skip(events: &mut impl Iterator<Item = Event>) {
    let mut depth = 1usize;
    while depth > 0 {
        match events.next() {
            Some(Event::MappingStart(..) | Event::SequenceStart(..)) => depth += 1,
            Some(Event::MappingEnd | Event::SequenceEnd) => depth -= 1,
            Some(_) => {}
            None => return,
        }
    }
}

/// Reads past one value: a scalar or alias, or a whole mapping or sequence.
fn skip_value(events: &mut impl Iterator<Item = Event>) {
    if let Some(Event::MappingStart(..) | Event::SequenceStart(..)) = events.next() {
        skip(events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(yaml: &str) -> Value {
        metadata(yaml).to_json()
    }

    #[test]
    fn a_mapping_of_texts_numbers_booleans_dates_and_lists_is_read() {
        let yaml = "title: Pension obligations\nyear: 2023\nratio: -1.5\ndraft: false\n\
                    filed: 2023-02-08\nquoted: '2023'\ntags: [risk, 'pensions', 7]\n\
                    authors:\n  - Ada\n  - Grace\nnothing: ~\nempty:\n";
        assert_eq!(
            read(yaml),
            json!({
                "title": "Pension obligations", "year": 2023, "ratio": -1.5, "draft": false,
                "filed": "2023-02-08", "quoted": "2023", "tags": ["risk", "pensions", "7"],
                "authors": ["Ada", "Grace"],
            })
        );
        assert!(matches!(
            metadata(yaml).get("filed"),
            Some(crate::model::metadata::MetaValue::Date { .. })
        ));
    }

    #[test]
    fn what_metadata_cannot_hold_is_left_out_and_the_rest_kept() {
        let yaml = "nested: {a: 1}\nlists: [[1], 2]\ntagged: !custom x\n[complex, key]: 1\n\
                    anchor: &a one\nalias: *a\nkept: yes\n";
        assert_eq!(read(yaml), json!({"anchor": "one", "kept": "yes"}));
    }

    #[test]
    fn front_matter_that_is_no_mapping_or_does_not_parse_gives_nothing() {
        for yaml in [
            "- a\n- b\n",
            "just text\n",
            "a: [unclosed\n",
            "",
            "key: 'open\n",
        ] {
            assert_eq!(read(yaml), json!({}), "{yaml:?}");
        }
        let long = format!("title: {}\n", "x".repeat(MAX_FRONT_MATTER_BYTES));
        assert_eq!(read(&long), json!({}));
    }

    #[test]
    fn a_billion_laughs_is_not_expanded() {
        let mut yaml = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..9 {
            let refs = vec![format!("*a{}", level - 1); 9].join(", ");
            yaml.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        yaml.push_str("title: Laughs\n");
        let read = metadata(&yaml);
        assert_eq!(
            read.get("title").map(|v| v.to_json()),
            Some(json!("Laughs"))
        );
        assert_eq!(read.to_json()["a0"].as_array().map(Vec::len), Some(9));
        assert!(read.get("a8").is_none());
    }
}
