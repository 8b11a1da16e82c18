//! A PDF's document information dictionary (the trailer's `/Info`): what
//! the file says about itself, as the document's metadata. `/Title`,
//! `/Author`, `/Subject`, `/Keywords` (a list of its comma- or
//! semicolon-separated words), `/Creator` and `/Producer` are texts;
//! `/CreationDate` and `/ModDate` become `created` and `modified` in RFC
//! 3339 (dates, so they compare as dates); any other text entry is kept
//! under its own name. Nothing here fails a PDF's reading: an entry that
//! cannot be read is left out.

use pdf_oxide::PdfDocument;
use pdf_oxide::optional_content::decode_pdf_text_string;
use serde_json::Value;

use crate::model::metadata::{Metadata, keywords};

/// Most entries of the dictionary read (a hostile file can hold many).
const MAX_ENTRIES: usize = 64;

/// The entries the PDF standard names.
const STANDARD: [&str; 8] = [
    "Title",
    "Author",
    "Subject",
    "Keywords",
    "Creator",
    "Producer",
    "CreationDate",
    "ModDate",
];

/// The metadata that `document`'s information dictionary gives (empty
/// without one).
pub fn metadata(document: &PdfDocument) -> Metadata {
    let Some(info) = (document.trailer().as_dict())
        .and_then(|trailer| trailer.get("Info"))
        .and_then(|info| document.resolve_object(info).ok())
    else {
        return Metadata::default();
    };
    let Some(entries) = info.as_dict() else {
        return Metadata::default();
    };
    let mut names: Vec<&String> = entries.keys().collect();
    // The standard entries first, so that none is shadowed by a custom
    // entry whose name reads the same as a key, nor left out past
    // MAX_ENTRIES.
    names.sort_by_key(|name| (!STANDARD.contains(&name.as_str()), name.as_str()));
    let read = names.into_iter().take(MAX_ENTRIES).filter_map(|name| {
        let value = document.resolve_object(&entries[name]).ok()?;
        let text = decode_pdf_text_string(value.as_string()?);
        Some(entry(name, text))
    });
    Metadata::from_source(read)
}

/// An entry as a metadata key and value.
fn entry(name: &str, text: String) -> (String, Value) {
    let key = match name {
        "CreationDate" => "created".to_owned(),
        "ModDate" => "modified".to_owned(),
        "Title" | "Author" | "Subject" | "Keywords" | "Creator" | "Producer" => {
            name.to_ascii_lowercase()
        }
        _ => name.to_owned(),
    };
    let value = match name {
        "Keywords" => Value::Array(keywords(&text)),
        "CreationDate" | "ModDate" => Value::String(date(&text).unwrap_or(text)),
        _ => Value::String(text),
    };
    (key, value)
}

/// A PDF date (`D:YYYYMMDDHHmmSSOHH'mm'`, every part after the year
/// optional) in RFC 3339 (`2023-01-05T16:17:20-05:00`), or the day alone
/// (`2023-01-05`) when it gives no offset from UTC; `None` when it is no
/// such date.
fn date(text: &str) -> Option<String> {
    let text = text.trim();
    let digits = text.strip_prefix("D:").unwrap_or(text);
    let numbers = digits.bytes().take_while(u8::is_ascii_digit).count();
    if !(4..=14).contains(&numbers) || numbers % 2 != 0 {
        return None;
    }
    let part = |at: usize, default: &'static str| {
        digits
            .get(at..at + 2)
            .filter(|_| at + 2 <= numbers)
            .unwrap_or(default)
    };
    let (year, month, day) = (&digits[..4], part(4, "01"), part(6, "01"));
    let (hour, minute, second) = (part(8, "00"), part(10, "00"), part(12, "00"));
    let zone = &digits[numbers..];
    let offset = match zone.as_bytes().first() {
        Some(b'Z') => "Z".to_owned(),
        Some(sign @ (b'+' | b'-')) => {
            let rest: String = zone[1..].chars().filter(char::is_ascii_digit).collect();
            let (hours, minutes) = (rest.get(..2)?, rest.get(2..4).unwrap_or("00"));
            format!("{}{hours}:{minutes}", *sign as char)
        }
        _ => return Some(format!("{year}-{month}-{day}")),
    };
    Some(format!(
        "{year}-{month}-{day}T{hour}:{minute}:{second}{offset}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_dates_become_rfc_3339() {
        for (pdf, rfc) in [
            ("D:20230105161720-05'00'", Some("2023-01-05T16:17:20-05:00")),
            ("D:20230504122116+00'00'", Some("2023-05-04T12:21:16+00:00")),
            ("D:20230815234220Z", Some("2023-08-15T23:42:20Z")),
            ("D:199812231952-08'00", Some("1998-12-23T19:52:00-08:00")),
            ("D:2001", Some("2001-01-01")),
            ("20230105", Some("2023-01-05")),
            ("D:202301051617", Some("2023-01-05")),
            ("D:20230105+05", Some("2023-01-05T00:00:00+05:00")),
            ("yesterday", None),
            ("D:123", None),
            ("D:2023010", None),
        ] {
            assert_eq!(date(pdf).as_deref(), rfc, "{pdf}");
        }
    }

    #[test]
    fn the_standard_entries_are_named_as_metadata_keys() {
        assert_eq!(
            entry("Keywords", "risk; pensions, debt".into()).1,
            serde_json::json!(["risk", " pensions", " debt"])
        );
        assert_eq!(entry("CreationDate", "D:2001".into()).0, "created");
        assert_eq!(entry("ModDate", "not a date".into()).1, "not a date");
        assert_eq!(
            entry("Company", "Amcor".into()),
            ("Company".into(), "Amcor".into())
        );
    }
}
