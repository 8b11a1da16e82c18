//! The `KEY=VALUE` form of metadata on the command line, which `ingest
//! --meta`, `session add --meta` and `meta set` share.

use std::path::Path;

use edudb::{Error, MetaValue, Metadata};

/// The metadata given on the command line: the JSON object in `json_file`
/// (`ingest --meta-json`), then each `KEY=VALUE` of `pairs` over it
/// (`ingest --meta`, `session add --meta`).
pub(super) fn given(pairs: &[String], json_file: Option<&Path>) -> edudb::Result<Metadata> {
    let mut metadata = match json_file {
        None => Metadata::default(),
        Some(path) => {
            let io = |source| Error::Io {
                path: path.to_owned(),
                source,
            };
            let text = std::fs::read_to_string(path).map_err(io)?;
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                Error::Usage(format!("--meta-json {}: not JSON: {e}", path.display()))
            })?;
            Metadata::from_json(&value)?
        }
    };
    for pair in pairs {
        let (key, value) = assignment(pair)?;
        metadata.set(&key, value)?;
    }
    Ok(metadata)
}

/// One `KEY=VALUE` (the value typed as [`MetaValue::from_command_line`]
/// says) or `KEY:=JSON`.
pub(super) fn assignment(pair: &str) -> edudb::Result<(String, MetaValue)> {
    let Some((key, value)) = pair.split_once('=') else {
        return Err(Error::Usage(format!(
            "metadata {pair:?}: expected KEY=VALUE or KEY:=JSON"
        )));
    };
    edudb::model::metadata::check_key(key.strip_suffix(':').unwrap_or(key))?;
    let value = match key.strip_suffix(':') {
        Some(key) => {
            let json: serde_json::Value = serde_json::from_str(value).map_err(|e| {
                Error::Usage(format!(
                    "metadata {pair:?}: the value after := is not JSON: {e}"
                ))
            })?;
            return Ok((key.to_owned(), MetaValue::from_json(key, &json)?));
        }
        None => MetaValue::from_command_line(key, value)?,
    };
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_are_typed_and_json_values_given_with_colon_equals() {
        assert_eq!(
            assignment("year=2020").unwrap(),
            ("year".into(), MetaValue::Number(2020.0))
        );
        assert_eq!(
            assignment("form=10-K").unwrap(),
            ("form".into(), MetaValue::Text("10-K".into()))
        );
        assert_eq!(
            assignment("cik=0000320193").unwrap(),
            ("cik".into(), MetaValue::Text("0000320193".into()))
        );
        assert_eq!(
            assignment("note=a=b").unwrap(),
            ("note".into(), MetaValue::Text("a=b".into()))
        );
        assert_eq!(
            assignment(r#"tags:=["risk","cash"]"#).unwrap(),
            (
                "tags".into(),
                MetaValue::List(vec!["risk".into(), "cash".into()])
            )
        );
        for bad in ["year", "tags:=[1", "bad key=1", "n:={\"a\":1}"] {
            assert!(assignment(bad).is_err(), "{bad}");
        }
    }
}
