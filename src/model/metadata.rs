//! A document's metadata: the caller's (and its source's) facts about it,
//! such as its company, year or form, that queries filter on.
//!
//! Metadata is a flat JSON object. Keys are names (a letter or `_`, then
//! letters, digits and `_`); values are texts, numbers, booleans, dates or
//! lists of texts. A text in date form (`2023-05-18`, or RFC 3339 with an
//! offset) is a date, here and in queries alike, so dates compare as dates
//! whichever way they were given. The record keeps what was given, so a
//! date reads back as it was written.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::error::{Error, Result};
use crate::model::time;

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 64;

/// Longest text (or list element), in bytes: every value is also a key of
/// the store's index.
pub const MAX_TEXT_BYTES: usize = 1024;

/// Most elements of one list.
pub const MAX_LIST_LEN: usize = 256;

/// Most keys of one document's metadata.
pub const MAX_KEYS: usize = 256;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// A text that is not in date form.
    Text(String),
    /// A finite number.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A date or time: seconds since the Unix epoch, and the text given.
    Date {
        /// Seconds since the Unix epoch (UTC).
        at: i64,
        /// The text as given.
        text: String,
    },
    /// A list of texts (a list's elements are never read as dates).
    List(Vec<String>),
}

impl MetaValue {
    /// The value a text stands for: a date when it is in date form, else
    /// the text.
    pub fn text(text: String) -> MetaValue {
        match date_of(&text) {
            Some(at) => MetaValue::Date { at, text },
            None => MetaValue::Text(text),
        }
    }

    /// The value of metadata key `key` given as JSON; an error naming the
    /// key when it is no value metadata can hold.
    pub fn from_json(key: &str, value: &serde_json::Value) -> Result<MetaValue> {
        use serde_json::Value;
        let value = match value {
            Value::String(text) => MetaValue::text(checked_text(key, text)?),
            Value::Bool(b) => MetaValue::Bool(*b),
            Value::Number(number) => match number.as_f64() {
                Some(number) if number.is_finite() => MetaValue::Number(number),
                _ => return Err(invalid(key, format!("{number} is not a finite number"))),
            },
            Value::Array(items) => {
                if items.len() > MAX_LIST_LEN {
                    return Err(invalid(
                        key,
                        format!("a list holds at most {MAX_LIST_LEN} texts"),
                    ));
                }
                let texts = items.iter().map(|item| match item {
                    Value::String(text) => checked_text(key, text),
                    other => Err(invalid(
                        key,
                        format!("a list holds texts only, not {other}"),
                    )),
                });
                MetaValue::List(texts.collect::<Result<_>>()?)
            }
            Value::Null | Value::Object(_) => {
                return Err(invalid(
                    key,
                    format!(
                        "{value} is not a value metadata holds: give a text, a number, a boolean, a date or a list of texts"
                    ),
                ));
            }
        };
        Ok(value)
    }

    /// The value written as `text` on a command line (`key=text`): a
    /// number when it reads as one in plain form (`2020`, `-1.5`, not
    /// `007` or `1e3`), `true` or `false` a boolean, a date in date form,
    /// else the text.
    pub fn from_command_line(key: &str, text: &str) -> Result<MetaValue> {
        Ok(match text {
            "true" => MetaValue::Bool(true),
            "false" => MetaValue::Bool(false),
            _ if is_plain_number(text) => match text.parse::<f64>() {
                Ok(number) if number.is_finite() => MetaValue::Number(number),
                _ => MetaValue::text(checked_text(key, text)?),
            },
            _ => MetaValue::text(checked_text(key, text)?),
        })
    }

    /// The value as JSON (a date as the text it was given as).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            MetaValue::Text(text) | MetaValue::Date { text, .. } => text.clone().into(),
            // A whole number reads back as one (2020, not 2020.0).
            MetaValue::Number(number) if number.fract() == 0.0 && number.abs() < 2f64.powi(53) => {
                (*number as i64).into()
            }
            MetaValue::Number(number) => serde_json::Number::from_f64(*number)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            MetaValue::Bool(b) => (*b).into(),
            MetaValue::List(items) => items.clone().into(),
        }
    }
}

/// The seconds since the Unix epoch that `text` names when it is in date
/// form (`YYYY-MM-DD`, or RFC 3339 with an offset).
pub fn date_of(text: &str) -> Option<i64> {
    let looks_like_a_date = text.len() >= 10
        && text.as_bytes()[..10].iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    looks_like_a_date.then(|| time::parse(text).ok()).flatten()
}

/// What a filter asks of the values of one metadata key.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaTest {
    /// A value of the bounds' type (never a list) within them; equality is
    /// both bounds included at the value. At least one bound is given.
    Range(Bound<MetaValue>, Bound<MetaValue>),
    /// A list holding this text.
    Contains(String),
    /// Any value.
    Exists,
}

impl MetaTest {
    /// The test `value == wanted`.
    pub fn equal(wanted: MetaValue) -> MetaTest {
        MetaTest::Range(Bound::Included(wanted.clone()), Bound::Included(wanted))
    }

    /// Whether `value` passes.
    pub fn passes(&self, value: &MetaValue) -> bool {
        match self {
            MetaTest::Exists => true,
            MetaTest::Contains(wanted) => {
                matches!(value, MetaValue::List(items) if items.contains(wanted))
            }
            MetaTest::Range(low, high) => {
                let above = match low {
                    Bound::Included(low) => order(value, low).is_some_and(|o| o.is_ge()),
                    Bound::Excluded(low) => order(value, low).is_some_and(|o| o.is_gt()),
                    Bound::Unbounded => true,
                };
                let below = match high {
                    Bound::Included(high) => order(value, high).is_some_and(|o| o.is_le()),
                    Bound::Excluded(high) => order(value, high).is_some_and(|o| o.is_lt()),
                    Bound::Unbounded => true,
                };
                // Unbounded both ways names no type: nothing passes.
                let bounded = !matches!((low, high), (Bound::Unbounded, Bound::Unbounded));
                bounded && above && below
            }
        }
    }

    /// Whether `value`, of the test's type, lies beyond a range's upper
    /// bound, so that no larger value passes either (never for other tests).
    pub fn is_past(&self, value: &MetaValue) -> bool {
        match self {
            MetaTest::Range(_, Bound::Included(high)) => {
                order(value, high).is_some_and(|o| o.is_gt())
            }
            MetaTest::Range(_, Bound::Excluded(high)) => {
                order(value, high).is_some_and(|o| o.is_ge())
            }
            _ => false,
        }
    }
}

/// How `a` orders against `b` when both are of one type other than a list
/// (dates by their instant, texts bytewise); `None` otherwise.
pub fn order(a: &MetaValue, b: &MetaValue) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (MetaValue::Text(a), MetaValue::Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (MetaValue::Number(a), MetaValue::Number(b)) => a.partial_cmp(b),
        (MetaValue::Bool(a), MetaValue::Bool(b)) => Some(a.cmp(b)),
        (MetaValue::Date { at: a, .. }, MetaValue::Date { at: b, .. }) => Some(a.cmp(b)),
        _ => None,
    }
}

/// Whether `text` is a number in plain form: digits, an optional sign and
/// fraction, no leading zero.
fn is_plain_number(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    all_digits(whole) && all_digits(fraction) && (whole == "0" || !whole.starts_with('0'))
}

/// A document's metadata: keys in order, each with its value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata(BTreeMap<String, MetaValue>);

impl Metadata {
    /// The metadata a JSON object gives; an error naming the first key or
    /// value it cannot hold.
    pub fn from_json(value: &serde_json::Value) -> Result<Metadata> {
        let serde_json::Value::Object(object) = value else {
            return Err(Error::InvalidMetadata {
                key: String::new(),
                message: format!("metadata is a JSON object of keys and values, not {value}"),
            });
        };
        let mut metadata = Metadata::default();
        for (key, value) in object {
            metadata.set(key, MetaValue::from_json(key, value)?)?;
        }
        Ok(metadata)
    }

    /// The metadata as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            (self.0.iter())
                .map(|(key, value)| (key.clone(), value.to_json()))
                .collect(),
        )
    }

    /// The metadata of a record's bytes (JSON); `None` when they do not
    /// decode as metadata.
    pub fn decode(bytes: &[u8]) -> Option<Metadata> {
        let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        Metadata::from_json(&value).ok()
    }

    /// The record's bytes (JSON).
    pub fn encode(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }

    /// Sets `key` to `value`; an error when the key is no name or the
    /// metadata would hold more than [`MAX_KEYS`] keys.
    pub fn set(&mut self, key: &str, value: MetaValue) -> Result<()> {
        check_key(key)?;
        if self.0.len() >= MAX_KEYS && !self.0.contains_key(key) {
            return Err(invalid(
                key,
                format!("metadata holds at most {MAX_KEYS} keys"),
            ));
        }
        self.0.insert(key.to_owned(), value);
        Ok(())
    }

    /// Removes `key`; whether it was there.
    pub fn unset(&mut self, key: &str) -> bool {
        self.0.remove(key).is_some()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.0.get(key)
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keys and values, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetaValue)> {
        self.0.iter().map(|(key, value)| (key.as_str(), value))
    }

    /// The metadata a document's source gives about itself (an HTML page's
    /// `<title>` and `<meta>`, a PDF's information dictionary, Markdown
    /// front matter), read as well as it can be and never an error: each
    /// key becomes a name ([`source_key`]), texts have their whitespace
    /// collapsed, a list cut at [`MAX_LIST_LEN`] items, and an entry
    /// metadata cannot hold (an empty or over-long text, a nested value, a
    /// key past the limits) is left out. The first of two entries with one
    /// key is kept.
    pub fn from_source(entries: impl IntoIterator<Item = (String, serde_json::Value)>) -> Metadata {
        use serde_json::Value;
        let collapse = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut metadata = Metadata::default();
        for (raw, value) in entries {
            let Some(key) = source_key(&raw) else {
                continue;
            };
            let value = match value {
                Value::String(text) => Value::String(collapse(&text)),
                Value::Array(items) => Value::Array(
                    (items.iter())
                        .filter_map(|item| match item {
                            Value::String(text) => Some(collapse(text)),
                            Value::Number(n) => Some(n.to_string()),
                            Value::Bool(b) => Some(b.to_string()),
                            _ => None,
                        })
                        .filter(|text| !text.is_empty())
                        .take(MAX_LIST_LEN)
                        .map(Value::String)
                        .collect(),
                ),
                other => other,
            };
            if metadata.get(&key).is_some() || value.as_str().is_some_and(str::is_empty) {
                continue;
            }
            if let Ok(value) = MetaValue::from_json(&key, &value) {
                // Past MAX_KEYS the rest is left out.
                let _ = metadata.set(&key, value);
            }
        }
        metadata
    }

    /// This metadata with every key of `over` set to its value there.
    pub fn overlaid(mut self, over: &Metadata) -> Metadata {
        for (key, value) in &over.0 {
            self.0.insert(key.clone(), value.clone());
        }
        self
    }
}

/// Refuses a key that is not a name of at most [`MAX_KEY_BYTES`] bytes.
pub fn check_key(key: &str) -> Result<()> {
    let mut chars = key.chars();
    let named = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && key.len() <= MAX_KEY_BYTES;
    if named {
        Ok(())
    } else {
        Err(invalid(
            key,
            format!(
                "a key is a letter or _ followed by letters, digits and _ (at most {MAX_KEY_BYTES} bytes), as meta.KEY names it in queries"
            ),
        ))
    }
}

/// A source's list of keywords (`risk, pensions; debt`) as list items: its
/// words between commas and semicolons (kept as written; blanks dropped by
/// [`Metadata::from_source`]).
pub fn keywords(text: &str) -> Vec<serde_json::Value> {
    (text.split([',', ';']))
        .map(|k| serde_json::Value::String(k.into()))
        .collect()
}

/// A source's name for an entry as a metadata key: lowercased, each run of
/// characters other than letters and digits one `_`, and a `_` where a
/// capital follows a small letter or digit (`og:site-name` is
/// `og_site_name`, `CreationDate` is `creation_date`), a `_` before a
/// leading digit; `None` when no letter or digit is left or the key would
/// be over [`MAX_KEY_BYTES`].
pub fn source_key(name: &str) -> Option<String> {
    let mut key = String::new();
    let mut after_small = false;
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && after_small {
                key.push('_');
            }
            key.push(c.to_ascii_lowercase());
            after_small = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !key.is_empty() && !key.ends_with('_') {
                key.push('_');
            }
            after_small = false;
        }
    }
    while key.ends_with('_') {
        key.pop();
    }
    if key.starts_with(|c: char| c.is_ascii_digit()) {
        key.insert(0, '_');
    }
    (!key.is_empty() && key.len() <= MAX_KEY_BYTES).then_some(key)
}

/// `text` when metadata can hold it (no NUL, at most [`MAX_TEXT_BYTES`]).
fn checked_text(key: &str, text: &str) -> Result<String> {
    if text.contains('\0') {
        return Err(invalid(key, "a text holds no NUL character".to_owned()));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(invalid(
            key,
            format!(
                "a text of {} bytes is longer than the {MAX_TEXT_BYTES} metadata holds",
                text.len()
            ),
        ));
    }
    Ok(text.to_owned())
}

fn invalid(key: &str, message: String) -> Error {
    Error::InvalidMetadata {
        key: key.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_s_names_become_keys() {
        for (name, key) in [
            ("author", Some("author")),
            ("og:site-name", Some("og_site_name")),
            ("CreationDate", Some("creation_date")),
            ("DC.Title", Some("dc_title")),
            ("  Twitter::Card  ", Some("twitter_card")),
            ("2fa", Some("_2fa")),
            ("::", None),
            ("", None),
        ] {
            assert_eq!(source_key(name).as_deref(), key, "{name:?}");
        }
        assert_eq!(source_key(&"k".repeat(MAX_KEY_BYTES + 1)), None);
    }

    #[test]
    fn a_source_s_metadata_keeps_what_metadata_can_hold_and_never_fails() {
        use serde_json::json;
        let entries = [
            ("Title", json!("  Annual   report\n2023 ")),
            ("title", json!("a second title")),
            (
                "keywords",
                json!(["risk", " pensions ", "", 7, {"nested": 1}]),
            ),
            ("CreationDate", json!("2023-01-05T16:17:20-05:00")),
            ("pages", json!(3)),
            ("draft", json!(false)),
            ("empty", json!("")),
            ("huge", json!("x".repeat(MAX_TEXT_BYTES + 1))),
            ("nested", json!({"a": 1})),
            ("nul", json!("a\0b")),
            ("--", json!("no key")),
        ];
        let metadata = Metadata::from_source(entries.into_iter().map(|(k, v)| (k.to_owned(), v)));
        assert_eq!(
            metadata.to_json(),
            json!({
                "title": "Annual report 2023",
                "keywords": ["risk", "pensions", "7"],
                "creation_date": "2023-01-05T16:17:20-05:00",
                "pages": 3,
                "draft": false,
            })
        );
        assert!(matches!(
            metadata.get("creation_date"),
            Some(MetaValue::Date { .. })
        ));
    }

    #[test]
    fn json_values_are_typed_and_read_back_as_given() {
        let given = serde_json::json!({
            "company": "Boeing", "year": 2020, "audited": true,
            "filed": "2020-02-03", "tags": ["risk", "2020-01-01"], "ratio": -0.5,
        });
        let metadata = Metadata::from_json(&given).unwrap();
        assert_eq!(
            metadata.get("company"),
            Some(&MetaValue::Text("Boeing".into()))
        );
        assert_eq!(metadata.get("year"), Some(&MetaValue::Number(2020.0)));
        assert_eq!(metadata.get("audited"), Some(&MetaValue::Bool(true)));
        assert_eq!(
            metadata.get("filed"),
            Some(&MetaValue::Date {
                at: time::parse("2020-02-03").unwrap(),
                text: "2020-02-03".into()
            })
        );
        let tags = vec!["risk".to_owned(), "2020-01-01".to_owned()];
        assert_eq!(metadata.get("tags"), Some(&MetaValue::List(tags)));
        assert_eq!(metadata.to_json(), given);
        assert_eq!(Metadata::decode(&metadata.encode()), Some(metadata));
    }

    #[test]
    fn what_metadata_cannot_hold_is_refused_naming_the_key() {
        for (given, key) in [
            (serde_json::json!({"a b": 1}), "a b"),
            (serde_json::json!({"9lives": 1}), "9lives"),
            (serde_json::json!({"nested": {"x": 1}}), "nested"),
            (serde_json::json!({"none": null}), "none"),
            (serde_json::json!({"mixed": ["a", 1]}), "mixed"),
            (serde_json::json!({"nul": "a\u{0}b"}), "nul"),
            (
                serde_json::json!({"long": "x".repeat(MAX_TEXT_BYTES + 1)}),
                "long",
            ),
        ] {
            match Metadata::from_json(&given) {
                Err(Error::InvalidMetadata { key: named, .. }) => assert_eq!(named, key),
                other => panic!("{given}: {other:?}"),
            }
        }
        assert!(Metadata::from_json(&serde_json::json!([1])).is_err());
        let mut metadata = Metadata::default();
        for i in 0..MAX_KEYS {
            metadata
                .set(&format!("k{i}"), MetaValue::Bool(true))
                .unwrap();
        }
        assert!(metadata.set("one_more", MetaValue::Bool(true)).is_err());
        assert!(
            metadata.set("k0", MetaValue::Bool(false)).is_ok(),
            "replacing is no new key"
        );
    }

    #[test]
    fn command_line_values_are_numbers_only_in_plain_form() {
        let value = |text| MetaValue::from_command_line("k", text).unwrap();
        assert_eq!(value("2020"), MetaValue::Number(2020.0));
        assert_eq!(value("-1.5"), MetaValue::Number(-1.5));
        assert_eq!(value("0.25"), MetaValue::Number(0.25));
        assert_eq!(value("true"), MetaValue::Bool(true));
        for text in [
            "007", "1e3", "1.", ".5", "-", "", "10-K", "inf", "NaN", "1_000",
        ] {
            assert_eq!(value(text), MetaValue::Text(text.into()), "{text:?}");
        }
        assert!(matches!(value("2021-12-31"), MetaValue::Date { .. }));
        assert!(matches!(
            value("2021-12-31T10:00:00+02:00"),
            MetaValue::Date { .. }
        ));
        assert_eq!(value("2021-13-45"), MetaValue::Text("2021-13-45".into()));
    }

    #[test]
    fn overlaid_metadata_wins_key_by_key() {
        let base = Metadata::from_json(&serde_json::json!({"a": 1, "b": 2})).unwrap();
        let over = Metadata::from_json(&serde_json::json!({"b": 3, "c": 4})).unwrap();
        assert_eq!(
            base.overlaid(&over).to_json(),
            serde_json::json!({"a": 1, "b": 3, "c": 4})
        );
    }
}
